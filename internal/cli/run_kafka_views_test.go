package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/land/kafkasrc"
)

// A chain of three views over Kafka: ten-second totals (EMIT FINAL, with
// allowed lateness), minute totals over them, and a continuous view per
// merchant over the minutes. Each reader groups by the merchant, the
// partitioning of the chain's first view.
const kafkaViewsSQL = `CREATE SOURCE ev (merchant VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE VIEW tens AS SELECT merchant, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, sum(amount) AS total
  FROM ev GROUP BY merchant, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL ALLOWED LATENESS INTERVAL '2' SECOND;
CREATE VIEW mins AS SELECT merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total,
  max(total) AS hi, count(*) AS tens
  FROM tens GROUP BY merchant, TUMBLE(ws, INTERVAL '1' MINUTE);
CREATE VIEW per_merchant AS SELECT merchant, sum(n) AS n, count(*) AS minutes, sum(total) AS total FROM mins GROUP BY merchant;
`

// kafkaViewsEvents writes n events, out of order by less than the
// watermark delay (so no event is late in a file run or over any
// partitioning), with edge-cell keys and amounts, and a malformed line.
func kafkaViewsEvents(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 17))
	merchants := []string{`"a"`, `"b"`, `""`, `null`, `"\u00e9"`, `"q\"uote"`, `"tab\t"`, `"\ud83d\ude00"`}
	amounts := []string{"1.5", "-0.0", "0.0", "0.1", "1e-300", "-2.25", "1e300", "3"}
	var b strings.Builder
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		ts := base.Add(time.Duration(i)*20*time.Millisecond - time.Duration(r.IntN(3000))*time.Millisecond)
		fmt.Fprintf(&b, `{"merchant":%s,"amount":%s,"ts":"%s"}`+"\n", merchants[r.IntN(len(merchants))], amounts[r.IntN(len(amounts))], ts.Format("2006-01-02 15:04:05.000"))
		if i == n/2 {
			b.WriteString(`{"merchant":"a","amount":"x","ts":"2026-07-18 10:00:00"}` + "\n")
		}
	}
	return b.String()
}

// fileFinals runs the script over the events from a file (the oracle) and
// returns each view's last value per key.
func fileFinals(t *testing.T, sql, events string) map[string]map[string]string {
	t.Helper()
	return fileRunViews(t, []string{sql, "--input", writeFile(t, "ev.jsonl", events)}, 0, "tens", "mins", "per_merchant")
}

// sinkRecord is one committed record of a sink topic.
type sinkRecord struct {
	key, value string
	revision   uint64
	final      bool
	query      string
}

// readCommitted reads every committed record of topic, in partition
// order, up to the end offsets it has now (the runs have ended).
func readCommitted(t *testing.T, addr, topic string) []sinkRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []sinkRecord
	deadline := time.Now().Add(30 * time.Second)
	for len(left) > 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			rec, err := kafkasrc.Decode(r)
			if err != nil {
				t.Errorf("%s: %v", topic, err)
				return
			}
			out = append(out, sinkRecord{string(r.Key), string(r.Value), rec.Meta.Revision, rec.Meta.Final, rec.Meta.Query})
		})
	}
	if len(left) > 0 {
		t.Fatalf("%s: partitions %v not read to their end in 30s", topic, left)
	}
	return out
}

// checkViewSinks holds each view's topic to the oracle: the query name in
// every record, revisions 1, 2, ... per key with no duplicate, one final
// record per key of a windowed view (and nothing after it), and the last
// value per key equal to the file run's.
func checkViewSinks(t *testing.T, addr string, topics map[string]string, want map[string]map[string]string) {
	t.Helper()
	for view, topic := range topics {
		recs := readCommitted(t, addr, topic)
		last := map[string]sinkRecord{}
		for _, r := range recs {
			if r.query != view {
				t.Errorf("%s: a record of query %q", topic, r.query)
			}
			prev, seen := last[r.key]
			if r.revision != prev.revision+1 {
				t.Errorf("%s key %s: revision %d after %d", topic, r.key, r.revision, prev.revision)
			}
			if seen && prev.final {
				t.Errorf("%s key %s: a record after its final", topic, r.key)
			}
			last[r.key] = r
		}
		t.Logf("%s (%s): %d records, %d keys", topic, view, len(recs), len(last))
		if len(last) != len(want[view]) {
			t.Errorf("%s: %d keys, the file run has %d", topic, len(last), len(want[view]))
		}
		for k, v := range want[view] {
			r := last[k]
			if r.value != v {
				t.Errorf("%s key %s: %q, the file run has %q", topic, k, r.value, v)
			}
			if windowed := view != "per_merchant"; windowed && (!r.final || r.revision != 1) {
				t.Errorf("%s key %s: revision %d final %v, want one final record", topic, k, r.revision, r.final)
			}
		}
	}
}

