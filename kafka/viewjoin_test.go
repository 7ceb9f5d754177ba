package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
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
)

// The join of two views over Kafka: bench/queries/q8.sql (Nexmark q8:
// the persons who opened an auction in the 10-second window in which
// they entered the system) over bench/gen's person and auction streams.

// q8Query compiles the benchmark's q8.
func q8Query(t testing.TB) *plan.Query {
	t.Helper()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := plan.Compile(string(text), plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

var nexmarkCache sync.Map // "kind/events/seed" -> [][]byte

// nexmark returns bench/gen's stream of kind (person or auction), one
// JSON object per line.
func nexmark(t testing.TB, kind string, events int, seed uint64) [][]byte {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%d", kind, events, seed)
	if v, ok := nexmarkCache.Load(key); ok {
		return v.([][]byte)
	}
	cmd := osexec.Command("go", "run", "./bench/gen", "--kind", kind, "--events", fmt.Sprint(events), "--seed", fmt.Sprint(seed))
	cmd.Dir = ".."
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench/gen --kind %s: %v\n%s", kind, err, errb.String())
	}
	lines := bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n"))
	if len(lines) != events {
		t.Fatalf("bench/gen --kind %s: %d lines, want %d", kind, len(lines), events)
	}
	nexmarkCache.Store(key, lines)
	return lines
}

// q8InProcess runs q8 over both streams in one graph, persons and
// auctions interleaved by slices, and returns every query's finals by
// query name.
func q8InProcess(t testing.TB, q *plan.Query, persons, auctions [][]byte) map[string]map[string]string {
	t.Helper()
	want := graphFinals(t, q, persons, auctions)
	if len(want["q8"]) == 0 || len(want["new_persons"]) == 0 || len(want["new_sellers"]) == 0 {
		t.Fatalf("in process: finals %d, %d, %d: the data must join", len(want["new_persons"]), len(want["new_sellers"]), len(want["q8"]))
	}
	return want
}

// graphFinals runs q's graph over the person and auction streams, as
// q8InProcess, and returns every query's finals by query name.
func graphFinals(t testing.TB, q *plan.Query, persons, auctions [][]byte) map[string]map[string]string {
	t.Helper()
	want := map[string]map[string]string{}
	collect := func(rec *changelog.Record) error {
		m := want[rec.Meta.Query]
		if m == nil {
			m = map[string]string{}
			want[rec.Meta.Query] = m
		}
		if !rec.Meta.Final {
			t.Errorf("in process: %s key %s is not final", rec.Meta.Query, rec.Key)
		}
		m[string(rec.Key)] = string(rec.Value)
		return nil
	}
	g, err := drive.NewGraph(q, nil, drive.Config{Emit: collect}, collect, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srcs := g.Sources(); len(srcs) == 2 && srcs[0].Name == "auction" {
		persons, auctions = auctions, persons // the graph's first input is the auctions
	}
	for i, j := 0, 0; i < len(persons) || j < len(auctions); i, j = i+300, j+900 {
		for _, v := range persons[min(i, len(persons)):min(i+300, len(persons))] {
			if err := g.Push(v); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range auctions[min(j, len(auctions)):min(j+900, len(auctions))] {
			if err := g.PushTable(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if c, tc := g.Counts(), g.TableCounts(); c.Late+tc.Late != 0 || c.Malformed+tc.Malformed != 0 {
		t.Fatalf("in process: late %d and %d, malformed %d and %d", c.Late, tc.Late, c.Malformed, tc.Malformed)
	}
	return want
}

// q8Options runs q8 from topics person and auction into q8-out and the
// views' topics.
func q8Options(q *plan.Query, addrs []string) Options {
	return Options{Query: q, Source: endpoint(addrs, "person"), JoinSource: endpoint(addrs, "auction"),
		Sink: endpoint(addrs, "q8-out"), InstanceID: "q8-1",
		ViewSinks: map[string]Endpoint{"new_persons": endpoint(addrs, "np-out"), "new_sellers": endpoint(addrs, "ns-out")}}
}

// q8Topics maps each query's name to its topic.
var q8Topics = map[string]string{"q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}

// compareQ8 reads every query's topic (one final per key, revisions
// increasing) and compares its finals with the in-process run's.
func compareQ8(t testing.TB, addrs []string, want map[string]map[string]string) {
	t.Helper()
	for name, topic := range q8Topics {
		got := readFinals(t, addrs, topic)
		if len(got) != len(want[name]) {
			t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
		}
		compareFinals(t, got, want[name])
	}
}

// TestRunKafkaViewJoin: q8 over Kafka at 1, 2 and 3 partitions of each
// source (and of the join stage, or 2 of it over 3), every topic's
// finals equal to the in-process graph's, one per key.
func TestRunKafkaViewJoin(t *testing.T) {
	t.Parallel()
	q := q8Query(t)
	persons, auctions := nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8)
	want := q8InProcess(t, q, persons, auctions)
	t.Logf("in process: %d new persons, %d new sellers, %d q8 rows", len(want["new_persons"]), len(want["new_sellers"]), len(want["q8"]))
	for _, c := range []struct{ person, auction, rep int }{{1, 1, 0}, {2, 2, 0}, {3, 3, 0}, {3, 2, 2}, {1, 3, 3}} {
		t.Run(fmt.Sprintf("person%d-auction%d-rep%d", c.person, c.auction, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "person", c.person, nil)
			mkTopic(t, addrs, "auction", c.auction, nil)
			produceValues(t, addrs, "person", c.person, persons, nil)
			produceValues(t, addrs, "auction", c.auction, auctions, nil)
			o := q8Options(q, addrs)
			o.RepartitionPartitions = c.rep
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			var mu sync.Mutex
			late := 0
			o.OnLate = func(*drive.LateEvent) { mu.Lock(); late++; mu.Unlock() }
			st := runToEnd(t, o, 3*time.Minute)
			if !st.CaughtUp || st.Late != 0 || late != 0 || st.EventsIn != int64(len(persons)+len(auctions)) || st.Malformed != 0 {
				t.Errorf("stats %+v, late hook %d", st, late)
			}
			compareQ8(t, addrs, want)
		})
	}
}

// TestCheckQueryViewJoins: the joins of views CheckQuery (and New)
// refuse, each saying why.
func TestCheckQueryViewJoins(t *testing.T) {
	const src = `CREATE SOURCE ps (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE VIEW np AS SELECT id, name, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v FROM ps GROUP BY id, name, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS a FROM au GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
`
	const join = ` FROM np p JOIN ns a ON p.id = a.seller AND p.ws = a.ws `
	for _, c := range []struct{ name, sql, want string }{
		{"q8", `CREATE VIEW j AS SELECT p.id, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS w, count(*) AS n` + join + `GROUP BY p.id, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;`, ""},
		{"by the right's column", `CREATE VIEW j AS SELECT a.seller, count(*) AS n` + join + `GROUP BY a.seller;`, ""},
		// Grouped by none of the join's equality columns: the joined rows
		// are repartitioned by the GROUP BY (viewjoin_shapes_test.go).
		{"by no join column", `CREATE VIEW j AS SELECT TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS w, count(*) AS n` + join + `GROUP BY TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;`, ""},
		{"by an expression of one", `CREATE VIEW j AS SELECT p.id + 1 AS i, count(*) AS n` + join + `GROUP BY p.id + 1;`, ""},
		// A side's chain cut by a view repartition runs as its segments
		// (viewjoin_sides_test.go).
		{"a side cut by a repartition", `CREATE VIEW allp AS SELECT TUMBLE_START(ws, INTERVAL '10' SECOND) AS ws, max(id) AS id FROM np GROUP BY TUMBLE(ws, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT a.seller, count(*) AS n FROM allp p JOIN ns a ON p.id = a.seller AND p.ws = a.ws GROUP BY a.seller;`, ""},
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
	// A join of two views read by another query grouped by the join's
	// partition column runs (TestCheckQueryOverViewJoin has the rest).
	if prog, err := plan.Compile(src+`CREATE VIEW j AS SELECT p.id, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS w, count(*) AS n`+join+`GROUP BY p.id, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW top AS SELECT id, count(*) AS n FROM j GROUP BY id;`, plan.CompileOptions{}); err != nil {
		t.Errorf("a query over a join of views: %v", err)
	} else if err := CheckQuery(prog.Queries[len(prog.Queries)-1]); err != nil {
		t.Errorf("a query over a join of views over Kafka: %v", err)
	}
	// A view that is a temporal join, read by another query: it runs
	// over Kafka as the chain's root, grouped by the stream's columns
	// or by a table column.
	prog, err := plan.Compile(src+`CREATE VIEW tj AS SELECT ps.id, TUMBLE_START(ps.ts, INTERVAL '10' SECOND) AS ws, count(*) AS n FROM ps JOIN t FOR SYSTEM_TIME AS OF ps.ts ON ps.name = t.k GROUP BY ps.id, TUMBLE(ps.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW top AS SELECT id, count(*) AS n FROM tj GROUP BY id;`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatalf("a query over a temporal join: %v", err)
	}
	if err := CheckQuery(prog.Queries[len(prog.Queries)-1]); err != nil {
		t.Errorf("a query over a temporal join over Kafka: %v", err)
	}
	prog, err = plan.Compile(src+`CREATE VIEW tj AS SELECT t.k, TUMBLE_START(ps.ts, INTERVAL '10' SECOND) AS ws, count(*) AS n FROM ps JOIN t FOR SYSTEM_TIME AS OF ps.ts ON ps.name = t.k GROUP BY t.k, TUMBLE(ps.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW top AS SELECT k, count(*) AS n FROM tj GROUP BY k;`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatalf("a query over a temporal join grouped by a table column: %v", err)
	}
	if err := CheckQuery(prog.Queries[len(prog.Queries)-1]); err != nil {
		t.Errorf("a query over a temporal join grouped by a table column, over Kafka: %v", err)
	}

	q := q8Query(t)
	addrs := []string{"k:9092"}
	for _, c := range []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"runs", func(*Options) {}, ""},
		{"no second source", func(o *Options) { o.JoinSource = Endpoint{} }, "source auction needs its topic too (Options.JoinSource)"},
		{"second source is the first", func(o *Options) { o.JoinSource.Topic = "person" }, "source person's topic and source auction's topic are both topic person"},
		{"second source is the sink", func(o *Options) { o.JoinSource.Topic = "q8-out" }, "source auction's topic and query q8's sink are both topic q8-out"},
		{"a view's sink is the second source", func(o *Options) { o.ViewSinks["new_persons"] = endpoint(addrs, "auction") }, "source auction's topic and view new_persons's sink are both topic auction"},
		{"a side's state topic", func(o *Options) { o.Sink = endpoint(addrs, "q8-left-state") }, "query q8's sink is topic q8-left-state, an internal topic of q8-left"},
		{"another cluster", func(o *Options) { o.JoinSource.Config.Brokers = []string{"other:9092"} }, "must be on the cluster of the source"},
		{"no view sink", func(o *Options) { delete(o.ViewSinks, "new_sellers") }, "reads view new_sellers, which needs its own sink topic"},
		{"a shared sink", func(o *Options) { o.ViewSinks["new_sellers"] = endpoint(addrs, "np-out") }, "view new_persons's sink and view new_sellers's sink are both topic np-out"},
		{"a sink of no view", func(o *Options) { o.ViewSinks["other"] = endpoint(addrs, "x-out") }, "a sink for view other, which query q8 does not read"},
		{"a table", func(o *Options) { o.Table = endpoint(addrs, "t") }, "has no temporal join"},
	} {
		o := q8Options(q, addrs)
		c.edit(&o)
		_, err := New(o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
}

// TestRunKafkaViewJoinBounds crosses the bound of the rows a join of two
// views holds per partition (Options.JoinBuffer). The auction topic has
// a partition that gets no events (its idle timeout is a minute), so
// new_sellers' watermark stays back and every final row of new_persons
// waits in the join. The bound stops the pipeline with ErrViewJoinState
// and the reason, instead of aborting the same transaction forever.
func TestRunKafkaViewJoinBounds(t *testing.T) {
	t.Parallel()
	q := q8Query(t)
	persons, auctions := nexmark(t, "person", 12000, 9), nexmark(t, "auction", 9000, 9)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 1, nil)
	mkTopic(t, addrs, "auction", 2, nil)
	produceValues(t, addrs, "person", 1, persons, nil)
	produceValues(t, addrs, "auction", 1, auctions, nil) // partition 1 gets none
	o := q8Options(q, addrs)
	o.JoinBuffer, o.Logger = 50, testLogger(t)
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = pl.Run(ctx)
	const want = "holds more rows than it may: partition "
	if !errors.Is(err, ErrViewJoinState) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "more than 50 (Options.JoinBuffer)") ||
		!strings.Contains(err.Error(), "one view far behind the other") {
		t.Fatalf("run: %v\nwant ErrViewJoinState and %q", err, want)
	}
	t.Log(err)
}

// TestRunKafkaViewJoinLate: an event behind its source's watermark is
// late at its view (the view's name goes to OnViewLate, Stats.Late
// counts it) and changes no final; a moved second source is refused by
// its side's binding.
func TestRunKafkaViewJoinLate(t *testing.T) {
	t.Parallel()
	q := q8Query(t)
	persons, auctions := nexmark(t, "person", 6000, 10), nexmark(t, "auction", 18000, 10)
	want := q8InProcess(t, q, persons, auctions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 2, nil)
	mkTopic(t, addrs, "auction", 2, nil)
	produceValues(t, addrs, "person", 2, persons, nil)
	produceValues(t, addrs, "auction", 2, auctions, nil)
	var mu sync.Mutex
	var lateAt []string
	o := q8Options(q, addrs)
	o.UntilCaughtUp, o.Logger = true, testLogger(t)
	o.OnViewLate = func(name string, ev *drive.LateEvent) {
		mu.Lock()
		lateAt = append(lateAt, name+" "+string(ev.Event))
		mu.Unlock()
	}
	o.OnLate = func(ev *drive.LateEvent) { t.Errorf("late at the join: %s", ev.Event) }
	run := func(o Options) (Stats, error) {
		pl, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = pl.Run(ctx)
		return pl.Stats(), err
	}
	st, err := run(o)
	if err != nil || !st.CaughtUp || st.Late != 0 || len(lateAt) != 0 {
		t.Fatalf("first run: %v, stats %+v, late %q", err, st, lateAt)
	}
	compareQ8(t, addrs, want)
	// One person and one auction an hour behind, then caught up again.
	produceValues(t, addrs, "person", 2, [][]byte{[]byte(`{"id":1000,"name":"Late Person","email":"e","city":"c","state":"s","date_time":"2026-07-18 09:00:00.000"}`)}, nil)
	produceValues(t, addrs, "auction", 2, [][]byte{[]byte(`{"id":1,"item_name":"i","seller":1000,"category":1,"initial_bid":1,"reserve":1,"date_time":"2026-07-18 09:00:00.000","expires":"2026-07-18 09:10:00.000"}`)}, nil)
	st, err = run(o)
	if err != nil || !st.CaughtUp || st.Late != 2 || st.EventsIn != 2 {
		t.Fatalf("second run: %v, stats %+v", err, st)
	}
	if len(lateAt) != 2 || !strings.HasPrefix(lateAt[0]+lateAt[1], "new_") || !strings.Contains(lateAt[0]+lateAt[1], `new_persons {"id":1000,"name":"Late Person"`) ||
		!strings.Contains(lateAt[0]+lateAt[1], `new_sellers {"id":1,"item_name":"i"`) {
		t.Errorf("late events: %q", lateAt)
	}
	compareQ8(t, addrs, want)
	// The right view's state belongs to its source topic.
	mkTopic(t, addrs, "auction2", 2, nil)
	o.JoinSource.Topic = "auction2"
	if _, err := run(o); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "the source topic was auction, now auction2") {
		t.Errorf("a moved second source: %v", err)
	}
}

// envQ8Child makes the test binary a child running q8 over the brokers
// it names (TestRunKafkaViewJoinKill kills it).
const envQ8Child = "UBIK_KAFKA_Q8_CHILD"

func init() {
	brokers := os.Getenv(envQ8Child)
	if brokers == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	over := os.Getenv(envQ8Child+"_OVER") != ""     // the query over q8 (viewjoin_over_test.go)
	repart := os.Getenv(envQ8Child+"_REPART") != "" // a reader over q8m grouping by less (viewjoin_repart_test.go)
	if over || repart {
		text = append(text, q8OverSQL...)
	}
	if repart {
		text = append(text, q8RepartSQL...)
	}
	var shape *viewJoinShape // a shape of viewjoin_shapes_test.go
	for env, s := range viewJoinShapes {
		if os.Getenv(envQ8Child+env) != "" {
			text, shape = append(text, s.sql...), &s
		}
	}
	if shape != nil {
		text = shape.withDedup(text)
	}
	var prog *plan.Program
	if err == nil {
		prog, err = plan.Compile(string(text), plan.CompileOptions{OwnOutputs: shape != nil})
	}
	if err == nil {
		o := q8Options(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","))
		if over {
			o = q8OverOptions(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","))
		}
		if repart {
			o = q8RepartOptions(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","))
		}
		if shape != nil {
			o = shape.options(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","))
		}
		o.UntilCaughtUp = os.Getenv(envQ8Child+"_END") != ""
		o.CommitInterval = 20 * time.Millisecond
		var pl *Pipeline
		if pl, err = New(o); err == nil {
			err = pl.Run(ctx)
			st := pl.Stats()
			fmt.Printf("restored %d entries, late %d, caught up %v\n", st.RestoredEntries, st.Late, st.CaughtUp)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "q8 child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRunKafkaViewJoinKill: q8 in a child process, killed with SIGKILL
// at random points while both sources grow (either one ahead), restarted
// each time with the same instance id, then run until caught up: every
// topic's finals equal the in-process run's, one per key, no revision
// twice, nothing late, state restored. 3 person and 2 auction
// partitions: the join stage has 3.
func TestRunKafkaViewJoinKill(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	q := q8Query(t)
	persons, auctions := nexmark(t, "person", 8000, 11), nexmark(t, "auction", 24000, 11)
	want := q8InProcess(t, q, persons, auctions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 3, nil)
	mkTopic(t, addrs, "auction", 2, nil)
	child := func(end bool) *crashtest.Proc {
		env := []string{envQ8Child + "=" + strings.Join(addrs, ",")}
		if end {
			env = append(env, envQ8Child+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	const slices = 6
	for i := range slices {
		cmd := child(false)
		lo, hi := i*len(persons)/slices, (i+1)*len(persons)/slices
		alo, ahi := i*len(auctions)/slices, (i+1)*len(auctions)/slices
		first, second := func() { produceValues(t, addrs, "person", 3, persons[lo:hi], nil) }, func() { produceValues(t, addrs, "auction", 2, auctions[alo:ahi], nil) }
		if r.IntN(2) == 0 {
			first, second = second, first
		}
		first()
		time.Sleep(time.Duration(r.IntN(800)) * time.Millisecond)
		second()
		time.Sleep(time.Duration(200+r.IntN(2500)) * time.Millisecond)
		if i == slices-1 {
			// Under load a child can be killed before its first commit
			// every time; the last one is killed only after the join's
			// stage committed state, so the final run has a restore to make.
			waitCommittedRecord(t, addrs, q.Name+"-state", time.Minute)
		}
		killChild(t, cmd)
	}
	final := child(true)
	if err := final.Wait(t, 4*time.Minute); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out := final.Stdout()
	t.Logf("%d kills; final run: %s", slices, strings.TrimSpace(out))
	var restored, late int64
	var caught bool
	if _, err := fmt.Sscanf(out, "restored %d entries, late %d, caught up %v", &restored, &late, &caught); err != nil {
		t.Fatalf("final run's summary %q: %v", out, err)
	}
	if restored == 0 || late != 0 || !caught {
		t.Errorf("final run: restored %d entries (want some), late %d (want 0), caught up %v", restored, late, caught)
	}
	compareQ8(t, addrs, want)
}

// TestRunKafkaViewJoinReset: ResetState starts the join and both sides
// over (their groups and internal topics deleted, the input read again),
// into new sink topics with the same finals.
func TestRunKafkaViewJoinReset(t *testing.T) {
	t.Parallel()
	q := q8Query(t)
	persons, auctions := nexmark(t, "person", 6000, 10), nexmark(t, "auction", 18000, 10)
	want := q8InProcess(t, q, persons, auctions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 2, nil)
	mkTopic(t, addrs, "auction", 3, nil)
	produceValues(t, addrs, "person", 2, persons, nil)
	produceValues(t, addrs, "auction", 3, auctions, nil)
	run := func(o Options) Stats {
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
	o := q8Options(q, addrs)
	o.UntilCaughtUp, o.Logger = true, testLogger(t)
	if st := run(o); !st.CaughtUp || st.EventsIn != int64(len(persons)+len(auctions)) {
		t.Fatalf("first run: %+v", st)
	}
	compareQ8(t, addrs, want)
	if st := run(o); !st.CaughtUp || st.EventsIn != 0 {
		t.Fatalf("a second run consumes nothing new: %+v", st)
	}
	o.ResetState = true
	o.Sink.Topic = "q8-out2"
	o.ViewSinks = map[string]Endpoint{"new_persons": endpoint(addrs, "np-out2"), "new_sellers": endpoint(addrs, "ns-out2")}
	if st := run(o); !st.CaughtUp || st.EventsIn != int64(len(persons)+len(auctions)) || st.RestoredEntries != 0 {
		t.Fatalf("reset run: %+v", st)
	}
	for name, topic := range map[string]string{"q8": "q8-out2", "new_persons": "np-out2", "new_sellers": "ns-out2"} {
		compareFinals(t, readFinals(t, addrs, topic), want[name])
	}
}
