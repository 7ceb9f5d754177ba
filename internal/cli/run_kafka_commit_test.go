package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const commitSQL = `CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND);
CREATE VIEW totals AS SELECT merchant, count(*) AS orders, sum(amount) AS total FROM events GROUP BY merchant;
`

// TestRunKafkaCommitIntervalBounds: --commit-interval is refused (exit 2,
// naming the flag and the bound) at 0, below it, and above half the
// transaction timeout, before any broker is asked (the brokers here do
// not exist); the bound itself runs (with --commit-records, refused when
// negative); and either flag given to a file run is an error, not ignored.
func TestRunKafkaCommitIntervalBounds(t *testing.T) {
	dir := t.TempDir()
	sql := filepath.Join(dir, "totals.sql")
	if err := os.WriteFile(sql, []byte(commitSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	nowhere := []string{"run", sql, "--source", "kafka://127.0.0.1:1/events", "--sink", "kafka://127.0.0.1:1/out"}
	for _, c := range []struct{ arg, want string }{
		{"0", "--commit-interval 0s: must be positive"},
		{"-1ms", "--commit-interval -1ms: must be positive"},
		{"15.000000001s", "--commit-interval 15.000000001s: at most 15s (half the 30s transaction timeout"},
		{"1m", "--commit-interval 1m0s: at most 15s"},
	} {
		code, errs := kafkaCLI(t, "", append(nowhere, "--commit-interval", c.arg)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("--commit-interval %s: exit %d, want 2 and %q:\n%s", c.arg, code, c.want, errs)
		}
	}
	if code, errs := kafkaCLI(t, "", append(nowhere, "--commit-records", "-1")...); code != 2 || !strings.Contains(errs, "--commit-records -1: must be 0 (by time only) or positive") {
		t.Errorf("--commit-records -1: exit %d, want 2:\n%s", code, errs)
	}
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(`{"merchant":"m0","amount":1,"event_time":"2026-07-18 10:00:00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The default's own value too: given is given.
	for _, arg := range []string{"500ms", "100ms"} {
		code, errs := kafkaCLI(t, "", "run", sql, "--input", events, "--commit-interval", arg)
		if code != 2 || !strings.Contains(errs, "--commit-interval applies to Kafka runs only") {
			t.Errorf("file run with --commit-interval %s: exit %d, want 2 and 'applies to Kafka runs only':\n%s", arg, code, errs)
		}
	}
	if code, errs := kafkaCLI(t, "", "run", sql, "--input", events, "--commit-records", "10"); code != 2 || !strings.Contains(errs, "--commit-records applies to Kafka runs only") {
		t.Errorf("file run with --commit-records: exit %d, want 2 and 'applies to Kafka runs only':\n%s", code, errs)
	}
	if code, errs := kafkaCLI(t, "", "run", sql, "--input", events); code != 0 {
		t.Fatalf("file run without the flag: exit %d:\n%s", code, errs)
	}

	// The bound is allowed: a run at 15s over a few events, which ends
	// its transaction early when caught up.
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	to := "kafka://" + addr + "/events"
	if code, errs := kafkaCLI(t, `{"merchant":"m0","amount":1,"event_time":"2026-07-18 10:00:00"}`+"\n", "produce", "--to", to); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	code, errs := kafkaCLI(t, "", "run", sql, "--source", to, "--sink", "kafka://"+addr+"/out", "--instance-id", "a",
		"--until-caught-up", "--log-level", "warn", "--commit-interval", "15s", "--commit-records", "1")
	if code != 0 || !strings.Contains(errs, "1 events consumed") || !strings.Contains(errs, "caught up") {
		t.Fatalf("--commit-interval 15s: exit %d, want 0, 1 event consumed, caught up:\n%s", code, errs)
	}
}

var commitsRE = regexp.MustCompile(`(\d+) commits, (\d+) aborts`)

// TestRunKafkaCommitInterval runs one query twice at once over the real
// broker (scripts/services.sh up kafka), under two query names, while
// events arrive for about four seconds: at --commit-interval 500ms it
// commits fewer transactions (the summary's count) than at 100ms, and
// both sinks end with the same totals, the right ones. The input is keyed
// by merchant and read --partitioned-by-key: the one stage is the
// aggregating one, whose transactions the interval paces (a repartition
// stage commits after each poll, which the interval only caps, and
// would blur the count).
func TestRunKafkaCommitInterval(t *testing.T) {
	brokers := envOr("UBIK_KAFKA_BROKERS", "127.0.0.1:9092")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a Kafka broker at %s is required (scripts/services.sh up kafka; UBIK_KAFKA_BROKERS): %v", brokers, err)
	}
	// Unique names: the broker is shared and keeps what each run leaves.
	id := fmt.Sprintf("commitiv%d", time.Now().UnixNano())
	topic := id + "-events"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	type run struct {
		interval, name, sink string
		code                 chan int
		stderr               *syncBuf
		stop                 context.CancelCauseFunc
	}
	runs := []*run{{interval: "100ms"}, {interval: "500ms"}}
	for _, r := range runs {
		r.name = id + "_" + strings.TrimSuffix(r.interval, "ms")
		r.sink = r.name + "-out"
		sql := filepath.Join(dir, r.name+".sql")
		if err := os.WriteFile(sql, []byte(strings.ReplaceAll(commitSQL, "totals", r.name)), 0o644); err != nil {
			t.Fatal(err)
		}
		var rctx context.Context
		rctx, r.stop = context.WithCancelCause(context.Background())
		r.code, r.stderr = make(chan int, 1), &syncBuf{}
		env := &Env{Stdin: strings.NewReader(""), Stdout: &syncBuf{}, Stderr: r.stderr, Getenv: func(string) string { return "" }}
		args := []string{"run", sql, "--source", "kafka://" + brokers + "/" + topic, "--sink", "kafka://" + brokers + "/" + r.sink,
			"--instance-id", "a", "--log-level", "warn", "--partitioned-by-key", "--commit-interval", r.interval}
		go func() { r.code <- Main(rctx, env, args) }()
	}
	started := time.Now()
	defer func() {
		for _, r := range runs {
			r.stop(StopSignal{Signal: os.Interrupt})
		}
	}()
	// 40 batches of 25 events, 100 ms apart: both runs see the same
	// input arrive over the same four seconds.
	const batches, per, merchants = 40, 25, 5
	orders, totals := map[int]int{}, map[int]int{}
	n := 0
	for b := 0; b < batches; b++ {
		var recs []*kgo.Record
		for i := 0; i < per; i++ {
			m := n % merchants
			orders[m]++
			totals[m] += n
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "m%d", m), Value: fmt.Appendf(nil, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:00:%02d"}`, m, n, n%60)})
			n++
		}
		// Bounded: the client retries without end while the broker
		// does not answer.
		pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(pctx, recs...).FirstErr()
		pcancel()
		if err != nil {
			t.Fatalf("produce batch %d to the broker at %s: %v", b, brokers, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := map[string]string{}
	for m := 0; m < merchants; m++ {
		want[fmt.Sprintf(`["m%d"]`, m)] = fmt.Sprintf(`{"merchant": "m%d", "orders": %d, "total": %d}`, m, orders[m], totals[m])
	}
	got := make([]map[string]string, len(runs))
	for i, r := range runs {
		got[i] = consumeLatest(t, brokers, r.sink, want, 90*time.Second)
	}
	// Stopped together, so the two ran for the same time.
	for _, r := range runs {
		r.stop(StopSignal{Signal: os.Interrupt})
	}
	ran := time.Since(started)
	commits := make([]int, len(runs))
	for i, r := range runs {
		select {
		case c := <-r.code:
			if c != 0 {
				t.Fatalf("--commit-interval %s: exit %d, want 0 (a service's stop)\n%s", r.interval, c, r.stderr)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("--commit-interval %s: no exit 60s after the stop\n%s", r.interval, r.stderr)
		}
		out := r.stderr.String()
		if !strings.Contains(out, fmt.Sprintf("%d events consumed, 0 malformed", batches*per)) {
			t.Errorf("--commit-interval %s: summary does not say %d events consumed:\n%s", r.interval, batches*per, out)
		}
		m := commitsRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("--commit-interval %s: no commit count in the summary:\n%s", r.interval, out)
		}
		commits[i], _ = strconv.Atoi(m[1])
		for k, v := range want {
			if got[i][k] != v {
				t.Errorf("--commit-interval %s: sink key %s: %s, want %s", r.interval, k, got[i][k], v)
			}
		}
		if len(got[i]) != len(want) {
			t.Errorf("--commit-interval %s: sink has %d keys, want %d: %v", r.interval, len(got[i]), len(want), got[i])
		}
	}
	t.Logf("commits in %s: %d at 100ms, %d at 500ms", ran, commits[0], commits[1])
	if commits[1] >= commits[0] {
		t.Errorf("%d commits at --commit-interval 500ms, %d at 100ms: want fewer at 500ms\n%s\n%s", commits[1], commits[0], runs[0].stderr, runs[1].stderr)
	}
	// A transaction takes input for the whole interval (only the one a
	// stop ends is shorter), so there is at most one per 500ms run, and one
	// more for the stop.
	if limit := int(ran/(500*time.Millisecond)) + 1; commits[1] > limit {
		t.Errorf("%d commits at --commit-interval 500ms in %s: want at most %d, one per interval and the stop's\n%s", commits[1], ran, limit, runs[1].stderr)
	}
}
