package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// The interval join of two streams over Kafka, each test on an
// in-process broker of its own (the tests run in parallel; the
// services' broker, the same kfake as cmd/ubik-broker, serves every test
// process at once through one request loop): impressions and clicks,
// each over 1 to 3 partitions, joined on a DOUBLE ad id (-0.0 and 0.0
// one key, NULL never matching) within an interval, then counted per ad
// and window, must give the finals of one in-process driver fed both
// inputs in a shuffled interleaving, byte for byte, and after kill -9 at
// random points.

// ijoinSQL is the script; NAME is replaced by the query's (the internal
// topics are named after it).
const ijoinSQL = `
CREATE SOURCE imp (ad DOUBLE, site VARCHAR, cost DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE SOURCE clk (ad DOUBLE, val DECIMAL(10,2), tag VARCHAR, cts TIMESTAMP,
  WATERMARK FOR cts AS cts - INTERVAL '3' SECOND);
CREATE VIEW NAME AS SELECT i.GROUP AS g, TUMBLE_START(i.ts, INTERVAL '10' SECOND) AS w, count(*) AS n,
  sum(i.cost + c.val) AS total, max(c.tag) AS tag, min(i.site) AS site, max(i.ad) AS ad
FROM imp i JOIN clk c ON c.ad = i.ad AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY i.GROUP, TUMBLE(i.ts, INTERVAL '10' SECOND);`

// ijoinQuery is the query grouped by the join key (one stage), or, with
// a name ending in "_site", by the impression's site (the joined rows
// repartitioned by it to a second stage).
func ijoinQuery(t testing.TB, name string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(ijoinScript(name), plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

func ijoinScript(name string) string {
	if strings.HasSuffix(name, "_der") {
		return strings.Replace(derivedIJoinSQL, "NAME", name, 1) // derivedjoin_test.go
	}
	by := "ad"
	if strings.HasSuffix(name, "_site") {
		by = "site"
	}
	return strings.ReplaceAll(strings.Replace(ijoinSQL, "NAME", name, 1), "i.GROUP", "i."+by)
}

// uniq is a name no other run on a shared broker uses, nor another test
// of this run (they run in parallel).
func uniq(prefix string) string {
	return fmt.Sprintf("%s%d_%s", prefix, os.Getpid(), testenv.RandomHex(5))
}

var (
	ijoinAds   = []string{`-0.0`, `0.0`, `1.5`, `2.5`, `null`, `7`, `8`}
	ijoinSites = []string{`a`, `b\"q`, `c\\d`, `é😀`, ``}
)

// ijoinData returns impressions (100 ms apart, up to 1.5 s of disorder,
// under their 2 s delay) and clicks (130 ms apart, up to 2.5 s of
// disorder, under their 3 s delay): nothing is late in any partition.
func ijoinData(seed uint64, n int) (imps, clks [][]byte) {
	r := rand.New(rand.NewPCG(seed, seed^0x17))
	ts := func(us int64) string { return string(changelog.AppendCell(nil, types.TS(us))) }
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000)
		imps = append(imps, fmt.Appendf(nil, `{"ad":%s,"site":"%s","cost":"%d.%02d","ts":%s}`,
			ijoinAds[r.IntN(len(ijoinAds))], ijoinSites[r.IntN(len(ijoinSites))], r.IntN(50), r.IntN(100), ts(baseTS+at)))
	}
	for i := range n * 10 / 13 {
		at := int64(i)*130_000 - r.Int64N(2_500_000)
		clks = append(clks, fmt.Appendf(nil, `{"ad":%s,"val":"%d.%02d","tag":"t\"%d","cts":%s}`,
			ijoinAds[r.IntN(len(ijoinAds)-1)], r.IntN(9), r.IntN(100), r.IntN(20), ts(baseTS+at)))
	}
	return imps, clks
}

