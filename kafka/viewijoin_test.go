package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a view whose body is an interval join of two streams
// (impressions and clicks of TestRunKafkaIntervalJoin): the chain's root
// is the join. Grouped by the join key's column, the join's partitions
// run the graph; grouped by another column, the joined rows go to the
// view's aggregate through a repartition of their own. Every topic's
// finals, key bytes and values, must equal the in-process graph's (the
// file run's drive.Graph) fed both streams in a shuffled interleaving.

// kijvJoin is the join view: JOINVIEW its name, GROUP its grouping column
// of the impression.
const kijvJoin = `
CREATE SOURCE imp (ad DOUBLE, site VARCHAR, cost DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE SOURCE clk (ad DOUBLE, val DECIMAL(10,2), tag VARCHAR, cts TIMESTAMP,
  WATERMARK FOR cts AS cts - INTERVAL '3' SECOND);
CREATE VIEW joined AS SELECT i.GROUP AS g, TUMBLE_START(c.cts, INTERVAL '10' SECOND) AS w, count(*) AS n,
  sum(i.cost + c.val) AS total, max(c.tag) AS tag, min(i.site) AS site
FROM imp i JOIN clk c ON c.ad = i.ad AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY i.GROUP, TUMBLE(c.cts, INTERVAL '10' SECOND) EMIT FINAL;
`

// kijvShapes: the join view grouped by the join key (ad) or by the site,
// read by a query in the same partitioning (direct), or by a reader that
// keeps it and a total over every group after a view repartition (chain).
var kijvShapes = map[string]struct{ by, readers string }{
	"ad-direct": {"ad", `SELECT g, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(n) AS n, sum(total) AS total, max(tag) AS tag FROM joined GROUP BY g, TUMBLE(w, INTERVAL '30' SECOND)`},
	"ad-chain": {"ad", `CREATE VIEW per30 AS SELECT g, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(n) AS n, sum(total) AS total FROM joined GROUP BY g, TUMBLE(w, INTERVAL '30' SECOND) EMIT FINAL;
SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(n) AS n, sum(total) AS total, count(*) AS groups FROM per30 GROUP BY TUMBLE(m, INTERVAL '1' MINUTE)`},
	"site-direct": {"site", `SELECT g, TUMBLE_START(w, INTERVAL '1' MINUTE) AS h, sum(n) AS n, sum(total) AS total FROM joined GROUP BY g, TUMBLE(w, INTERVAL '1' MINUTE)`},
	"site-chain": {"site", `CREATE VIEW per30 AS SELECT g, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(n) AS n, sum(total) AS total, min(site) AS site FROM joined GROUP BY g, TUMBLE(w, INTERVAL '30' SECOND) EMIT FINAL;
SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(n) AS n, sum(total) AS total, count(*) AS groups FROM per30 GROUP BY TUMBLE(m, INTERVAL '1' MINUTE)`},
}

