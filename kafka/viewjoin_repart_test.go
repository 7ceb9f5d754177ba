package kafka

import (
	"fmt"
	"os"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a join of two views that groups by less than the join's
// partition column: the join stage runs the join and the queries above
// it that keep its partitioning; the first reader that groups by less
// reads their rows through a view repartition, in a segment of its own.

// q8RepartSQL reads q8m (viewjoin_over_test.go) by the name and a
// minute: less than q8m's partitioning (the person).
const q8RepartSQL = `
CREATE VIEW q8w AS SELECT name, TUMBLE_START(minute, INTERVAL '1' MINUTE) AS m, sum(windows) AS windows, count(*) AS persons
FROM q8m GROUP BY name, TUMBLE(minute, INTERVAL '1' MINUTE) EMIT FINAL;`

// q8RepartTopics maps each query of q8RepartSQL's chain to its topic.
var q8RepartTopics = map[string]string{"q8w": "q8w-out", "q8m": "q8m-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}

// q8RepartOptions runs q8w into q8w-out, the views into their topics.
func q8RepartOptions(q *plan.Query, addrs []string) Options {
	o := q8Options(q, addrs)
	o.Sink, o.InstanceID = endpoint(addrs, "q8w-out"), "q8w-1"
	for name, topic := range q8RepartTopics {
		if name != "q8w" {
			o.ViewSinks[name] = endpoint(addrs, topic)
		}
	}
	return o
}

// TestRunKafkaViewJoinRepartitionKill: q8w in a child process, killed
// with SIGKILL at random points while both sources grow, restarted with
// the same instance id, then run until caught up: every topic's finals
// (the view repartition's reader's among them) equal the in-process
// run's, the state restored.
func TestRunKafkaViewJoinRepartitionKill(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := plan.Compile(string(text)+q8OverSQL+q8RepartSQL, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q8KillOver(t, prog.Queries[len(prog.Queries)-1], "_REPART", q8RepartTopics, nil)
}

// TestRunKafkaViewJoinRepartition: readers of q8 grouping by less than
// the person: by the window alone right over q8 (the cut at the join) and by the name and a minute over q8m (the cut after
// a view that keeps the join's partitioning), at 1 and several
// partitions: every topic's finals equal the in-process graph's.
func TestRunKafkaViewJoinRepartition(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	persons, auctions := nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8)
	for _, v := range []struct {
		name, sql string
		topics    map[string]string
	}{
		{"at the join", `
CREATE VIEW q8w AS SELECT TUMBLE_START(window_start, INTERVAL '10' SECOND) AS w, count(*) AS persons
FROM q8 GROUP BY TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
			map[string]string{"q8w": "q8w-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}},
		{"after a view", q8OverSQL + q8RepartSQL, q8RepartTopics},
	} {
		t.Run(v.name, func(t *testing.T) {
			q := lastQuery(t, string(text)+v.sql)
			if err := CheckQuery(q); err != nil {
				t.Fatal(err)
			}
			want := q8InProcess(t, q, persons, auctions)
			if len(want["q8w"]) < 3 {
				t.Fatalf("in process: %d q8w rows: the data must reach the reader", len(want["q8w"]))
			}
			for _, c := range []struct{ person, auction, rep int }{{1, 1, 0}, {3, 2, 0}, {2, 3, 4}} {
				t.Run(fmt.Sprintf("person%d-auction%d-rep%d", c.person, c.auction, c.rep), func(t *testing.T) {
					addrs := cluster(t).ListenAddrs()
					mkTopic(t, addrs, "person", c.person, nil)
					mkTopic(t, addrs, "auction", c.auction, nil)
					produceValues(t, addrs, "person", c.person, persons, nil)
					produceValues(t, addrs, "auction", c.auction, auctions, nil)
					o := q8Options(q, addrs)
					o.Sink, o.InstanceID = endpoint(addrs, "q8w-out"), "q8w-1"
					for name, topic := range v.topics {
						if name != "q8w" {
							o.ViewSinks[name] = endpoint(addrs, topic)
						}
					}
					o.RepartitionPartitions = c.rep
					o.UntilCaughtUp = true
					o.Logger = testLogger(t)
					runFinals(t, o, v.topics, want, len(persons)+len(auctions))
				})
			}
		})
	}
}