// ijoinInProcess is the in-process answer: the finals of one driver fed
// both inputs in an interleaving shuffled by seed, then closed.
func ijoinInProcess(t testing.TB, q *plan.Query, seed uint64, imps, clks [][]byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	d, err := drive.New(q, drive.Config{Emit: func(r *changelog.Record) error {
		if r.Meta.Final {
			if _, dup := out[string(r.Key)]; dup {
				t.Errorf("in process: two finals for %s", r.Key)
			}
			out[string(r.Key)] = string(r.Value)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 3))
	i, j := 0, 0
	for i < len(imps) || j < len(clks) {
		if j == len(clks) || i < len(imps) && r.IntN(2) == 0 {
			for k := r.IntN(40); k >= 0 && i < len(imps); k-- {
				if err := d.Push(imps[i]); err != nil {
					t.Fatal(err)
				}
				i++
			}
			continue
		}
		for k := r.IntN(40); k >= 0 && j < len(clks); k-- {
			if err := d.PushInput(1, clks[j]); err != nil {
				t.Fatal(err)
			}
			j++
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	st := d.IntervalStats()
	if st.LateLeft != 0 || st.LateRight != 0 || st.Matches == 0 || st.NullKeys == 0 || d.Counts().Late != 0 {
		t.Fatalf("in process: the data must join rows, have NULL keys and nothing late: %+v", st)
	}
	return out
}

// produceShuffled writes both inputs to their topics in random slices,
// either one ahead at times, as ijoinInProcess interleaves them.
func produceShuffled(t testing.TB, addrs []string, seed uint64, imp string, nImp int, imps [][]byte, clk string, nClk int, clks [][]byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 5))
	i, j := 0, 0
	for i < len(imps) || j < len(clks) {
		if j == len(clks) || i < len(imps) && r.IntN(2) == 0 {
			k := min(len(imps), i+1+r.IntN(300))
			produceValues(t, addrs, imp, nImp, imps[i:k], nil)
			i = k
			continue
		}
		k := min(len(clks), j+1+r.IntN(300))
		produceValues(t, addrs, clk, nClk, clks[j:k], nil)
		j = k
	}
}

// ijoinEnv is one test's broker, topics and query name.
type ijoinEnv struct {
	addrs          []string
	name           string // the query's
	imp, clk, sink string
}

func newIJoinEnv(t testing.TB, nImp, nClk int, suffix ...string) *ijoinEnv {
	t.Helper()
	e := &ijoinEnv{addrs: cluster(t).ListenAddrs(), name: uniq("ijq") + strings.Join(suffix, "")}
	e.imp, e.clk, e.sink = e.name+"-imp", e.name+"-clk", e.name+"-out"
	mkTopic(t, e.addrs, e.imp, nImp, nil)
	mkTopic(t, e.addrs, e.clk, nClk, nil)
	return e
}

func (e *ijoinEnv) options(q *plan.Query) Options {
	return Options{Query: q, Source: endpoint(e.addrs, e.imp), Table: endpoint(e.addrs, e.clk), Sink: endpoint(e.addrs, e.sink),
		InstanceID: "ij-1", CommitInterval: 100 * time.Millisecond}
}

// TestRunKafkaIntervalJoin: finals equal to the in-process run's at 1, 2
// and 3 partitions of each input (and a repartition topic of another
// count), the topics filled in a shuffled interleaving.
func TestRunKafkaIntervalJoin(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(7, 1500)
	for _, c := range []struct {
		imp, clk, rep int
		by            string
	}{{1, 1, 0, ""}, {2, 3, 0, ""}, {3, 2, 0, ""}, {3, 3, 2, ""}, {1, 1, 0, "_site"}, {2, 3, 0, "_site"}, {3, 2, 2, "_site"}, {3, 3, 0, "_site"}} {
		t.Run(fmt.Sprintf("imp%d-clk%d-rep%d%s", c.imp, c.clk, c.rep, c.by), func(t *testing.T) {
			e := newIJoinEnv(t, c.imp, c.clk, c.by)
			q := ijoinQuery(t, e.name)
			want := ijoinInProcess(t, q, uint64(c.imp*10+c.clk), imps, clks)
			if other := ijoinInProcess(t, q, 99, imps, clks); len(other) != len(want) {
				t.Fatalf("in process: %d finals in one interleaving, %d in another", len(want), len(other))
			}
			produceShuffled(t, e.addrs, uint64(c.imp+c.clk), e.imp, c.imp, imps, e.clk, c.clk, clks)
			o := e.options(q)
			o.RepartitionPartitions = c.rep
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			var late int
			o.OnLate = func(*drive.LateEvent) { late++ }
			pl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := pl.Run(ctx); err != nil {
				t.Fatal(err)
			}
			st := pl.Stats()
			if !st.CaughtUp || st.Late != 0 || late != 0 || st.TableLate != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(clks)) || st.JoinJoined == 0 {
				t.Errorf("stats %+v, late hook %d", st, late)
			}
			compareFinals(t, readFinals(t, e.addrs, e.sink), want)

			// The state belongs to the right stream's topic too.
			o.Table.Topic = e.clk + "2"
			if pl, err = New(o); err != nil {
				t.Fatal(err)
			}
			if err := pl.Run(ctx); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), fmt.Sprintf(`the right stream's topic was %q, now %q`, e.clk, e.clk+"2")) {
				t.Errorf("a moved right stream: %v", err)
			}
		})
	}
}

