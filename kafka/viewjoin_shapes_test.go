package kafka

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Joins of two views whose sides are any query Kafka runs, each side a
// pipeline of its own (viewjoinsides.go), over bench/gen's person and
// auction streams, against the in-process graph of the same script.

// viewJoinShape is a script over bench/queries/q8.sql: its last query
// and the topic of each query of its graph.
type viewJoinShape struct {
	name, sql string
	topics    map[string]string
}

// viewJoinShapes are the shapes, by the suffix of the child's
// environment variable (envQ8Child) that selects one.
var viewJoinShapes = map[string]viewJoinShape{
	// Both sides' chains cut by a view repartition: each side's reader
	// groups by less than the view it reads (the person without the
	// name, the seller without the category).
	"_SIDES": {"sides cut", `
CREATE VIEW np_id AS SELECT id, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, sum(versions) AS versions
FROM new_persons GROUP BY id, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns_cat AS SELECT seller, category, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM auction GROUP BY seller, category, TUMBLE(date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns_id AS SELECT seller, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, sum(auctions) AS auctions
FROM ns_cat GROUP BY seller, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8c AS SELECT p.id, TUMBLE_START(p.window_start, INTERVAL '10' SECOND) AS window_start, max(p.versions) AS versions, max(a.auctions) AS auctions
FROM np_id p JOIN ns_id a ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY p.id, TUMBLE(p.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8c": "q8c-out", "np_id": "npi-out", "new_persons": "np-out", "ns_id": "nsi-out", "ns_cat": "nsc-out"}},
	// A join of two views whose left side is itself a join of two views
	// (q8), its right side a view that q8 reads too (new_sellers: both
	// sides compute it, the left publishes it).
	"_NESTED": {"join over a join", `
CREATE VIEW q8s AS SELECT x.id, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, max(y.auctions) AS auctions
FROM q8 x JOIN new_sellers y ON x.id = y.seller AND x.window_start = y.window_start
GROUP BY x.id, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8s": "q8s-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}},
	// A join of two views whose left side is an interval join of the two
	// streams (a person's auctions within 10 seconds of their entry),
	// its right side a view over one of them.
	"_IJSIDE": {"a side joining two streams", `
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM person p JOIN auction a ON a.seller = p.id AND a.date_time BETWEEN p.date_time AND p.date_time + INTERVAL '10' SECOND
GROUP BY p.id, TUMBLE(a.date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8p AS SELECT x.id, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, max(x.auctions) AS auctions, max(y.versions) AS versions
FROM pa x JOIN new_persons y ON x.id = y.id AND x.window_start = y.window_start
GROUP BY x.id, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8p": "q8p-out", "pa": "pa-out", "new_persons": "np-out"}},
	// A join of two views grouped by its window alone, none of its
	// equality columns: the views' rows meet by every equality, and the
	// joined rows reach the join's aggregate through a repartition by its
	// GROUP BY; a reader by the count of persons follows, after a view
	// repartition.
	"_BYNONE": {"grouped by none of the join's columns", `
CREATE VIEW q8n AS SELECT TUMBLE_START(p.window_start, INTERVAL '10' SECOND) AS window_start, count(*) AS persons, sum(a.auctions) AS auctions
FROM new_persons p JOIN new_sellers a ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY TUMBLE(p.window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8nm AS SELECT persons, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS w, count(*) AS n, max(auctions) AS auctions
FROM q8n GROUP BY persons, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8nm": "q8nm-out", "q8n": "q8n-out", "new_persons": "np-out", "new_sellers": "ns-out"}},
}

// viewJoinShapeOrder is the order the tests run the shapes in.
var viewJoinShapeOrder = []string{"_SIDES", "_NESTED", "_IJSIDE", "_BYNONE"}

// compile compiles q8 and the shape's script (each query to its own
// topic), returning the shape's last query.
func (s viewJoinShape) compile() (*plan.Query, error) {
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		return nil, err
	}
	prog, err := plan.Compile(string(text)+s.sql, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		return nil, err
	}
	return prog.Queries[len(prog.Queries)-1], nil
}

// options runs q into its topic, the views into theirs, from topics
// person and auction.
func (s viewJoinShape) options(q *plan.Query, addrs []string) Options {
	o := q8Options(q, addrs)
	o.Sink, o.InstanceID = endpoint(addrs, s.topics[q.Name]), q.Name+"-1"
	o.ViewSinks = map[string]Endpoint{}
	for name, topic := range s.topics {
		if name != q.Name {
			o.ViewSinks[name] = endpoint(addrs, topic)
		}
	}
	return o
}

// TestRunKafkaViewJoinShapes: each shape at 1 and several partitions of
// each source and of the join stage: every topic's finals equal the
// in-process graph's.
func TestRunKafkaViewJoinShapes(t *testing.T) {
	t.Parallel()
	persons, auctions := nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8)
	for _, env := range viewJoinShapeOrder {
		s := viewJoinShapes[env]
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each on a cluster of its own; the runs mostly wait on their commit intervals
			q, err := s.compile()
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckQuery(q); err != nil {
				t.Fatal(err)
			}
			want := graphFinals(t, q, persons, auctions)
			for name := range s.topics {
				if len(want[name]) < 3 {
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
					o := s.options(q, addrs)
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
					if st := pl.Stats(); !st.CaughtUp || st.Late != 0 || st.Malformed != 0 {
						t.Errorf("stats %+v", st)
					}
					for name, topic := range s.topics {
						got := readFinals(t, addrs, topic)
						if len(got) != len(want[name]) {
							t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
						}
						compareFinals(t, got, want[name])
					}
				})
			}
		})
	}
}

// TestRunKafkaViewJoinShapesKill: each shape in a child process, killed
// with SIGKILL at random points while both sources grow, restarted with
// the same instance id, then run until caught up: every topic's finals
// equal the in-process run's, the state (every side's stages' among it)
// restored.
func TestRunKafkaViewJoinShapesKill(t *testing.T) {
	t.Parallel()
	for _, env := range viewJoinShapeOrder {
		s := viewJoinShapes[env]
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			q, err := s.compile()
			if err != nil {
				t.Fatal(err)
			}
			q8KillOver(t, q, env, s.topics)
		})
	}
}
