package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRunComputedColumns: a file run over epoch milliseconds with a
// computed event time. A late event's record carries the decoded row with
// the computed cell and the input line as read (which, without computed
// cells, replays as it was); a dead letter names the computed column; the
// summary counts both.
func TestRunComputedColumns(t *testing.T) {
	sql := writeFile(t, "q.sql", `CREATE SOURCE clicks (k VARCHAR, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3),
  WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT k, count(*) AS n, max(ts) AS last FROM clicks GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`)
	dir := t.TempDir()
	late, dead := filepath.Join(dir, "late.jsonl"), filepath.Join(dir, "dead.jsonl")
	lateLine := `{"k":"a","ms":1784368802000}`
	in := `{"k":"a","ms":1784368801000}
{"k":"a","ms":1784368812345}
` + lateLine + `
{"k":"a","ms":"soon"}
`
	out, errb, code := runArgs(t, in, "run", sql, "--late-output", late, "--dead-letter", dead)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if want := `["a", "2026-07-18 10:00:00"]	{"k": "a", "n": 1, "last": "2026-07-18 10:00:01"}
["a", "2026-07-18 10:00:10"]	{"k": "a", "n": 1, "last": "2026-07-18 10:00:12.345"}
`; out != want {
		t.Errorf("changelog:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errb, "4 events read, 1 malformed, 0 eval errors, 1 late") {
		t.Errorf("summary: %s", errb)
	}
	b, _ := os.ReadFile(late)
	var rec struct {
		Row   map[string]any `json:"row"`
		Line  int            `json:"line"`
		Event string         `json:"event"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Line != 3 || rec.Event != lateLine || len(rec.Row) != 3 || rec.Row["ts"] != "2026-07-18 10:00:02" || rec.Row["ms"] != float64(1784368802000) {
		t.Errorf("late output %s (%v)", b, err)
	}
	if b, _ := os.ReadFile(dead); !strings.Contains(string(b), `"line": 4`) || !strings.Contains(string(b), `column \"ms\"`) {
		t.Errorf("dead letter: %s", b)
	}
}

// TestRunInferEpochWindows: run --infer over events whose only time is
// epoch milliseconds infers a computed event time with a watermark, so a
// window query over it runs without a hand-written CREATE SOURCE.
func TestRunInferEpochWindows(t *testing.T) {
	q := writeFile(t, "q.sql", "SELECT user_id, window_start, count(*) AS n FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '1' MINUTE)) GROUP BY user_id, window_start;\n")
	in := `{"user_id":"a","ts_ms":1784368800000}
{"user_id":"a","ts_ms":1784368830000}
{"user_id":"a","ts_ms":1784368861000}
`
	out, errb, code := runArgs(t, in, "run", q, "--infer", "--input", "-")
	if code != 0 || !strings.Contains(errb, "event_time AS TO_TIMESTAMP_LTZ(ts_ms, 3)") {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	want := `["a", "2026-07-18 10:00:00"]	{"user_id": "a", "window_start": "2026-07-18 10:00:00", "n": 2}
["a", "2026-07-18 10:01:00"]	{"user_id": "a", "window_start": "2026-07-18 10:01:00", "n": 1}
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s\n%s", out, want, errb)
	}
}

// TestRunKafkaComputedBinding: over Kafka, a computed column is part of
// what a query name is bound to: the same name with the computed
// expression changed is refused, naming the columns before and after.
func TestRunKafkaComputedBinding(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	if code, errs := kafkaCLI(t, `{"k":"a","ms":1784368800123}`+"\n", "produce", "--to", "kafka://"+addr+"/in"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	src := `CREATE SOURCE clicks (k VARCHAR, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts) WITH (format = 'json');
CREATE VIEW per_key AS SELECT k, max(ts) AS last FROM clicks GROUP BY k;
`
	sql := writeFile(t, "q.sql", src)
	run := func() (int, string) {
		return kafkaCLI(t, "", "run", sql, "--source", "kafka://"+addr+"/in", "--sink", "kafka://"+addr+"/out",
			"--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	}
	if code, errs := run(); code != 0 || !strings.Contains(errs, "1 events consumed, 0 malformed") {
		t.Fatalf("first run: exit %d:\n%s", code, errs)
	}
	got := consumeLatest(t, addr, "out", map[string]string{`["a"]`: `{"k": "a", "last": "2026-07-18 10:00:00.123"}`}, 30*time.Second)
	if got[`["a"]`] != `{"k": "a", "last": "2026-07-18 10:00:00.123"}` {
		t.Errorf("sink: %v", got)
	}
	os.WriteFile(sql, []byte(strings.Replace(src, "TO_TIMESTAMP_LTZ(ms, 3)", "TO_TIMESTAMP_LTZ(ms, 0)", 1)), 0o644)
	code, errs := run()
	if code == 0 || !strings.Contains(errs, "ts TIMESTAMP AS to_timestamp_ltz(ms, 3)") || !strings.Contains(errs, "ts TIMESTAMP AS to_timestamp_ltz(ms, 0)") {
		t.Errorf("a changed computed column under the same query name: exit %d:\n%s", code, errs)
	}
}