// TestRunKafkaIntervalJoinLate: rows behind their own partition's
// watermark, of either input, are counted (Stats.Late, Stats.TableLate)
// and handed to OnLate with their record, not joined; the rest joins as
// in process.
func TestRunKafkaIntervalJoinLate(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(5, 600)
	e := newIJoinEnv(t, 2, 2)
	q := ijoinQuery(t, e.name)
	want := ijoinInProcess(t, q, 1, imps, clks)
	produceValues(t, e.addrs, e.imp, 2, imps, nil)
	produceValues(t, e.addrs, e.clk, 2, clks, nil)
	o := e.options(q)
	o.Logger = testLogger(t)
	var mu sync.Mutex
	var got []string
	o.OnLate = func(le *drive.LateEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(le.Event))
	}
	if st := runToEnd(t, o, 2*time.Minute); st.Late != 0 || st.TableLate != 0 || len(got) != 0 {
		t.Fatalf("first run: late %d, table late %d, hook %q", st.Late, st.TableLate, got)
	}
	// A minute behind everything, produced once the watermarks are past
	// them (a row is late against the markers that came before it): late
	// in whichever partition they land, and each would match the other
	// (same ad, same second).
	lateImp := []byte(`{"ad":1.5,"site":"late","cost":"1.00","ts":"2026-07-18 09:59:00"}`)
	lateClk := []byte(`{"ad":1.5,"val":"1.00","tag":"late","cts":"2026-07-18 09:59:00"}`)
	produceValues(t, e.addrs, e.imp, 1, [][]byte{lateImp}, nil)
	produceValues(t, e.addrs, e.clk, 1, [][]byte{lateClk}, nil)
	st := runToEnd(t, o, 2*time.Minute)
	if st.Late != 1 || st.TableLate != 1 {
		t.Errorf("late %d, table late %d: want 1 and 1", st.Late, st.TableLate)
	}
	mu.Lock()
	if len(got) != 2 || !(got[0] == string(lateImp) && got[1] == string(lateClk) || got[1] == string(lateImp) && got[0] == string(lateClk)) {
		t.Errorf("OnLate got %q, want both late records", got)
	}
	mu.Unlock()
	compareFinals(t, readFinals(t, e.addrs, e.sink), want)
}