func kijvQuery(t testing.TB, shape string) *plan.Query {
	t.Helper()
	s, ok := kijvShapes[shape]
	if !ok {
		t.Fatalf("no shape %s", shape)
	}
	prog, err := plan.Compile(strings.ReplaceAll(kijvJoin, "i.GROUP", "i."+s.by)+s.readers, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

// kijvInProcess is the in-process answer: the finals of every query of
// q's graph (by query name), both streams pushed in an interleaving
// shuffled by seed, then closed.
func kijvInProcess(t testing.TB, q *plan.Query, seed uint64, imps, clks [][]byte) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	collect := func(r *changelog.Record) error {
		if !r.Meta.Final {
			return nil
		}
		m := out[r.Meta.Query]
		if m == nil {
			m = map[string]string{}
			out[r.Meta.Query] = m
		}
		if _, dup := m[string(r.Key)]; dup {
			t.Errorf("in process: %s: two finals for %s", r.Meta.Query, r.Key)
		}
		m[string(r.Key)] = string(r.Value)
		return nil
	}
	g, err := drive.NewGraph(q, nil, drive.Config{Emit: collect}, collect, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 3))
	i, j := 0, 0
	for i < len(imps) || j < len(clks) {
		if j == len(clks) || i < len(imps) && r.IntN(2) == 0 {
			for k := r.IntN(40); k >= 0 && i < len(imps); k-- {
				if err := g.Push(imps[i]); err != nil {
					t.Fatal(err)
				}
				i++
			}
			continue
		}
		for k := r.IntN(40); k >= 0 && j < len(clks); k-- {
			if err := g.PushTable(clks[j]); err != nil {
				t.Fatal(err)
			}
			j++
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	st := g.IntervalStats()
	if st.LateLeft != 0 || st.LateRight != 0 || st.Matches == 0 || st.NullKeys == 0 || g.Counts().Late != 0 {
		t.Fatalf("in process: the data must join rows, have NULL keys and nothing late: %+v", st)
	}
	for _, name := range queryNames(q) {
		if len(out[name]) < 3 {
			t.Fatalf("in process: %s has %d finals; the test needs several", name, len(out[name]))
		}
	}
	return out
}

// kijvOptions runs q over the env's streams, each view to its own topic.
func kijvOptions(e *ijoinEnv, q *plan.Query) Options {
	o := e.options(q)
	o.InstanceID = "kijv-1"
	o.ViewSinks = map[string]Endpoint{}
	for _, v := range q.Upstream() {
		o.ViewSinks[v.Name] = endpoint(e.addrs, e.name+"-"+v.Name)
	}
	return o
}

// kijvEnv is an ijoinEnv on the test's own broker.
func kijvEnv(t testing.TB, addrs []string, name string, nImp, nClk int) *ijoinEnv {
	e := &ijoinEnv{addrs: addrs, name: name, imp: name + "-imp", clk: name + "-clk", sink: name + "-out"}
	mkTopic(t, addrs, e.imp, nImp, nil)
	mkTopic(t, addrs, e.clk, nClk, nil)
	return e
}

// kijvSegments is the number of stages a shape's chain runs in.
func kijvSegments(t testing.TB, q *plan.Query) int {
	segs, err := chainQueries(q)
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

// TestRunKafkaViewIntervalJoin: each shape at 1/1, 2/3 and 3/2 partitions
// of the streams (the last with 2 repartition partitions), the topics
// filled in shuffled slices: every topic's finals are the in-process
// graph's, nothing late.
func TestRunKafkaViewIntervalJoin(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(21, 1200)
	segs := map[string]int{"ad-direct": 1, "ad-chain": 2, "site-direct": 2, "site-chain": 3}
	for _, shape := range []string{"ad-direct", "ad-chain", "site-direct", "site-chain"} {
		q := kijvQuery(t, shape)
		if n := kijvSegments(t, q); n != segs[shape] {
			t.Fatalf("%s: %d segments, want %d", shape, n, segs[shape])
		}
		want := kijvInProcess(t, q, 1, imps, clks)
		other := kijvInProcess(t, q, 77, imps, clks)
		for name, m := range want {
			compareFinals(t, other[name], m) // the oracle does not depend on the interleaving
		}
		for _, c := range []struct{ imp, clk, rep int }{{1, 1, 0}, {2, 3, 0}, {3, 2, 2}} {
			t.Run(fmt.Sprintf("%s/imp%d-clk%d-rep%d", shape, c.imp, c.clk, c.rep), func(t *testing.T) {
				addrs := cluster(t).ListenAddrs()
				e := kijvEnv(t, addrs, "kijv", c.imp, c.clk)
				produceShuffled(t, addrs, uint64(c.imp*7+c.clk), e.imp, c.imp, imps, e.clk, c.clk, clks)
				o := kijvOptions(e, q)
				o.RepartitionPartitions = c.rep
				o.UntilCaughtUp = true
				o.Logger = testLogger(t)
				var late int
				o.OnLate = func(*drive.LateEvent) { late++ }
				o.OnViewLate = func(string, *drive.LateEvent) { late++ }
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				pl, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				if err := pl.Run(ctx); err != nil {
					t.Fatal(err)
				}
				st := pl.Stats()
				if !st.CaughtUp || st.Late != 0 || late != 0 || st.TableLate != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(clks)) || st.JoinJoined == 0 {
					t.Errorf("stats %+v, late hooks %d", st, late)
				}
				compareFinals(t, readFinals(t, addrs, o.Sink.Topic), want[q.Name])
				for name, vs := range o.ViewSinks {
					t.Run(name, func(t *testing.T) { compareFinals(t, readFinals(t, addrs, vs.Topic), want[name]) })
				}
				if c.imp != 2 {
					return
				}
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
}

// TestRunKafkaViewIntervalJoinLate: after a caught-up run, a row of each
// stream a minute behind is late at the chain's root: the impression is
// the view's late row (OnViewLate with the view's name), the click the
// join's right stream's (OnLate), as in the graph of a file run; both
// counted, neither joined, every topic's finals unchanged. For the join
// keyed (the graph at the join's partitions) and not (the join alone,
// its rows repartitioned).
func TestRunKafkaViewIntervalJoinLate(t *testing.T) {
	t.Parallel()
	imps, clks := ijoinData(5, 1200)
	for _, shape := range []string{"ad-chain", "site-chain"} {
		t.Run(shape, func(t *testing.T) {
			q := kijvQuery(t, shape)
			want := kijvInProcess(t, q, 1, imps, clks)
			addrs := cluster(t).ListenAddrs()
			e := kijvEnv(t, addrs, "kijv", 2, 2)
			produceValues(t, addrs, e.imp, 2, imps, nil)
			produceValues(t, addrs, e.clk, 2, clks, nil)
			o := kijvOptions(e, q)
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			var mu sync.Mutex
			var got []string
			o.OnLate = func(le *drive.LateEvent) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, "query: "+string(le.Event))
			}
			o.OnViewLate = func(name string, le *drive.LateEvent) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, name+": "+string(le.Event))
			}
			run := func() Stats {
				t.Helper()
				pl, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := pl.Run(ctx); err != nil {
					t.Fatal(err)
				}
				return pl.Stats()
			}
			if st := run(); st.Late != 0 || st.TableLate != 0 || len(got) != 0 {
				t.Fatalf("first run: late %d, table late %d, hooks %q", st.Late, st.TableLate, got)
			}
			lateImp := []byte(`{"ad":1.5,"site":"late","cost":"1.00","ts":"2026-07-18 09:59:00"}`)
			lateClk := []byte(`{"ad":1.5,"val":"1.00","tag":"late","cts":"2026-07-18 09:59:00"}`)
			produceValues(t, addrs, e.imp, 1, [][]byte{lateImp}, nil)
			produceValues(t, addrs, e.clk, 1, [][]byte{lateClk}, nil)
			st := run()
			if st.Late != 1 || st.TableLate != 1 {
				t.Errorf("late %d, table late %d: want 1 and 1", st.Late, st.TableLate)
			}
			mu.Lock()
			slices.Sort(got)
			if w := []string{"joined: " + string(lateImp), "query: " + string(lateClk)}; !slices.Equal(got, w) {
				t.Errorf("late hooks got %q, want %q", got, w)
			}
			mu.Unlock()
			compareFinals(t, readFinals(t, addrs, o.Sink.Topic), want[q.Name])
			for name, vs := range o.ViewSinks {
				t.Run(name, func(t *testing.T) { compareFinals(t, readFinals(t, addrs, vs.Topic), want[name]) })
			}
		})
	}
}

// envKIJVChild makes the test binary a child running a shape's chain
// over the brokers it names: "brokers|shape" (TestRunKafkaViewIntervalJoinKill
// kills it).
const envKIJVChild = "UBIK_KAFKA_KIJV_CHILD"

func init() {
	spec := os.Getenv(envKIJVChild)
	if spec == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	brokers, shape, _ := strings.Cut(spec, "|")
	s, ok := kijvShapes[shape]
	var err error
	if !ok {
		err = fmt.Errorf("no shape %q", shape)
	}
	var prog *plan.Program
	if err == nil {
		prog, err = plan.Compile(strings.ReplaceAll(kijvJoin, "i.GROUP", "i."+s.by)+s.readers, plan.CompileOptions{})
	}
	if err == nil {
		e := &ijoinEnv{addrs: strings.Split(brokers, ","), name: "kijv", imp: "kijv-imp", clk: "kijv-clk", sink: "kijv-out"}
		o := kijvOptions(e, prog.Queries[len(prog.Queries)-1])
		o.UntilCaughtUp = os.Getenv(envKIJVChild+"_END") != ""
		var late int
		o.OnLate = func(*drive.LateEvent) { late++ }
		o.OnViewLate = func(string, *drive.LateEvent) { late++ }
		var pl *Pipeline
		if pl, err = New(o); err == nil {
			err = pl.Run(ctx)
			st := pl.Stats()
			fmt.Printf("restored %d entries, late %d, table late %d, caught up %v\n", st.RestoredEntries, int(st.Late)+late, st.TableLate, st.CaughtUp)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kijv child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRunKafkaViewIntervalJoinKill: the chains (the join keyed, then a
// view repartition; the join's rows repartitioned to the view, then a
// view repartition) in a child process killed with SIGKILL at random
// points while both streams arrive in shuffled slices, restarted each
// time, then run until caught up: every topic's finals equal the
// in-process graph's, one per key, state restored in every stage,
// nothing late.
func TestRunKafkaViewIntervalJoinKill(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"ad-chain", "site-chain"} {
		t.Run(shape, func(t *testing.T) { kijvKill(t, shape) })
	}
}

func kijvKill(t *testing.T, shape string) {
	t.Parallel() // a subtest; each on a cluster (or names) of its own
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 4))
	q := kijvQuery(t, shape)
	imps, clks := ijoinData(seed, 2400)
	want := kijvInProcess(t, q, seed, imps, clks)
	nImp, nClk := 1+r.IntN(3), 1+r.IntN(3)
	addrs := cluster(t).ListenAddrs()
	e := kijvEnv(t, addrs, "kijv", nImp, nClk)
	child := func(end bool) *crashtest.Proc {
		env := []string{envKIJVChild + "=" + strings.Join(addrs, ",") + "|" + shape}
		if end {
			env = append(env, envKIJVChild+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	states := []string{q.Name + "-state", q.Name + "-s2-state"}
	if shape == "site-chain" {
		states = append(states, q.Name+"-s3-state")
	}
	const slices = 6
	for i := range slices {
		cmd := child(false)
		lo, hi := i*len(imps)/slices, (i+1)*len(imps)/slices
		clo, chi := i*len(clks)/slices, (i+1)*len(clks)/slices
		produceShuffled(t, addrs, seed+uint64(i), e.imp, nImp, imps[lo:hi], e.clk, nClk, clks[clo:chi])
		time.Sleep(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		if i == slices-1 {
			// The last child is killed only after every stage committed
			// state, so the final run restores each.
			for _, s := range states {
				waitCommittedRecord(t, addrs, s, time.Minute)
			}
		}
		killChild(t, cmd)
	}
	final := child(true)
	if err := final.Wait(t, 3*time.Minute); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out := final.Stdout()
	t.Logf("imp %d, clk %d partitions, %d kills; final run: %s", nImp, nClk, slices, strings.TrimSpace(out))
	var restored, late, tlate int64
	var caught bool
	if _, err := fmt.Sscanf(out, "restored %d entries, late %d, table late %d, caught up %v", &restored, &late, &tlate, &caught); err != nil {
		t.Fatalf("final run's summary %q: %v", out, err)
	}
	if restored == 0 || late != 0 || tlate != 0 || !caught {
		t.Errorf("final run: restored %d entries (want some), late %d and %d (want 0), caught up %v", restored, late, tlate, caught)
	}
	o := kijvOptions(e, q)
	compareFinals(t, readFinals(t, addrs, o.Sink.Topic), want[q.Name])
	for name, vs := range o.ViewSinks {
		t.Run(name, func(t *testing.T) { compareFinals(t, readFinals(t, addrs, vs.Topic), want[name]) })
	}
}

// TestViewIntervalJoinSegments: where a chain rooted at an interval join
// of two streams is cut. Grouped by every equality's column (here two,
// one under a cast), a reader that keeps both stays in the join's
// partitions and one that keeps one of them is cut; grouped by another
// column, the join's rows are cut from the view's aggregate, and its
// readers follow the view's GROUP BY.
func TestViewIntervalJoinSegments(t *testing.T) {
	const src = `CREATE SOURCE i (id INT, c VARCHAR, s VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE k (iid BIGINT, c VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
`
	const keyed = `CREATE VIEW j AS SELECT i.id, k.c, i.s, TUMBLE_START(k.ts, INTERVAL '1' MINUTE) AS w, count(*) AS n FROM i JOIN k ON k.iid = i.id AND k.c = i.c AND k.ts BETWEEN i.ts AND i.ts + INTERVAL '5' SECOND
  GROUP BY i.id, k.c, i.s, TUMBLE(k.ts, INTERVAL '1' MINUTE) EMIT FINAL;
`
	const bySite = `CREATE VIEW j AS SELECT i.s, i.c, TUMBLE_START(k.ts, INTERVAL '1' MINUTE) AS w, count(*) AS n FROM i JOIN k ON k.iid = i.id AND k.ts BETWEEN i.ts AND i.ts + INTERVAL '5' SECOND
  GROUP BY i.s, i.c, TUMBLE(k.ts, INTERVAL '1' MINUTE) EMIT FINAL;
`
	for _, c := range []struct {
		view, reader string
		segs         []int // queries per segment
	}{
		{keyed, "SELECT c, id, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM j GROUP BY c, id, TUMBLE(w, INTERVAL '1' HOUR)", []int{2}},
		{keyed, "SELECT id, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM j GROUP BY id, TUMBLE(w, INTERVAL '1' HOUR)", []int{1, 1}},
		{keyed, "SELECT s, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM j GROUP BY s, TUMBLE(w, INTERVAL '1' HOUR)", []int{1, 1}},
		{bySite, "SELECT s, c, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM j GROUP BY s, c, TUMBLE(w, INTERVAL '1' HOUR)", []int{1, 2}},
		{bySite, "SELECT c, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM j GROUP BY c, TUMBLE(w, INTERVAL '1' HOUR)", []int{1, 1, 1}},
	} {
		q := lastQuery(t, src+c.view+c.reader)
		if err := CheckQuery(q); err != nil {
			t.Errorf("%s: %v", c.reader, err)
			continue
		}
		segs, err := chainQueries(q)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, s := range segs {
			got = append(got, len(s))
		}
		if !slices.Equal(got, c.segs) {
			t.Errorf("%s over %s: segments of %v queries, want %v", c.reader, strings.SplitN(c.view, " AS", 2)[0], got, c.segs)
		}
	}
}
