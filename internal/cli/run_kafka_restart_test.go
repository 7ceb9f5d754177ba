package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kafkaCLI runs one ubik command against the test broker and returns its
// exit status and stderr.
func kafkaCLI(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	env, _, errb := runTestEnv(stdin)
	code := Main(context.Background(), env, args)
	return code, errb.String()
}

const restartSQL = `CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND);
CREATE VIEW totals AS SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start, count(*) AS orders
  FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE);
`

// TestRunKafkaUntilCaughtUpTwice is the README's restart: produce 10
// events, run --until-caught-up (10 consumed, 5 records), produce 3 more
// (one for a window the first run finalized, two for a new window), run
// the same command again: 3 consumed, 1 late (in the summary and the late
// output), 2 records.
func TestRunKafkaUntilCaughtUpTwice(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	dir := t.TempDir()
	sql := filepath.Join(dir, "totals.sql")
	if err := os.WriteFile(sql, []byte(restartSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	var first strings.Builder
	for i := 0; i < 10; i++ {
		// 5 groups: m0..m4, all in the minute 10:00.
		fmt.Fprintf(&first, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:00:%02d"}`+"\n", i%5, i, i)
	}
	to := "kafka://" + addr + "/events"
	if code, errs := kafkaCLI(t, first.String(), "produce", "--to", to, "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	late := filepath.Join(dir, "late.jsonl")
	run := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/totals", "--instance-id", "a",
		"--until-caught-up", "--late-output", late, "--log-level", "warn"}
	code, errs := kafkaCLI(t, "", run...)
	if code != 0 || !strings.Contains(errs, "10 events consumed") || !strings.Contains(errs, "0 late, 5 records produced") || !strings.Contains(errs, "caught up") {
		t.Fatalf("first run: exit %d, want 10 events consumed, 0 late, 5 records, caught up:\n%s", code, errs)
	}
	second := `{"merchant":"m1","amount":100,"event_time":"2026-07-18 10:00:30"}
{"merchant":"m1","amount":101,"event_time":"2026-07-18 10:05:00"}
{"merchant":"m2","amount":102,"event_time":"2026-07-18 10:05:01"}
`
	if code, errs := kafkaCLI(t, second, "produce", "--to", to); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	code, errs = kafkaCLI(t, "", run...)
	if code != 0 || !strings.Contains(errs, "3 events consumed") || !strings.Contains(errs, "1 late, 2 records produced") || !strings.Contains(errs, "caught up") {
		t.Fatalf("second run: exit %d, want 3 events consumed, 1 late, 2 records, caught up:\n%s", code, errs)
	}
	b, err := os.ReadFile(late)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"key": ["m1", "2026-07-18 10:00:00"]`) || !strings.Contains(lines[0], `"reason": "window already final"`) {
		t.Fatalf("late output: %q, want one line for [\"m1\", \"2026-07-18 10:00:00\"]", b)
	}
	want := map[string]string{
		`["m1", "2026-07-18 10:05:00"]`: `{"merchant": "m1", "window_start": "2026-07-18 10:05:00", "orders": 1}`,
		`["m2", "2026-07-18 10:05:00"]`: `{"merchant": "m2", "window_start": "2026-07-18 10:05:00", "orders": 1}`,
	}
	for m := 0; m < 5; m++ {
		// Two events each; m1's window is unchanged by the late event.
		want[fmt.Sprintf(`["m%d", "2026-07-18 10:00:00"]`, m)] = fmt.Sprintf(`{"merchant": "m%d", "window_start": "2026-07-18 10:00:00", "orders": 2}`, m)
	}
	got := consumeLatest(t, addr, "totals", want, 30*time.Second)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sink key %s: %s, want %s", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("sink: %d keys, want %d: %v", len(got), len(want), got)
	}
}