// TestRunKafkaIntervalJoinBound crosses the bound of the rows the join
// holds: a click partition that gets no rows holds the clicks' watermark
// back (until its idle timeout, a minute here), so no impression can be
// dropped; past Options.JoinBuffer the pipeline stops with
// drive.ErrIntervalJoinFull and says why, instead of growing or aborting
// the same transaction forever.
func TestRunKafkaIntervalJoinBound(t *testing.T) {
	imps, clks := ijoinData(3, 300)
	e := newIJoinEnv(t, 1, 2)
	q := ijoinQuery(t, e.name)
	produceValues(t, e.addrs, e.clk, 1, clks[:20], nil) // partition 0 only
	produceValues(t, e.addrs, e.imp, 1, imps, nil)
	o := e.options(q)
	o.JoinBuffer = 50
	o.UntilCaughtUp = true
	o.Table.IdleTimeout = time.Minute
	o.Source.IdleTimeout = time.Minute
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = pl.Run(ctx)
	if !errors.Is(err, drive.ErrIntervalJoinFull) || !strings.Contains(err.Error(), "it holds 50 rows") ||
		!strings.Contains(err.Error(), "holds Options.JoinBuffer rows of the join") || !strings.Contains(err.Error(), "one that gets no rows holds it back") {
		t.Fatalf("Run: %v, want the interval join bound's error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run stopped by the test's timeout, not by the bound")
	}
}

// envIJoinChild makes the test binary a child running the interval join
// pipeline (TestRunKafkaIntervalJoinKill kills it): brokers, query name.
const envIJoinChild = "UBIK_KAFKA_IJOIN_CHILD"

