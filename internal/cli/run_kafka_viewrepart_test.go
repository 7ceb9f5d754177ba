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
)

// A chain of views whose readers group by less than the views they read,
// so over Kafka it runs in three segments joined by two view
// repartitions: ten-second totals and minute totals per merchant and
// region (segment 1, partitioned by merchant, region), minute totals per
// region (segment 2, by region), then minute totals over every region
// and a continuous summary of them (segment 3, one group).
const kafkaRepartSQL = `CREATE SOURCE ev (merchant VARCHAR, region VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE VIEW tens AS SELECT merchant, region, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, sum(amount) AS total
  FROM ev GROUP BY merchant, region, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL ALLOWED LATENESS INTERVAL '2' SECOND;
CREATE VIEW mins AS SELECT region, merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total
  FROM tens GROUP BY merchant, region, TUMBLE(ws, INTERVAL '1' MINUTE);
CREATE VIEW by_region AS SELECT region, TUMBLE_START(m, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total,
  count(*) AS merchants, min(total) AS lo
  FROM mins GROUP BY region, TUMBLE(m, INTERVAL '1' MINUTE);
CREATE VIEW total AS SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total, count(*) AS regions
  FROM by_region GROUP BY TUMBLE(m, INTERVAL '1' MINUTE);
CREATE VIEW summary AS SELECT count(*) AS minutes, sum(n) AS n, sum(total) AS total, max(regions) AS regions FROM total;
`

var repartViews = []string{"tens", "mins", "by_region", "total", "summary"}

// kafkaRepartEvents writes n events, out of order by less than the
// watermark delay (no event is late in a file run or over any
// partitioning), with edge-cell keys (NULL, empty, escapes, a surrogate
// pair) and amounts (-0.0, 1e300 overflowing to infinity, 1e-300), and
// a malformed line.
func kafkaRepartEvents(n int, seed uint64, base time.Time) string {
	r := rand.New(rand.NewPCG(seed, 19))
	merchants := []string{`"a"`, `"b"`, `""`, `null`, `"\u00e9"`, `"q\"uote"`, `"tab\t"`, `"\ud83d\ude00"`, `"c"`, `"d"`}
	regions := []string{`"eu"`, `"us"`, `null`, `""`, `"\u00e9u"`, `"a\\b"`}
	amounts := []string{"1.5", "-0.0", "0.0", "0.1", "1e-300", "-2.25", "1e300", "3", "-0.0", "7"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		ts := base.Add(time.Duration(i)*30*time.Millisecond - time.Duration(r.IntN(3000))*time.Millisecond)
		// Region "us" gets only -0.0: its sums stay -0.0 through every view.
		reg := regions[r.IntN(len(regions))]
		amt := amounts[r.IntN(len(amounts))]
		if reg == `"us"` {
			amt = "-0.0"
		}
		fmt.Fprintf(&b, `{"merchant":%s,"region":%s,"amount":%s,"ts":"%s"}`+"\n", merchants[r.IntN(len(merchants))], reg, amt, ts.Format("2006-01-02 15:04:05.000"))
		if i == n/2 {
			b.WriteString(`{"merchant":"a","region":"eu","amount":"x","ts":"2026-07-18 10:00:00"}` + "\n")
		}
	}
	return b.String()
}

// repartFileFinals is the oracle: the script over the events from a
// file, each view's last value per key.
func repartFileFinals(t *testing.T, sql, events string) map[string]map[string]string {
	t.Helper()
	in := writeFile(t, "ev.jsonl", events)
	dir := t.TempDir()
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--input", in, "--output-dir", dir, "--quiet"}); code != 0 {
		t.Fatalf("file run: exit %d: %s", code, errb)
	}
	out := map[string]map[string]string{}
	for _, v := range repartViews {
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
		out[v] = m
	}
	return out
}

// checkRepartSinks holds each query's topic to the oracle: its query
// name in every record, revisions 1, 2, ... per key, one final per key
// of a windowed view and nothing after it, the last value per key equal
// to the file run's (byte for byte).
func checkRepartSinks(t *testing.T, addr string, topics map[string]string, want map[string]map[string]string) {
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
		if len(last) != len(want[view]) || len(last) == 0 {
			t.Errorf("%s: %d keys, the file run has %d", topic, len(last), len(want[view]))
		}
		for k, v := range want[view] {
			r := last[k]
			if r.value != v {
				t.Errorf("%s key %s: %q, the file run has %q", topic, k, r.value, v)
			}
			if windowed := view != "summary"; windowed && (!r.final || r.revision != 1) {
				t.Errorf("%s key %s: revision %d final %v, want one final record", topic, k, r.revision, r.final)
			}
		}
	}
}

func repartTopics(sink string) map[string]string {
	m := map[string]string{"summary": sink}
	for _, v := range repartViews[:4] {
		m[v] = sink + "-" + v
	}
	return m
}

