package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// The late line carries the record value as produced, as a file run's
	// carries its input line, so the event can be replayed; a topic has no
	// line numbers.
	lateEvent := strings.SplitN(second, "\n", 2)[0]
	if !strings.HasSuffix(lines[0], `, "event": `+strconv.Quote(lateEvent)+"}") || strings.Contains(lines[0], `"line"`) {
		t.Fatalf("late output: %s, want it to end with the event %s and have no line number", lines[0], lateEvent)
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

// TestRunKafkaBinding: the README's query name run again over another
// source topic is refused, with a message that names what differs and
// the ways out; --reset-state starts it over on the new topic and
// produces its records; the same command again (no flag) resumes.
func TestRunKafkaBinding(t *testing.T) {
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
	events := func(n, minute int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:%02d:%02d"}`+"\n", i%2, i, minute, i%60)
		}
		return b.String()
	}
	for topic, in := range map[string]string{"a": events(10, 0), "b": events(50, 1)} {
		if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/"+topic); code != 0 {
			t.Fatalf("produce: exit %d: %s", code, errs)
		}
	}
	run := func(topic string, extra ...string) (int, string) {
		return kafkaCLI(t, "", append([]string{"run", sql, "--source", "kafka://" + addr + "/" + topic, "--sink", "kafka://" + addr + "/totals",
			"--instance-id", "a", "--until-caught-up", "--log-level", "warn"}, extra...)...)
	}
	if code, errs := run("a"); code != 0 || !strings.Contains(errs, "10 events consumed") {
		t.Fatalf("first run: exit %d:\n%s", code, errs)
	}
	code, errs := run("b")
	if code == 0 {
		t.Fatalf("the same query name over another source topic ran:\n%s", errs)
	}
	for _, w := range []string{"the source topic was a, now b", "totals-state", "consumer groups totals-in and totals", "new name", "--reset-state"} {
		if !strings.Contains(errs, w) {
			t.Errorf("refusal does not say %q:\n%s", w, errs)
		}
	}
	code, errs = run("b", "--reset-state")
	if code != 0 || !strings.Contains(errs, "50 events consumed, 0 malformed, 0 eval errors, 0 late, 2 records produced") ||
		!strings.Contains(errs, "deleted its consumer groups") {
		t.Fatalf("--reset-state: exit %d, want 50 events consumed, 0 late, 2 records, and what was discarded:\n%s", code, errs)
	}
	want := map[string]string{}
	for m := 0; m < 2; m++ {
		want[fmt.Sprintf(`["m%d", "2026-07-18 10:01:00"]`, m)] = fmt.Sprintf(`{"merchant": "m%d", "window_start": "2026-07-18 10:01:00", "orders": 25}`, m)
	}
	got := consumeLatest(t, addr, "totals", want, 30*time.Second)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sink key %s: %s, want %s", k, got[k], v)
		}
	}
	// Unchanged: resumes from the committed offsets (nothing new).
	if code, errs := run("b"); code != 0 || !strings.Contains(errs, "0 events consumed") || !strings.Contains(errs, "caught up") {
		t.Fatalf("unchanged restart: exit %d, want 0 events consumed, caught up:\n%s", code, errs)
	}
}

// TestRunKafkaIdlePartitions: events on one partition of four. While the
// idle timeout has not passed, the metrics and the summary name the three
// empty partitions as holding the watermark back; with a short
// --idle-timeout they are named idle instead.
func TestRunKafkaIdlePartitions(t *testing.T) {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 4, -1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		r := &kgo.Record{Topic: "events", Partition: 0, Value: fmt.Appendf(nil, `{"merchant":"m0","amount":1,"event_time":"2026-07-18 10:00:%02d"}`, i)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	metricsAddr := regexp.MustCompile(`metrics on (http://\S+/metrics)`)
	run := func(idleTimeout, want string, wantSummary string) {
		t.Helper()
		ctx, cancelCause := context.WithCancelCause(context.Background())
		cancel := func() { cancelCause(StopSignal{Signal: syscall.SIGTERM}) }
		defer cancel()
		stderr := &syncBuf{}
		env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: stderr, Getenv: func(string) string { return "" }}
		code := make(chan int, 1)
		go func() {
			code <- Main(ctx, env, []string{"run", sql, "--source", "kafka://" + addr + "/events", "--sink", "kafka://" + addr + "/totals",
				"--instance-id", "a", "--idle-timeout", idleTimeout, "--metrics-addr", "127.0.0.1:0"})
		}()
		deadline := time.Now().Add(30 * time.Second)
		var body string
		for !strings.Contains(body, want) {
			if time.Now().After(deadline) {
				cancel()
				<-code
				t.Fatalf("metrics never showed %q; last scrape:\n%s\nstderr:\n%s", want, body, stderr)
			}
			time.Sleep(100 * time.Millisecond)
			m := metricsAddr.FindStringSubmatch(stderr.String())
			if m == nil {
				continue
			}
			resp, err := http.Get(m[1])
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		cancel()
		if c := <-code; c != 0 { // stopped by SIGTERM: a service's normal stop
			t.Fatalf("exit %d, want 0:\n%s", c, stderr)
		}
		if !strings.Contains(stderr.String(), wantSummary) {
			t.Errorf("summary does not say %q:\n%s", wantSummary, stderr)
		}
	}
	run("1h", `ubik_kafka_source_partitions_silent{query="totals"} 3`,
		"no events yet from source partitions 1, 2, 3 (they hold the watermark back, so windows wait, until --idle-timeout 1h0m0s passes)")
	run("1s", `ubik_kafka_source_partitions_idle{query="totals"} 4`,
		"idle source partitions 0, 1, 2, 3 (quiet for --idle-timeout 1s: they no longer hold the watermark back)")
}

// TestRunKafkaStopWhileConnecting: a stop (SIGINT, SIGTERM: the context
// canceled with the signal as its cause) while the run still checks that
// the brokers answer is a clean stop, said and exited as a stop later is
// (128 + the signal number); the chaos test's supervisor stopped a
// just-restarted instance there, and it exited 1 with "cannot reach Kafka:
// context canceled", and later 0 saying nothing.
func TestRunKafkaStopWhileConnecting(t *testing.T) {
	sql := filepath.Join(t.TempDir(), "q.sql")
	if err := os.WriteFile(sql, []byte(`CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND);
CREATE VIEW totals AS SELECT merchant, count(*) AS orders FROM events GROUP BY merchant;
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port nothing answers on, so the check is still waiting when the stop comes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancelCause(context.Background())
	stderr := &syncBuf{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: stderr, Getenv: func(string) string { return "" }}
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, env, []string{"run", sql, "--source", "kafka://" + addr + "/events", "--sink", "kafka://" + addr + "/totals", "--instance-id", "a"})
	}()
	time.Sleep(500 * time.Millisecond)
	cancel(StopSignal{Signal: os.Interrupt})
	select {
	case c := <-code:
		if c != 0 || strings.Contains(stderr.String(), "cannot reach") || !strings.Contains(stderr.String(), "stopped (interrupted by SIGINT) while starting") {
			t.Fatalf("a stop while connecting: exit %d:\n%s", c, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stop while connecting did not end the run within 20 s")
	}
}