func init() {
	spec := os.Getenv(envIJoinChild)
	if spec == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	brokers, name, _ := strings.Cut(spec, "|")
	prog, err := plan.Compile(ijoinScript(name), plan.CompileOptions{})
	if err == nil {
		e := &ijoinEnv{addrs: strings.Split(brokers, ","), name: name, imp: name + "-imp", clk: name + "-clk", sink: name + "-out"}
		o := e.options(prog.Queries[len(prog.Queries)-1])
		o.UntilCaughtUp = os.Getenv(envIJoinChild+"_END") != ""
		var pl *Pipeline
		if pl, err = New(o); err == nil {
			err = pl.Run(ctx)
			st := pl.Stats()
			fmt.Printf("restored %d entries, late %d, table late %d, caught up %v\n", st.RestoredEntries, st.Late, st.TableLate, st.CaughtUp)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ijoin child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRunKafkaIntervalJoinKill: the pipeline in a child process, killed
// with SIGKILL at random points while both inputs arrive in shuffled
// slices, restarted each time (same instance id), then run until caught
// up: the finals equal the in-process run's, one per key, no revision
// twice, state entries restored, nothing late; for the query grouped by
// the join key and for two whose joined rows are repartitioned (one of
// them over computed and TIMESTAMP(3) columns).
func TestRunKafkaIntervalJoinKill(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"", "_site", "_der"} {
		t.Run("by"+by, func(t *testing.T) { ijoinKill(t, by) })
	}
}

// ijoinKill is TestRunKafkaIntervalJoinKill's run of one query: grouped
// by the join key (by ""), by the site (the joined rows repartitioned),
// or by computed and TIMESTAMP(3) columns (by "_der", derivedjoin_test.go:
// repartitioned too).
func ijoinKill(t *testing.T, by string) {
	t.Parallel() // a subtest; each on a cluster (or names) of its own
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	imps, clks := ijoinData(seed, 3000)
	if by == "_der" {
		imps, clks = derivedIJoinData(seed, 3000)
	}
	nImp, nClk := 1+r.IntN(3), 1+r.IntN(3)
	e := newIJoinEnv(t, nImp, nClk, by)
	q := ijoinQuery(t, e.name)
	want := ijoinInProcess(t, q, seed, imps, clks)
	child := func(end bool) *crashtest.Proc {
		env := []string{envIJoinChild + "=" + strings.Join(e.addrs, ",") + "|" + e.name}
		if end {
			env = append(env, envIJoinChild+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	const slices = 6
	for i := range slices {
		cmd := child(false)
		lo, hi := i*len(imps)/slices, (i+1)*len(imps)/slices
		clo, chi := i*len(clks)/slices, (i+1)*len(clks)/slices
		produceShuffled(t, e.addrs, seed+uint64(i), e.imp, nImp, imps[lo:hi], e.clk, nClk, clks[clo:chi])
		time.Sleep(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		if i == slices-1 {
			// Under load a child can be killed before its first commit
			// every time; the last one is killed only after some state
			// is committed, so the final run has a restore to make.
			waitCommittedRecord(t, e.addrs, e.name+"-state", time.Minute)
		}
		killChild(t, cmd)
	}
	final := child(true)
	if err := final.Wait(t, 4*time.Minute); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out := final.Stdout()
	t.Logf("imp %d, clk %d partitions, query %s, %d kills; final run: %s", nImp, nClk, e.name, slices, strings.TrimSpace(out))
	var restored, late, tlate int64
	var caught bool
	if _, err := fmt.Sscanf(out, "restored %d entries, late %d, table late %d, caught up %v", &restored, &late, &tlate, &caught); err != nil {
		t.Fatalf("final run's summary %q: %v", out, err)
	}
	if restored == 0 || late != 0 || tlate != 0 || !caught {
		t.Errorf("final run: restored %d entries (want some), late %d and %d (want 0), caught up %v", restored, late, tlate, caught)
	}
	compareFinals(t, readFinals(t, e.addrs, e.sink), want)
}

// TestCheckQueryIntervalJoin: the interval joins CheckQuery (and New)
// take and refuse.
func TestCheckQueryIntervalJoin(t *testing.T) {
	const src = `CREATE SOURCE u (c VARCHAR, k VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE v (k VARCHAR, m INT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE w (c VARCHAR, k VARCHAR, ms BIGINT, ts AS to_timestamp_ltz(ms, 3), WATERMARK FOR ts AS ts);
`
	const on = ` AND v.ts BETWEEN u.ts AND u.ts + INTERVAL '1' MINUTE`
	for _, c := range []struct{ name, sql, want string }{
		{"left key", `SELECT u.k, count(*) AS n FROM u JOIN v ON u.k = v.k` + on + ` GROUP BY u.k, TUMBLE(u.ts, INTERVAL '1' MINUTE)`, ""},
		{"right key", `SELECT v.k, count(*) AS n FROM u JOIN v ON u.k = v.k` + on + ` GROUP BY u.c, v.k`, ""},
		{"a cast key", `SELECT v.m, count(*) AS n FROM u JOIN v ON u.n = v.m` + on + ` GROUP BY v.m`, ""},
		{"two keys", `SELECT u.k, count(*) AS n FROM u JOIN v ON u.k = v.k AND u.n = v.m` + on + ` GROUP BY u.k, u.n`, ""},
		{"one of two keys", `SELECT u.k, count(*) AS n FROM u JOIN v ON u.k = v.k AND u.n = v.m` + on + ` GROUP BY u.k`, ""},
		{"another column", `SELECT u.c, count(*) AS n FROM u JOIN v ON u.k = v.k` + on + ` GROUP BY u.c`, ""},
		{"an expression of the key", `SELECT upper(u.k) AS g, count(*) AS n FROM u JOIN v ON u.k = v.k` + on + ` GROUP BY upper(u.k)`, ""},
		{"global", `SELECT count(*) AS n FROM u JOIN v ON u.k = v.k` + on, ""},
		{"a computed column, another group", `SELECT w.c, count(*) AS n FROM w JOIN v ON w.k = v.k AND v.ts BETWEEN w.ts AND w.ts + INTERVAL '1' MINUTE GROUP BY w.c`, ""}, // the joined rows repartitioned (TestRunKafkaIntervalJoinDerived),
		{"a computed column, the key", `SELECT w.k, count(*) AS n FROM w JOIN v ON w.k = v.k AND v.ts BETWEEN w.ts AND w.ts + INTERVAL '1' MINUTE GROUP BY w.k`, ""},
	} {
		prog, err := plan.Compile(src+c.sql, plan.CompileOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = CheckQuery(prog.Queries[len(prog.Queries)-1])
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
	q := ijoinQuery(t, "ij")
	ep := func(topic string) Endpoint {
		return Endpoint{Config: Config{Brokers: []string{"k:9092"}}, Topic: topic}
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"no right topic", Options{Query: q, Source: ep("imp"), Sink: ep("out")}, "query ij joins source clk: give its topic (Options.Table; CREATE SOURCE clk ... WITH (connector = 'kafka', topic = '...'))"},
		{"right is the source", Options{Query: q, Source: ep("imp"), Sink: ep("out"), Table: ep("imp")}, "source imp's topic and source clk's topic are both topic imp (on brokers=k:9092): a run reads each input from a topic of its own"},
		{"right is the sink", Options{Query: q, Source: ep("imp"), Sink: ep("out"), Table: ep("out")}, "source clk's topic and query ij's sink are both topic out"},
		{"partitioned by key", Options{Query: q, Source: Endpoint{Config: Config{Brokers: []string{"k:9092"}}, Topic: "imp", PartitionedByKey: true}, Sink: ep("out"), Table: ep("clk")}, "split by the join key: it cannot read the source partitioned by key"},
		{"another cluster", Options{Query: q, Source: ep("imp"), Sink: ep("out"), Table: Endpoint{Config: Config{Brokers: []string{"other:9092"}}, Topic: "clk"}}, "source clk (brokers=other:9092) must be on the source's cluster"},
		{"runs", Options{Query: q, Source: ep("imp"), Sink: ep("out"), Table: ep("clk")}, ""},
		{"runs from latest", Options{Query: q, Source: ep("imp"), Sink: ep("out"), Table: Endpoint{Topic: "clk", From: FromLatest}}, ""},
	} {
		_, err := New(c.o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
}

// TestRunKafkaIntervalJoinInstances: two processes share the three stages
// (their partitions move between them as they join, and again as one
// stops) while both topics grow in shuffled slices; then one runs until
// caught up. The finals equal the in-process run's.
func TestRunKafkaIntervalJoinInstances(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(11, 2400)
	e := newIJoinEnv(t, 3, 3)
	q := ijoinQuery(t, e.name)
	want := ijoinInProcess(t, q, 2, imps, clks)
	opts := func(id string) Options {
		o := e.options(q)
		o.InstanceID = id
		o.Logger = testLogger(t)
		return o
	}
	_, stopA := runPipeline(t, opts("a"))
	_, stopB := runPipeline(t, opts("b"))
	const slices = 4
	for i := range slices {
		lo, hi := i*len(imps)/slices, (i+1)*len(imps)/slices
		clo, chi := i*len(clks)/slices, (i+1)*len(clks)/slices
		produceShuffled(t, e.addrs, uint64(i), e.imp, 3, imps[lo:hi], e.clk, 3, clks[clo:chi])
		time.Sleep(700 * time.Millisecond)
		if i == 1 {
			stopA() // b takes a's partitions of all three stages
		}
	}
	time.Sleep(time.Second)
	stopB()
	o := opts("a")
	if st := runToEnd(t, o, 3*time.Minute); !st.CaughtUp || st.Late != 0 || st.TableLate != 0 {
		t.Errorf("final run: %+v", st)
	}
	compareFinals(t, readFinals(t, e.addrs, e.sink), want)
}

// TestRunKafkaIntervalJoinCSV: both topics in CSV, whose cells can hold
// what JSON cannot: NaN and the infinities as join keys (each matches
// itself, as SQL's equality has it, while the GROUP BY puts the three in
// one group with NULL: the routing by the key under the group key rules
// sends all of them to one partition), beside -0.0 and 0.0 (one key) and
// an empty (NULL) key, quoted sites with the delimiter and doubled quotes.
// The finals equal one in-process driver's over the same records.
func TestRunKafkaIntervalJoinCSV(t *testing.T) {
	t.Parallel()
	csv, err := drive.ParseMessageFormat(map[string]string{"format": "csv"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(23, 4))
	ts := func(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.000000") }
	ads := []string{"NaN", "Infinity", "-Infinity", "-0.0", "0.0", "1.5", ""}
	sites := []string{`a`, `"b""q"`, `"c,d"`, `é😀`, `""`}
	var imps, clks [][]byte
	const n = 1500
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000)
		imps = append(imps, fmt.Appendf(nil, `%s,%s,%d.%02d,%s`, ads[r.IntN(len(ads))], sites[r.IntN(len(sites))], r.IntN(50), r.IntN(100), ts(baseTS+at)))
	}
	for i := range n * 10 / 13 {
		at := int64(i)*130_000 - r.Int64N(2_500_000)
		clks = append(clks, fmt.Appendf(nil, `%s,%d.%02d,"t,%d",%s`, ads[r.IntN(len(ads))], r.IntN(9), r.IntN(100), r.IntN(20), ts(baseTS+at)))
	}
	e := newIJoinEnv(t, 3, 2)
	q := ijoinQuery(t, e.name)
	want := map[string]string{}
	d, err := drive.New(q, drive.Config{
		Emit: func(rec *changelog.Record) error {
			if rec.Meta.Final {
				want[string(rec.Key)] = string(rec.Value)
			}
			return nil
		},
		Decoder:      drive.NewMessageSourceDecoder(q.IJoin.Left, q.LeftUsed(), csv),
		TableDecoder: drive.NewMessageSourceDecoder(q.IJoin.Right, q.RightUsed(), csv),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range max(len(imps), len(clks)) {
		if i < len(imps) {
			if err := d.Push(imps[i]); err != nil {
				t.Fatal(err)
			}
		}
		if i < len(clks) {
			if err := d.PushInput(1, clks[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if st := d.IntervalStats(); st.LateLeft != 0 || st.LateRight != 0 || st.Matches == 0 || st.NullKeys == 0 {
		t.Fatalf("in process: %+v (want matches, NULL keys, nothing late)", st)
	}
	if _, ok := want[`[null, "2026-07-18 10:00:00"]`]; !ok {
		t.Fatalf("in process: no group of the NaN and infinite keys: %v", want)
	}
	produceValues(t, e.addrs, e.clk, 2, clks, nil)
	produceValues(t, e.addrs, e.imp, 3, imps, nil)
	o := e.options(q)
	o.Source.Format, o.Table.Format = csv, csv
	if st := runToEnd(t, o, 2*time.Minute); !st.CaughtUp || st.Late != 0 || st.Malformed != 0 || st.TableMalformed != 0 {
		t.Errorf("stats %+v", st)
	}
	compareFinals(t, readFinals(t, e.addrs, e.sink), want)
}

// TestRunKafkaIntervalJoinFromLatest: both streams read from their ends
// (from = latest, as any source may be): a first run until caught up
// consumes nothing of what was there before and ends.
func TestRunKafkaIntervalJoinFromLatest(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(13, 300)
	e := newIJoinEnv(t, 2, 2)
	produceValues(t, e.addrs, e.imp, 2, imps, nil)
	produceValues(t, e.addrs, e.clk, 2, clks, nil)
	o := e.options(ijoinQuery(t, e.name))
	o.Source.From, o.Table.From = FromLatest, FromLatest
	if st := runToEnd(t, o, time.Minute); !st.CaughtUp || st.EventsIn != 0 || st.TableRows != 0 || st.RecordsOut != 0 {
		t.Errorf("stats %+v: want caught up with nothing read", st)
	}
}