// TestRunKafkaViewRepartition runs the three-segment chain over Kafka
// at 1, 2 and 4 source partitions (and read directly, partitioned by
// merchant, at 2) until caught up: every query's changelog equals the
// file run's. Then more events and the same command again: the segments
// resume from their own state topics and the finals still equal the
// file run over all the events.
func TestRunKafkaViewRepartition(t *testing.T) {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	events := kafkaRepartEvents(6000, 1, base)
	// An hour later: every window of every view opens after the ones
	// the first run finalized, so none of these is late and the oracle
	// is the file run over both.
	more := kafkaRepartEvents(3000, 2, base.Add(time.Hour))
	for _, c := range []struct {
		parts  int
		direct bool
	}{{1, false}, {2, false}, {4, false}, {2, true}} {
		t.Run(fmt.Sprintf("partitions=%d,direct=%v", c.parts, c.direct), func(t *testing.T) {
			cl, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			addr := cl.ListenAddrs()[0]
			sql := writeFile(t, "repart.sql", kafkaRepartSQL)
			to := "kafka://" + addr + "/ev"
			produce := []string{"produce", "--to", to, "--partitions", fmt.Sprint(c.parts)}
			if c.direct {
				produce = append(produce, "--key-field", "merchant")
			}
			if code, errs := kafkaCLI(t, events, produce...); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			run := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/out",
				"--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
			if c.direct {
				run = append(run, "--partitioned-by-key")
			}
			code, errs := kafkaCLI(t, "", run...)
			if code != 0 || !strings.Contains(errs, "6001 events consumed, 1 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, "caught up") {
				t.Fatalf("run: exit %d, want 6001 events consumed, 1 malformed, 0 late, caught up:\n%s", code, errs)
			}
			checkRepartSinks(t, addr, repartTopics("out"), repartFileFinals(t, sql, events))

			if code, errs := kafkaCLI(t, more, append([]string{"produce", "--to", to}, produce[5:]...)...); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			code, errs = kafkaCLI(t, "", run...)
			if code != 0 || !strings.Contains(errs, "3001 events consumed, 1 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, "caught up") {
				t.Fatalf("resumed run: exit %d, want 3001 events consumed, 1 malformed, 0 late, caught up:\n%s", code, errs)
			}
			all := repartFileFinals(t, sql, events+more)
			checkRepartSinks(t, addr, repartTopics("out"), all)
			if c.parts != 2 || c.direct {
				return
			}
			// --reset-state starts over from the input's start: every
			// segment's group and state goes too (a state kept would
			// count its rows twice), and new sink topics get each key
			// from revision 1.
			reset := append(append([]string{}, run...), "--reset-state")
			reset[5] = "kafka://" + addr + "/out2"
			code, errs = kafkaCLI(t, "", reset...)
			if code != 0 || !strings.Contains(errs, "9002 events consumed, 2 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, "caught up") {
				t.Fatalf("reset run: exit %d, want 9002 events consumed, caught up:\n%s", code, errs)
			}
			checkRepartSinks(t, addr, repartTopics("out2"), all)
		})
	}
}

// TestRunKafkaViewRepartitionKill9 runs two `ubik run` instances over the
// three-segment chain, kills one with SIGKILL at random moments while
// events arrive, restarts it with its instance id each time, and
// finishes with --until-caught-up: every query's committed changelog
// holds each window's final once, revisions without gaps or duplicates,
// and finals equal to the file run's (each segment's state restored from
// its own state topic, its rows and markers exactly once).
func TestRunKafkaViewRepartitionKill9(t *testing.T) {
	bin := buildUbik(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	sql := writeFile(t, "repart.sql", kafkaRepartSQL)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("UBIK_REPART_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	events := kafkaRepartEvents(20000, seed, time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC))
	want := repartFileFinals(t, sql, events)
	to := "kafka://" + addr + "/ev"
	lines := strings.SplitAfter(events, "\n")
	const chunks = 12
	if code, errs := kafkaCLI(t, strings.Join(lines[:len(lines)/chunks], ""), "produce", "--to", to, "--partitions", "3"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	produced := make(chan error, 1)
	go func() {
		for i := 1; i < chunks-1; i++ {
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
	args := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/out", "--log-level", "warn"}
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
	time.Sleep(time.Second)
	for _, p := range procs {
		p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for id, p := range procs {
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
	checkRepartSinks(t, addr, repartTopics("out"), want)
	// The segments' groups have consumed their topics to the end (the
	// last offset of a partition is the commit marker of the last
	// transaction that wrote it, after the last record consumed).
	adm := kadm.NewClient(mustClient(t, addr))
	for _, g := range []string{"summary-s2", "summary-s3"} {
		lag, err := adm.Lag(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		lag.Each(func(l kadm.DescribedGroupLag) {
			for _, m := range l.Lag.Sorted() {
				if m.Lag > 1 {
					t.Errorf("group %s %s partition %d: lag %d", g, m.Topic, m.Partition, m.Lag)
				}
			}
		})
	}
	if t.Failed() {
		t.Logf("seed %d, %d kills", seed, kills)
	}
}

func mustClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
