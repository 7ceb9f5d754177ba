package kafka

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// fanOutShape joins two views of one deduplicated source: new_sellers,
// grouped by the join key, runs in the join's segment; ns_top reads
// ns_cat, grouped by more than the join key, a side. The source's one
// dedup stage feeds both exchanges, each survivor decoded once and
// placed on each as its reader needs.
const fanOutShape = `
CREATE VIEW ns_cat AS SELECT seller, category, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM auction GROUP BY seller, category, TUMBLE(date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns_top AS SELECT seller, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, max(auctions) AS top
FROM ns_cat GROUP BY seller, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8f AS SELECT x.seller, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, max(x.auctions) AS auctions, max(y.top) AS top
FROM new_sellers x JOIN ns_top y ON x.seller = y.seller AND x.window_start = y.window_start
GROUP BY x.seller, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`

// TestRunKafkaDedupFanOut: a deduplicated source that a join of two
// views reads through two exchanges, with copies of every seventh
// auction next to it: every topic's finals equal the in-process graph's
// at 1 and several partitions, and each event is counted once.
func TestRunKafkaDedupFanOut(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Replace(string(text), "path = 'auction.jsonl')", "path = 'auction.jsonl', dedup_key = 'id', dedup_within = '1 hour')", 1)
	prog, err := plan.Compile(script+fanOutShape, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[len(prog.Queries)-1]
	var auctions [][]byte
	for i, a := range nexmark(t, "auction", 24000, 8) {
		auctions = append(auctions, a)
		if i%7 == 0 {
			auctions = append(auctions, a)
		}
	}
	want := graphFinals(t, q, auctions, nil)
	topics := map[string]string{"q8f": "q8f-out", "new_sellers": "ns-out", "ns_cat": "nsc-out", "ns_top": "nst-out"}
	for name := range topics {
		if len(want[name]) < 3 {
			t.Fatalf("in process: %d %s rows: the data must reach every query", len(want[name]), name)
		}
	}
	for _, c := range []struct{ parts, rep int }{{1, 0}, {3, 4}} {
		t.Run(fmt.Sprintf("auction%d-rep%d", c.parts, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "auction", c.parts, nil)
			produceValues(t, addrs, "auction", c.parts, auctions, nil)
			o := Options{Query: q, Source: endpoint(addrs, "auction"), Sink: endpoint(addrs, topics["q8f"]), InstanceID: "q8f-1",
				ViewSinks: map[string]Endpoint{}, RepartitionPartitions: c.rep, UntilCaughtUp: true, Logger: testLogger(t)}
			for name, topic := range topics {
				if name != q.Name {
					o.ViewSinks[name] = endpoint(addrs, topic)
				}
			}
			runFinals(t, o, topics, want, len(auctions))
		})
	}
}
