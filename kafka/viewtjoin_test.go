package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a view whose body is a temporal join (the billing story:
// per-customer charges priced at each event's time, read by coarser
// totals): the chain's root joins the table in the first segment, the
// readers follow in the same segment or after a view repartition. Every
// topic's finals must equal the in-process graph's.

// ktjvReaders: a reader in the join's segment (it groups by the
// customer, as the view does), and one that groups by less (the window
// alone), after a view repartition.
const (
	ktjvSame   = "SELECT customer, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(charge) AS charge, sum(events) AS events, max(label) AS label FROM charge GROUP BY customer, TUMBLE(w, INTERVAL '30' SECOND)"
	ktjvRepart = "SELECT TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(charge) AS charge, sum(events) AS events, sum(priced) AS priced, count(*) AS rows FROM charge GROUP BY TUMBLE(w, INTERVAL '30' SECOND)"
	// ktjvChain: both, chained: the join's graph holds charge and
	// per_customer, the repartitioned segment the total.
	ktjvChain = "CREATE VIEW per_customer AS SELECT customer, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(charge) AS charge, sum(events) AS events FROM charge GROUP BY customer, TUMBLE(w, INTERVAL '30' SECOND) EMIT FINAL;\n" +
		"SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(charge) AS charge, sum(events) AS events, count(*) AS customers FROM per_customer GROUP BY TUMBLE(m, INTERVAL '1' MINUTE)"
)

// ktjvByTableSame reads ktjvByTable's view in its join's segment after
// the joined rows' repartition (it groups by the view's table column).
const ktjvByTableSame = "SELECT lab, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(charge) AS charge, sum(events) AS events, max(label) AS label FROM charge GROUP BY lab, TUMBLE(w, INTERVAL '30' SECOND)"

// ktjvByTable is ktjvSQL with the view grouped by a column of the table
// (p.label): over Kafka the join runs alone and its joined rows are
// repartitioned by the view's GROUP BY before its aggregate and readers.
func ktjvByTable(reader string) string {
	sql := strings.Replace(ktjvSQL(reader), "SELECT u.customer, TUMBLE_START(u.ts", "SELECT p.label AS lab, TUMBLE_START(u.ts", 1)
	sql = strings.Replace(sql, "max(p.label) AS label", "max(u.customer) AS label", 1)
	return strings.Replace(sql, "GROUP BY u.customer, TUMBLE(u.ts", "GROUP BY p.label, TUMBLE(u.ts", 1)
}

// ktjvSQL is the join of TestRunKafkaTemporalJoin as a view, read by reader.
func ktjvSQL(reader string) string {
	return strings.Replace(kjoinSQL, "INTERVAL '10' SECOND);", "INTERVAL '10' SECOND) EMIT FINAL;", 1) + "\n" + reader
}

func ktjvProgram(t testing.TB, reader string) *plan.Program {
	t.Helper()
	prog, err := plan.Compile(ktjvSQL(reader), plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// ktjvInProcess is the in-process answer: the finals of every query of
// the graph of q (by query name), the whole table pushed first, then the
// events, then closed, as a file run.
func ktjvInProcess(t testing.TB, q *plan.Query, events, versions [][]byte) map[string]map[string]string {
	return ktjvInProcessLate(t, q, events, versions, 0)
}

// ktjvInProcessLate is ktjvInProcess for a table with lateTable rows late.
func ktjvInProcessLate(t testing.TB, q *plan.Query, events, versions [][]byte, lateTable int64) map[string]map[string]string {
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
	for _, v := range versions {
		if err := g.PushTable(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := g.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if st := g.JoinStats(); st.LateEvents != 0 || st.LateTableRows != lateTable || st.Joined == 0 || st.Unmatched == 0 {
		t.Fatalf("in process: the data must join some events, leave some unmatched and have nothing late: %+v", st)
	}
	if c := g.Counts(); c.Late != 0 {
		t.Fatalf("in process: %d late", c.Late)
	}
	for _, name := range queryNames(q) {
		if len(out[name]) < 3 {
			t.Fatalf("in process: %s has %d finals; the test needs several", name, len(out[name]))
		}
	}
	return out
}

// queryNames is q's chain, root first.
func queryNames(q *plan.Query) []string {
	var out []string
	for _, v := range q.Upstream() {
		out = append([]string{v.Name}, out...)
	}
	return append(out, q.Name)
}

// ktjvOptions runs q over usage and prices, each view to its own topic
// (<view>-out), q to "totals".
func ktjvOptions(q *plan.Query, addrs []string, suffix string) Options {
	o := Options{Query: q, Source: endpoint(addrs, "usage"), Table: endpoint(addrs, "prices"), Sink: endpoint(addrs, "totals"+suffix),
		InstanceID: "ktjv-1", ViewSinks: map[string]Endpoint{}}
	for _, v := range q.Upstream() {
		o.ViewSinks[v.Name] = endpoint(addrs, v.Name+"-out"+suffix)
	}
	return o
}

func ktjvCompare(t *testing.T, addrs []string, o Options, want map[string]map[string]string) {
	t.Helper()
	compareFinals(t, readFinals(t, addrs, o.Sink.Topic), want[o.Query.Name])
	for name, vs := range o.ViewSinks {
		t.Run(name, func(t *testing.T) { compareFinals(t, readFinals(t, addrs, vs.Topic), want[name]) })
	}
}

// TestRunKafkaViewTemporalJoin: a reader in the join's segment and one
// after a view repartition, at several source, table and repartition
// partition counts; then --reset-state into new topics gives the same.
func TestRunKafkaViewTemporalJoin(t *testing.T) {
	t.Parallel()
	events, versions := kjoinData(11, 1200)
	for _, rd := range []struct{ name, sql string }{{"same-segment", ktjvSQL(ktjvSame)}, {"repartitioned", ktjvSQL(ktjvRepart)},
		{"by-table-column", ktjvByTable(ktjvByTableSame)}, {"by-table-column-repartitioned", ktjvByTable(ktjvRepart)}} {
		prog, err := plan.Compile(rd.sql, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rd.sql, "GROUP BY "+map[bool]string{true: "p.label", false: "u.customer"}[strings.HasPrefix(rd.name, "by-table")]+", TUMBLE(u.ts") {
			t.Fatalf("%s: the view's GROUP BY is not the one the case is for:\n%s", rd.name, rd.sql)
		}
		q := prog.Queries[len(prog.Queries)-1]
		want := ktjvInProcess(t, q, events, versions)
		for _, c := range []struct{ src, tbl, rep int }{{1, 1, 0}, {3, 2, 0}, {4, 3, 2}} {
			t.Run(fmt.Sprintf("%s/source%d-table%d-rep%d", rd.name, c.src, c.tbl, c.rep), func(t *testing.T) {
				addrs := cluster(t).ListenAddrs()
				mkTopic(t, addrs, "usage", c.src, nil)
				mkTopic(t, addrs, "prices", c.tbl, nil)
				produceValues(t, addrs, "prices", c.tbl, versions, nil)
				produceValues(t, addrs, "usage", c.src, events, nil)
				o := ktjvOptions(q, addrs, "")
				o.RepartitionPartitions = c.rep
				o.UntilCaughtUp = true
				o.Logger = testLogger(t)
				var late int
				o.OnLate = func(*drive.LateEvent) { late++ }
				o.OnViewLate = func(string, *drive.LateEvent) { late++ }
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				run := func(o Options) Stats {
					pl, err := New(o)
					if err != nil {
						t.Fatal(err)
					}
					if err := pl.Run(ctx); err != nil {
						t.Fatal(err)
					}
					return pl.Stats()
				}
				st := run(o)
				if !st.CaughtUp || st.Late != 0 || late != 0 || st.TableLate != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(versions)) {
					t.Errorf("stats %+v, late hooks %d", st, late)
				}
				if st.JoinJoined+st.JoinUnmatched != int64(len(events)) || st.JoinUnmatched == 0 || st.JoinWaiting != 0 || st.JoinVersions == 0 {
					t.Errorf("join gauges: joined %d, unmatched %d (want %d in all), waiting %d, versions %d",
						st.JoinJoined, st.JoinUnmatched, len(events), st.JoinWaiting, st.JoinVersions)
				}
				ktjvCompare(t, addrs, o, want)
				if c.src != 3 {
					return
				}
				// The state is the table's too: a moved table is refused.
				moved := o
				moved.Table.Topic = "prices2"
				if pl, err := New(moved); err != nil {
					t.Fatal(err)
				} else if err := pl.Run(ctx); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), `the versioned table's topic was "prices", now "prices2"`) {
					t.Errorf("a moved table: %v", err)
				}
				// A reset clears the join's state and the table stage's
				// offsets: the next run reads both topics again and
				// writes the same finals to new topics.
				o2 := ktjvOptions(q, addrs, "-2")
				o2.UntilCaughtUp, o2.ResetState, o2.Logger, o2.OnLate, o2.OnViewLate = true, true, o.Logger, o.OnLate, o.OnViewLate
				if st := run(o2); st.RestoredEntries != 0 || st.TableRows != int64(len(versions)) || st.JoinJoined+st.JoinUnmatched != int64(len(events)) {
					t.Errorf("after the reset: restored %d entries (want 0), %d table rows (want %d), %d events joined (want %d)",
						st.RestoredEntries, st.TableRows, len(versions), st.JoinJoined+st.JoinUnmatched, len(events))
				}
				ktjvCompare(t, addrs, o2, want)
			})
		}
	}
}

// TestRunKafkaViewTemporalJoinLateTableRows: the table rows behind
// their own table partition's watermark are late at the view's join
// inside the graph exactly as at a join query's driver
// (TestRunKafkaTemporalJoinLateTableRows): counted once, not applied,
// every topic's finals those of the in-process graph.
func TestRunKafkaViewTemporalJoinLateTableRows(t *testing.T) {
	t.Parallel()
	prog := ktjvProgram(t, ktjvSame)
	q := prog.Queries[len(prog.Queries)-1]
	events, _ := kjoinData(11, 800)
	versions, parts, nLate := lateTableData()
	want := ktjvInProcessLate(t, q, events, versions, int64(nLate))
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 2, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	produceTable(t, addrs, 2, versions, parts)
	produceValues(t, addrs, "usage", 2, events, nil)
	o := ktjvOptions(q, addrs, "")
	o.UntilCaughtUp = true
	o.Logger = testLogger(t)
	var lateRows int
	o.OnLate = func(*drive.LateEvent) { lateRows++ }
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st := pl.Stats(); st.TableLate != int64(nLate) || st.TableRows != int64(len(versions)) || st.Late != 0 || lateRows != nLate {
		t.Errorf("%d late table rows of %d (late hook %d), want %d late; %d late events", st.TableLate, st.TableRows, lateRows, nLate, st.Late)
	}
	ktjvCompare(t, addrs, o, want)
}

// envKTJVChild makes the test binary a child running the chain
// (ktjvChain) over the brokers it names (TestRunKafkaViewTemporalJoinKill
// kills it).
const envKTJVChild = "UBIK_KAFKA_KTJV_CHILD"

func init() {
	brokers := os.Getenv(envKTJVChild)
	if brokers == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	prog, err := plan.Compile(ktjvSQL(ktjvChain), plan.CompileOptions{})
	if err == nil {
		o := ktjvOptions(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","), "")
		o.UntilCaughtUp = os.Getenv(envKTJVChild+"_END") != ""
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
		fmt.Fprintln(os.Stderr, "ktjv child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRunKafkaViewTemporalJoinKill: the chain charge (the join) ->
// per_customer (same segment) -> the total (repartitioned) in a child
// process killed with SIGKILL at random points while both inputs
// arrive, restarted each time, then run until caught up: every topic's
// finals equal the in-process graph's, one per key.
func TestRunKafkaViewTemporalJoinKill(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	prog := ktjvProgram(t, ktjvChain)
	q := prog.Queries[len(prog.Queries)-1]
	events, versions := kjoinData(seed, 2400)
	want := ktjvInProcess(t, q, events, versions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 3, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	child := func(end bool) *crashtest.Proc {
		env := []string{envKTJVChild + "=" + strings.Join(addrs, ",")}
		if end {
			env = append(env, envKTJVChild+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	const slices = 6
	for i := range slices {
		cmd := child(false)
		lo, hi := i*len(events)/slices, (i+1)*len(events)/slices
		vlo, vhi := i*len(versions)/slices, (i+1)*len(versions)/slices
		if r.IntN(2) == 0 {
			produceValues(t, addrs, "prices", 2, versions[vlo:vhi], nil)
			produceValues(t, addrs, "usage", 3, events[lo:hi], nil)
		} else {
			produceValues(t, addrs, "usage", 3, events[lo:hi], nil)
			time.Sleep(time.Duration(r.IntN(500)) * time.Millisecond)
			produceValues(t, addrs, "prices", 2, versions[vlo:vhi], nil)
		}
		time.Sleep(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		if i == slices-1 {
			// The last child is killed only after both segments
			// committed state, so the final run restores both.
			waitCommittedRecord(t, addrs, q.Name+"-state", time.Minute)
			waitCommittedRecord(t, addrs, q.Name+"-s2-state", time.Minute)
		}
		killChild(t, cmd)
	}
	final := child(true)
	if err := final.Wait(t, 3*time.Minute); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out := final.Stdout()
	t.Logf("%d kills; final run: %s", slices, strings.TrimSpace(out))
	var restored, late, tlate int64
	var caught bool
	if _, err := fmt.Sscanf(out, "restored %d entries, late %d, table late %d, caught up %v", &restored, &late, &tlate, &caught); err != nil {
		t.Fatalf("final run's summary %q: %v", out, err)
	}
	if restored == 0 || late != 0 || tlate != 0 || !caught {
		t.Errorf("final run: restored %d entries (want some), late %d and %d (want 0), caught up %v", restored, late, tlate, caught)
	}
	ktjvCompare(t, addrs, ktjvOptions(q, addrs, ""), want)
}

// TestCheckQueryViewOverJoin: a view with a temporal join, read by
// another query, runs over Kafka, grouped by the stream's columns or by
// a column of its table (the joined rows repartitioned first).
func TestCheckQueryViewOverJoin(t *testing.T) {
	const head = `CREATE SOURCE u (c VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, g VARCHAR, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
`
	for _, c := range []struct{ sql, err string }{
		{`CREATE VIEW priced AS SELECT u.c, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(t.p) AS p FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k
  GROUP BY u.c, TUMBLE(u.ts, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT c, TUMBLE_START(m, INTERVAL '1' HOUR) AS h, sum(p) AS p FROM priced GROUP BY c, TUMBLE(m, INTERVAL '1' HOUR)`, ""},
		{`CREATE VIEW priced AS SELECT u.c, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(t.p) AS p FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k
  GROUP BY u.c, TUMBLE(u.ts, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT TUMBLE_START(m, INTERVAL '1' HOUR) AS h, sum(p) AS p FROM priced GROUP BY TUMBLE(m, INTERVAL '1' HOUR)`, ""},
		{`CREATE VIEW priced AS SELECT t.g, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(t.p) AS p FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k
  GROUP BY t.g, TUMBLE(u.ts, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT g, TUMBLE_START(m, INTERVAL '1' HOUR) AS h, sum(p) AS p FROM priced GROUP BY g, TUMBLE(m, INTERVAL '1' HOUR)`, ""},
	} {
		prog, err := plan.Compile(head+c.sql, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = CheckQuery(prog.Queries[len(prog.Queries)-1])
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.sql, err)
		case c.err != "" && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "run the graph from files")):
			t.Errorf("%s: %v, want %q", c.sql, err, c.err)
		}
		// The view alone (the join's own query) runs over Kafka.
		if err := CheckQuery(prog.Queries[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckQueryViewOverIntervalJoin: a query over a view whose body is
// an interval join of two streams runs over Kafka, read directly, through
// another view (viewijoin_test.go runs them) or by a side of a join of
// two views (viewjoin_shapes_test.go).
func TestCheckQueryViewOverIntervalJoin(t *testing.T) {
	const sql = `CREATE SOURCE i (id BIGINT, c VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE k (iid BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW tenm AS SELECT i.c, TUMBLE_START(k.ts, INTERVAL '10' MINUTE) AS w, count(*) AS n FROM i JOIN k ON k.iid = i.id AND k.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
  GROUP BY i.c, TUMBLE(k.ts, INTERVAL '10' MINUTE) EMIT FINAL;
CREATE VIEW hourly AS SELECT c, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM tenm GROUP BY c, TUMBLE(w, INTERVAL '1' HOUR) EMIT FINAL;
CREATE VIEW daily AS SELECT c, TUMBLE_START(h, INTERVAL '1' DAY) AS d, sum(n) AS n FROM hourly GROUP BY c, TUMBLE(h, INTERVAL '1' DAY);
CREATE VIEW vi AS SELECT c, TUMBLE_START(ts, INTERVAL '1' HOUR) AS h, count(*) AS m FROM i GROUP BY c, TUMBLE(ts, INTERVAL '1' HOUR) EMIT FINAL;
CREATE VIEW both AS SELECT a.c, TUMBLE_START(a.h, INTERVAL '1' HOUR) AS h, sum(a.n) AS n, sum(b.m) AS m FROM hourly a JOIN vi b ON a.c = b.c AND a.h = b.h GROUP BY a.c, TUMBLE(a.h, INTERVAL '1' HOUR);`
	prog, err := plan.Compile(sql, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range prog.Queries[1:] {
		if err := CheckQuery(q); err != nil {
			t.Errorf("%s: %v", q.Name, err)
		}
	}
	// The view alone (the join's own query) runs over Kafka.
	if err := CheckQuery(prog.Queries[0]); err != nil {
		t.Fatal(err)
	}
}
