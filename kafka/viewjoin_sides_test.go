package kafka

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A join of two views whose sides' chains are cut by a view repartition:
// each side's reader groups by less than the view it reads (the person
// without the name, the seller without the category), so its rows are
// moved between partitions before its aggregate. Each side runs as a
// chain of its own (segments), its last segment forwarding the side's
// rows to the join's repartition topic.

// q8SidesSQL joins, per person and 10-second window, the person's
// versions (whatever the name) with the seller's auctions (whatever the
// category).
const q8SidesSQL = `
CREATE VIEW np_id AS SELECT id, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, sum(versions) AS versions
FROM new_persons GROUP BY id, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns_cat AS SELECT seller, category, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM auction GROUP BY seller, category, TUMBLE(date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns_id AS SELECT seller, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, sum(auctions) AS auctions
FROM ns_cat GROUP BY seller, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8c AS SELECT p.id, TUMBLE_START(p.window_start, INTERVAL '10' SECOND) AS window_start, max(p.versions) AS versions, max(a.auctions) AS auctions
FROM np_id p JOIN ns_id a ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY p.id, TUMBLE(p.window_start, INTERVAL '10' SECOND) EMIT FINAL;`

// q8SidesTopics maps each query of q8SidesSQL's graph to its topic.
var q8SidesTopics = map[string]string{"q8c": "q8c-out", "np_id": "npi-out", "new_persons": "np-out", "ns_id": "nsi-out", "ns_cat": "nsc-out"}

// q8SidesQuery compiles q8 and q8SidesSQL, returning q8c.
func q8SidesQuery(t testing.TB) *plan.Query {
	t.Helper()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := plan.Compile(string(text)+q8SidesSQL, plan.CompileOptions{OwnOutputs: true}) // q8 and q8c, each to its topic
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

// q8SidesOptions runs q8c into q8c-out, the views into their topics.
func q8SidesOptions(q *plan.Query, addrs []string) Options {
	o := q8Options(q, addrs)
	o.Sink, o.InstanceID = endpoint(addrs, "q8c-out"), "q8c-1"
	o.ViewSinks = map[string]Endpoint{}
	for name, topic := range q8SidesTopics {
		if name != "q8c" {
			o.ViewSinks[name] = endpoint(addrs, topic)
		}
	}
	return o
}

// TestRunKafkaViewJoinSidesCut: both sides of the join cut by a view
// repartition, at 1 and several partitions of each source and of the
// join stage: every topic's finals equal the in-process graph's.
func TestRunKafkaViewJoinSidesCut(t *testing.T) {
	q := q8SidesQuery(t)
	if err := CheckQuery(q); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*plan.Query{q.IJoin.Left.View, q.IJoin.Right.View} {
		if segs, err := segmentsOf(v, v.Upstream()); err != nil || len(segs) != 2 {
			t.Fatalf("side %s: segments %v, %v: the test needs a side cut once", v.Name, segs, err)
		}
	}
	persons, auctions := nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8)
	want := graphFinals(t, q, persons, auctions)
	for name := range q8SidesTopics {
		if len(want[name]) < 20 {
			t.Fatalf("in process: %d %s rows: the data must reach every query", len(want[name]), name)
		}
	}
	for _, c := range []struct{ person, auction, rep int }{{1, 1, 0}, {3, 2, 0}, {2, 3, 4}} {
		t.Run(fmt.Sprintf("person%d-auction%d-rep%d", c.person, c.auction, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "person", c.person, nil)
			mkTopic(t, addrs, "auction", c.auction, nil)
			produceValues(t, addrs, "person", c.person, persons, nil)
			produceValues(t, addrs, "auction", c.auction, auctions, nil)
			o := q8SidesOptions(q, addrs)
			o.RepartitionPartitions = c.rep
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
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
			if !st.CaughtUp || st.Late != 0 || st.EventsIn != int64(len(persons)+len(auctions)) || st.Malformed != 0 {
				t.Errorf("stats %+v", st)
			}
			for name, topic := range q8SidesTopics {
				got := readFinals(t, addrs, topic)
				if len(got) != len(want[name]) {
					t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
				}
				compareFinals(t, got, want[name])
			}
		})
	}
}

// TestRunKafkaViewJoinSidesCutKill: q8c in a child process, killed with
// SIGKILL at random points while both sources grow, restarted with the
// same instance id, then run until caught up: every topic's finals equal
// the in-process run's, the state (the sides' segments' among it)
// restored.
func TestRunKafkaViewJoinSidesCutKill(t *testing.T) {
	q8KillOver(t, q8SidesQuery(t), "_SIDES", q8SidesTopics)
}