// TestRunKafkaViews runs the chain of views over Kafka (3 source
// partitions, repartitioned, and read directly as partitioned by key)
// until caught up: each view publishes its own changelog to its own topic
// (<sink>-<view>, or its CREATE SINK's topic), equal to the file run's.
func TestRunKafkaViews(t *testing.T) {
	events := kafkaViewsEvents(4000, 1)
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addr := c.ListenAddrs()[0]
			want := fileFinals(t, writeFile(t, "views.sql", kafkaViewsSQL), events)
			script := kafkaViewsSQL + fmt.Sprintf("CREATE SINK mins_out FROM mins WITH (connector = 'kafka', brokers = '%s', topic = 'minutes');\n", addr)
			sql := writeFile(t, "kviews.sql", script)
			to := "kafka://" + addr + "/ev"
			produce := []string{"produce", "--to", to, "--partitions", "3"}
			if direct {
				produce = append(produce, "--key-field", "merchant")
			}
			if code, errs := kafkaCLI(t, events, produce...); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			run := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/pm",
				"--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
			if direct {
				// The script is one chain: without --query its last
				// query runs with the views it reads.
				run = append(run, "--partitioned-by-key")
			} else {
				run = append(run, "--query", "per_merchant")
			}
			code, errs := kafkaCLI(t, "", run...)
			if code != 0 || !strings.Contains(errs, "4001 events consumed, 1 malformed") || !strings.Contains(errs, "caught up") {
				t.Fatalf("run: exit %d, want 4001 events consumed, 1 malformed, caught up:\n%s", code, errs)
			}
			checkViewSinks(t, addr, map[string]string{"per_merchant": "pm", "tens": "pm-tens", "mins": "minutes"}, want)

			// The state belongs to the whole chain: a view changed, or
			// its sink topic, is refused, naming what differs.
			changed := writeFile(t, "changed.sql", strings.Replace(script, "INTERVAL '2' SECOND", "INTERVAL '3' SECOND", 1))
			run[1] = changed
			if code, errs := kafkaCLI(t, "", run...); code == 0 || !strings.Contains(errs, "the query text was") || !strings.Contains(errs, `ALLOWED LATENESS INTERVAL '2' ...", now`) {
				t.Errorf("changed view: exit %d: %s", code, errs)
			}
			moved := writeFile(t, "moved.sql", strings.Replace(script, "topic = 'minutes'", "topic = 'minutes2'", 1))
			run[1] = moved
			if code, errs := kafkaCLI(t, "", run...); code == 0 || !strings.Contains(errs, "the views and their sink topics were tens=pm-tens, mins=minutes, now tens=pm-tens, mins=minutes2") {
				t.Errorf("moved view sink: exit %d: %s", code, errs)
			}

			// The same command again resumes the graph: an event for a
			// window finalized before is late at the view that reads the
			// source, and --late-output names that view.
			if code, errs := kafkaCLI(t, `{"merchant":"a","amount":1,"ts":"2026-07-18 10:00:01"}`+"\n", append([]string{"produce", "--to", to}, produce[5:]...)...); code != 0 { // keyed as before in direct mode
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			late := filepath.Join(t.TempDir(), "late.jsonl")
			run[1] = sql
			code, errs = kafkaCLI(t, "", append(run, "--late-output", late)...)
			if code != 0 || !strings.Contains(errs, "1 events consumed, 0 malformed, 0 eval errors, 1 late") {
				t.Fatalf("resumed run: exit %d, want 1 event consumed, 1 late:\n%s", code, errs)
			}
			if b, err := os.ReadFile(late); err != nil || strings.Count(string(b), "\n") != 1 || !strings.HasPrefix(string(b), `{"query": "tens"`) {
				t.Errorf("late output: %q, %v", b, err)
			}
			checkViewSinks(t, addr, map[string]string{"per_merchant": "pm", "tens": "pm-tens", "mins": "minutes"}, want)
		})
	}
}

// TestRunKafkaViewsRefused: an interval join of a view with a stream is
// refused over Kafka, saying why (a join of two views runs, whatever its
// GROUP BY: run_kafka_viewjoin_test.go) (a reader that groups by less
// than its view runs over a view repartition: run_kafka_viewrepart_test.go).
func TestRunKafkaViewsRefused(t *testing.T) {
	sql := writeFile(t, "bad.sql", `CREATE SOURCE ev (merchant VARCHAR, region VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka', topic = 'ev', brokers = '127.0.0.1:1');
CREATE VIEW m AS SELECT merchant, region, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY merchant, region, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW j AS SELECT a.merchant, TUMBLE_START(a.ws, INTERVAL '1' HOUR) AS h, sum(a.n) AS n, sum(b.amount) AS total
  FROM m a JOIN ev b ON a.merchant = b.merchant AND b.ts BETWEEN a.ws AND a.ws + INTERVAL '1' MINUTE GROUP BY a.merchant, TUMBLE(a.ws, INTERVAL '1' HOUR);`)
	for _, c := range []struct{ query, want string }{
		{"j", "usage: query j joins m and ev: an interval join in a graph joins two views, or two declared streams; join the stream's own windowed EMIT FINAL view instead (in a file run too)"},
	} {
		env, _, errb := runTestEnv("")
		if code := Main(context.Background(), env, []string{"run", sql, "--query", c.query, "--sink", "kafka://127.0.0.1:1/out"}); code != 1 && code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d: %s\nwant %q", c.query, code, errb, c.want)
		}
	}
}

