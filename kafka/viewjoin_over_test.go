package kafka

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a join of two views over Kafka: q8 (bench/queries/q8.sql,
// a window join of two EMIT FINAL views) read by a query grouped by the
// person and a minute's TUMBLE over q8's window start. The join stage
// runs, per partition, a graph whose root is the join: q8's final rows
// go to the query over it inside the partition, each publishing its own
// changelog.

// q8OverSQL is the query over q8: per person and minute, the windows in
// which they were new and opened an auction.
const q8OverSQL = `
CREATE VIEW q8m AS SELECT id, TUMBLE_START(window_start, INTERVAL '1' MINUTE) AS minute, count(*) AS windows, max(name) AS name
FROM q8 GROUP BY id, TUMBLE(window_start, INTERVAL '1' MINUTE) EMIT FINAL;`

// q8OverTopics maps each query's name to its topic.
var q8OverTopics = map[string]string{"q8m": "q8m-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}

// q8OverQuery compiles q8 and the query over it, returning q8m.
func q8OverQuery(t testing.TB) *plan.Query {
	t.Helper()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := plan.Compile(string(text)+q8OverSQL, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

// q8OverOptions runs q8m from topics person and auction: q8m into
// q8m-out, q8 and the views into their own topics.
func q8OverOptions(q *plan.Query, addrs []string) Options {
	o := q8Options(q, addrs)
	o.Sink, o.InstanceID = endpoint(addrs, "q8m-out"), "q8m-1"
	o.ViewSinks["q8"] = endpoint(addrs, "q8-out")
	return o
}

// compareOver reads every query's topic and compares its finals with
// the in-process run's.
func compareOver(t testing.TB, addrs []string, want map[string]map[string]string) {
	t.Helper()
	for name, topic := range q8OverTopics {
		got := readFinals(t, addrs, topic)
		if len(got) != len(want[name]) {
			t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
		}
		compareFinals(t, got, want[name])
	}
}

// TestRunKafkaViewJoinOver: the query over q8 at 1 and several
// partitions of each source and of the join stage: every topic's finals
// equal the in-process graph's (which TestViewJoinOverOracle holds to a
// batch computation), one per key.
func TestRunKafkaViewJoinOver(t *testing.T) {
	t.Parallel()
	q := q8OverQuery(t)
	persons, auctions := nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8)
	want := q8InProcess(t, q, persons, auctions)
	if len(want["q8m"]) < 20 {
		t.Fatalf("in process: %d q8m rows: the data must reach the query over the join", len(want["q8m"]))
	}
	t.Logf("in process: %d q8 rows, %d q8m rows", len(want["q8"]), len(want["q8m"]))
	for _, c := range []struct{ person, auction, rep int }{{1, 1, 0}, {3, 2, 0}, {2, 3, 4}} {
		t.Run(fmt.Sprintf("person%d-auction%d-rep%d", c.person, c.auction, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "person", c.person, nil)
			mkTopic(t, addrs, "auction", c.auction, nil)
			produceValues(t, addrs, "person", c.person, persons, nil)
			produceValues(t, addrs, "auction", c.auction, auctions, nil)
			o := q8OverOptions(q, addrs)
			o.RepartitionPartitions = c.rep
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			st := runToEnd(t, o, 3*time.Minute)
			if !st.CaughtUp || st.Late != 0 || st.EventsIn != int64(len(persons)+len(auctions)) || st.Malformed != 0 {
				t.Errorf("stats %+v", st)
			}
			compareOver(t, addrs, want)
		})
	}
}

// TestRunKafkaViewJoinOverKill: the query over q8 in a child process,
// killed with SIGKILL at random points while both sources grow, restarted
// with the same instance id, then run until caught up: every topic's
// finals equal the in-process run's, the state restored from the state
// topic.
func TestRunKafkaViewJoinOverKill(t *testing.T) {
	t.Parallel()
	q8KillOver(t, q8OverQuery(t), "_OVER", q8OverTopics, nil)
}

// q8KillOver kills and restarts a child running q (env selects its
// query in the child) over the persons and auctions (with copies, if
// set: a shape's deduplicated sources'), then compares every topic of
// topics.
func q8KillOver(t *testing.T, q *plan.Query, env string, topics map[string]string, copies func(persons, auctions [][]byte) ([][]byte, [][]byte)) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	persons, auctions := nexmark(t, "person", 8000, 11), nexmark(t, "auction", 24000, 11)
	if copies != nil {
		persons, auctions = copies(persons, auctions)
	}
	want := graphFinals(t, q, persons, auctions)
	for name := range topics {
		if len(want[name]) == 0 {
			t.Fatalf("in process: no %s rows: the data must reach every query", name)
		}
	}
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 3, nil)
	mkTopic(t, addrs, "auction", 2, nil)
	child := func(end bool) *crashtest.Proc {
		env := []string{envQ8Child + "=" + strings.Join(addrs, ","), envQ8Child + env + "=1"}
		if end {
			env = append(env, envQ8Child+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	const slices = 5
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
	for name, topic := range topics {
		got := readFinals(t, addrs, topic)
		if len(got) != len(want[name]) {
			t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
		}
		compareFinals(t, got, want[name])
	}
}

// TestCheckQueryOverViewJoin: over Kafka a query over a join of two views
// runs whether or not its chain groups by the join's partition columns
// (grouping by less, behind a view repartition), and so does a join whose
// side is a join of views; a side is refused as a query of its own is.
func TestCheckQueryOverViewJoin(t *testing.T) {
	const src = `CREATE SOURCE ps (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW np AS SELECT id, name, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v FROM ps GROUP BY id, name, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS a FROM au GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT p.id, p.name, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS w, count(*) AS n FROM np p JOIN ns a ON p.id = a.seller AND p.ws = a.ws GROUP BY p.id, p.name, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;
`
	for _, c := range []struct{ name, sql, want string }{
		{"by the person", `SELECT id, count(*) AS n FROM j GROUP BY id;`, ""},
		{"by the person and a minute", `SELECT id, TUMBLE_START(w, INTERVAL '1' MINUTE) AS m, sum(n) AS n FROM j GROUP BY id, TUMBLE(w, INTERVAL '1' MINUTE) EMIT FINAL;`, ""},
		{"through a view", `CREATE VIEW m AS SELECT id, name, TUMBLE_START(w, INTERVAL '1' MINUTE) AS m, sum(n) AS n FROM j GROUP BY id, name, TUMBLE(w, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT id, count(*) AS c FROM m GROUP BY id;`, ""},
		// Grouping by less: a view repartition before the reader.
		{"by the name", `SELECT name, count(*) AS n FROM j GROUP BY name;`, ""},
		{"by an expression", `SELECT id + 1 AS i, count(*) AS n FROM j GROUP BY id + 1;`, ""},
		{"by a window alone", `CREATE VIEW m AS SELECT TUMBLE_START(w, INTERVAL '1' MINUTE) AS m, sum(n) AS n FROM j GROUP BY TUMBLE(w, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT count(*) AS c FROM m;`, ""},
		// A side that is a join of views runs as one (viewjoin_shapes_test.go).
		{"a join over a join", `CREATE VIEW jj AS SELECT x.id, TUMBLE_START(x.w, INTERVAL '10' SECOND) AS w, count(*) AS c FROM j x JOIN ns y ON x.id = y.seller AND x.w = y.ws GROUP BY x.id, TUMBLE(x.w, INTERVAL '10' SECOND) EMIT FINAL;`, ""},
		{"a side refused", `CREATE VIEW jn AS SELECT p.id, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS w, count(*) AS c FROM np p JOIN au a ON p.id = a.seller AND a.ts BETWEEN p.ws AND p.ws + INTERVAL '10' SECOND GROUP BY p.id, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jj AS SELECT x.id, TUMBLE_START(x.w, INTERVAL '10' SECOND) AS w, count(*) AS c FROM j x JOIN jn y ON x.id = y.id AND x.w = y.w GROUP BY x.id, TUMBLE(x.w, INTERVAL '10' SECOND) EMIT FINAL;`,
			"query jn joins np and au: an interval join in a graph joins two views, or two declared streams; join the stream's own windowed EMIT FINAL view instead (in a file run too)"},
		{"a table", `CREATE TABLE t (k BIGINT, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE VIEW pt AS SELECT ps.id, TUMBLE_START(ps.ts, INTERVAL '10' SECOND) AS ws, sum(t.p) AS p FROM ps JOIN t FOR SYSTEM_TIME AS OF ps.ts ON ps.id = t.k GROUP BY ps.id, TUMBLE(ps.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jj AS SELECT x.id, TUMBLE_START(x.w, INTERVAL '10' SECOND) AS w, count(*) AS c FROM j x JOIN pt y ON x.id = y.id AND x.w = y.ws GROUP BY x.id, TUMBLE(x.w, INTERVAL '10' SECOND) EMIT FINAL;`,
			"query pt reads ps, a third source (the graph reads ps and au); a graph reads at most two inputs"},
		{"three streams", `CREATE SOURCE bi (bidder BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW nb AS SELECT bidder, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS b FROM bi GROUP BY bidder, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jj AS SELECT x.id, TUMBLE_START(x.w, INTERVAL '10' SECOND) AS w, count(*) AS c FROM j x JOIN nb y ON x.id = y.bidder AND x.w = y.ws GROUP BY x.id, TUMBLE(x.w, INTERVAL '10' SECOND) EMIT FINAL;`,
			"query nb reads bi, a third source (the graph reads ps and au); a graph reads at most two inputs"},
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
}