// TestRunKafkaViewsKill9 runs two `ubik run` instances over the chain of
// views, kills one with SIGKILL at random moments while they work through
// the input, restarts it with its instance id each time, and finishes with
// --until-caught-up: every view's committed changelog must hold each
// window's final once, revisions without gaps or duplicates, and finals
// equal to the file run's (the whole graph's state restored from the
// state topic after each kill).
func TestRunKafkaViewsKill9(t *testing.T) {
	bin := buildUbik(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	sql := writeFile(t, "views.sql", kafkaViewsSQL)
	seed := uint64(time.Now().UnixNano())
	events := kafkaViewsEvents(30000, seed)
	want := fileFinals(t, sql, events)
	to := "kafka://" + addr + "/ev"
	// The events arrive in chunks while the runs are killed, so that
	// every run has work in flight when its SIGKILL comes.
	lines := strings.SplitAfter(events, "\n")
	const chunks = 12
	if code, errs := kafkaCLI(t, strings.Join(lines[:len(lines)/chunks], ""), "produce", "--to", to, "--partitions", "3"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	produced := make(chan error, 1)
	go func() {
		for i := 1; i < chunks-1; i++ { // the last chunk is for the final run
			time.Sleep(250 * time.Millisecond)
			end := len(lines) * (i + 1) / chunks
			env, _, errb := runTestEnv(strings.Join(lines[len(lines)*i/chunks:end], ""))
			if code := Main(context.Background(), env, []string{"produce", "--to", to}); code != 0 {
				produced <- fmt.Errorf("produce: exit %d: %s", code, errb)
				return
			}
		}
		produced <- nil
	}()
	args := []string{"run", sql, "--query", "per_merchant", "--source", to, "--sink", "kafka://" + addr + "/pm", "--log-level", "warn"}
	// Two instances share the partitions; one of them, at random, is
	// killed and restarted with its id at once, so partitions also move
	// between the instances with their graphs' state.
	r := rand.New(rand.NewPCG(seed, 3))
	procs := map[string]*crashtest.Proc{}
	start := func(id string) {
		procs[id] = crashtest.Start(t, exec.Command(bin, append(args, "--instance-id", id)...))
	}
	start("a")
	start("b")
	kills := 0
	for kills < 8 {
		time.Sleep(time.Duration(200+r.IntN(600)) * time.Millisecond)
		id := []string{"a", "b"}[r.IntN(2)]
		procs[id].Kill()
		kills++
		start(id)
	}
	time.Sleep(time.Second) // the restarted one is past its start: SIGTERM is a clean stop, not the default action
	for _, p := range procs {
		p.Cmd.Process.Signal(syscall.SIGTERM) // a clean stop leaves the group: the final run takes every partition at once
	}
	for id, p := range procs {
		// 143: stopped; "terminated": the signal came before the
		// process set up its handler (a restart a moment before).
		if err := p.Wait(t, time.Minute); err != nil && !strings.Contains(err.Error(), "exit status 143") && !strings.Contains(err.Error(), "signal: terminated") {
			t.Errorf("instance %s: %v", id, err)
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if code, errs := kafkaCLI(t, strings.Join(lines[len(lines)*(chunks-1)/chunks:], ""), "produce", "--to", to); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	out, err := exec.Command(bin, append(args, "--instance-id", "a", "--until-caught-up")...).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("caught up")) || bytes.Contains(out, []byte(": 0 events consumed")) {
		t.Fatalf("seed %d: final run: %v\n%s", seed, err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		t.Log(sc.Text())
	}
	checkViewSinks(t, addr, map[string]string{"per_merchant": "pm", "tens": "pm-tens", "mins": "pm-mins"}, want)
	if t.Failed() {
		t.Logf("seed %d, %d kills", seed, kills)
	}
}

// TestRunKafkaViewsAllowUncompacted: --allow-uncompacted-sink covers the
// views' topics named after the sink's (TOPIC-VIEW) as it covers the
// sink: without it a delete-policy view topic is refused, naming it;
// with it the chain runs and the view's changelog is in that topic.
func TestRunKafkaViewsAllowUncompacted(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	events := kafkaViewsEvents(300, 2)
	sql := writeFile(t, "kviews.sql", kafkaViewsSQL)
	want := fileFinals(t, sql, events)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	del := "delete"
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"cleanup.policy": &del}, "pm-tens"); err != nil {
		t.Fatal(err)
	}
	to := "kafka://" + addr + "/ev"
	if code, errs := kafkaCLI(t, events, "produce", "--to", to, "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	run := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/pm", "--query", "per_merchant",
		"--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
	if code, errs := kafkaCLI(t, "", run...); code == 0 || !strings.Contains(errs, "topic pm-tens has cleanup.policy=delete") {
		t.Fatalf("without --allow-uncompacted-sink: exit %d, want pm-tens refused:\n%s", code, errs)
	}
	code, errs := kafkaCLI(t, "", append(run, "--allow-uncompacted-sink")...)
	if code != 0 || !strings.Contains(errs, "301 events consumed, 1 malformed") || !strings.Contains(errs, "sink topic is not compacted") {
		t.Fatalf("with --allow-uncompacted-sink: exit %d, want 301 events consumed and a warning:\n%s", code, errs)
	}
	checkViewSinks(t, addr, map[string]string{"per_merchant": "pm", "tens": "pm-tens", "mins": "pm-mins"}, want)
}

// fileRunViews runs `ubik run` with args and --output-dir over files (the
// oracle) and returns each of views' last value per key; each must hold at
// least min keys.
func fileRunViews(t *testing.T, args []string, min int, views ...string) map[string]map[string]string {
	t.Helper()
	dir := t.TempDir()
	env, _, errb := runTestEnv("")
	if code := Main(t.Context(), env, append(append([]string{"run"}, args...), "--output-dir", dir, "--quiet")); code != 0 {
		t.Fatalf("file run: exit %d: %s", code, errb)
	}
	out := map[string]map[string]string{}
	for _, v := range views {
		b, err := os.ReadFile(filepath.Join(dir, v+".tsv"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			k, val, ok := strings.Cut(line, "\t")
			if !ok {
				t.Fatalf("%s: line %q", v, line)
			}
			m[k] = val
		}
		if len(m) < min {
			t.Fatalf("file run: %s has %d keys", v, len(m))
		}
		out[v] = m
	}
	return out
}

// runDedupKafka produces a dedup query's events (lines, to the topic at
// to; produce: the producer's flags), runs it (run: ubik's arguments)
// until caught up and returns the sink out's latest value per key. With
// restarts, a ubik process is first killed with SIGKILL once the stage
// that deduplicates committed some keys to its state topic (state): the first 450 lines (the originals and some
// copies) are produced before, the rest after. Every run drops the 134
// copies of dedupEvents and dedupJoinEvents, none late (running totals,
// restored after a kill).
func runDedupKafka(t *testing.T, addr, to, state string, lines, produce, run []string, restarts bool) map[string]string {
	t.Helper()
	first, rest := lines, []string(nil)
	if restarts {
		first, rest = lines[:450], lines[450:]
	}
	if code, errs := kafkaCLI(t, strings.Join(first, ""), append([]string{"produce", "--to", to}, produce...)...); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	if restarts {
		p := crashtest.Start(t, exec.Command(buildUbik(t), run...))
		deadline := time.Now().Add(30 * time.Second)
		for !committedDedup(t, addr, state) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if killed, err := p.Kill(); !killed || err != nil {
			t.Fatalf("kill: %v, %v: %s", killed, err, p.Stderr())
		}
		if code, errs := kafkaCLI(t, strings.Join(rest, ""), append([]string{"produce", "--to", to}, produce...)...); code != 0 {
			t.Fatalf("produce: exit %d: %s", code, errs)
		}
	}
	code, errs := kafkaCLI(t, "", append(run, "--until-caught-up")...)
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, errs)
	}
	if !strings.Contains(errs, "134 duplicates, 0 dedup late") {
		t.Errorf("want 134 duplicates, 0 dedup late:\n%s", errs)
	}
	got := map[string]string{}
	for _, r := range readCommitted(t, addr, "out") {
		got[r.key] = r.value
	}
	return got
}

// sameAsFileRun compares a Kafka run's final rows (got) with a file
// run's: as many groups and events counted, and, when the copies of a
// key shared a partition (ordered, so the first copy is the file's),
// each group's row.
func sameAsFileRun(t *testing.T, got, want map[string]string, ordered bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d groups over Kafka, %d in a file run", len(got), len(want))
	}
	if g, w := sumN(t, got), sumN(t, want); g != w {
		t.Errorf("over Kafka %d events counted, in a file run %d", g, w)
	}
	for k, v := range want {
		if ordered && got[k] != v {
			t.Errorf("group %s: over Kafka %s, in a file run %s", k, got[k], v)
		}
	}
}
