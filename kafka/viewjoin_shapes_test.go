package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
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
var viewJoinShapes = withDedupShapes(map[string]viewJoinShape{
	// A join of q8 with new_persons on the name: q8's rows and
	// new_persons' are placed by the name, so q8 (itself a join of two
	// views) and new_persons are sides; new_persons, which q8 reads too,
	// is computed once and sent to both joins.
	"_APART": {"a view two joins read", `
CREATE VIEW q8n2 AS SELECT x.name, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, count(*) AS n, sum(y.versions) AS versions
FROM q8 x JOIN new_persons y ON x.name = y.name AND x.window_start = y.window_start
GROUP BY x.name, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8n2": "q8n2-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}},
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
	// Both views grouped by the join's key, each over its own source:
	// the join stage computes both from their sources' events, the
	// second source routed by Q-tbl as the graph's second input.
	"_BYKEY": {"both views in the join's segment", `
CREATE VIEW np_key AS SELECT id, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS versions
FROM person GROUP BY id, TUMBLE(date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8k AS SELECT p.id, TUMBLE_START(p.window_start, INTERVAL '10' SECOND) AS window_start, max(p.versions) AS versions, max(a.auctions) AS auctions
FROM np_key p JOIN new_sellers a ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY p.id, TUMBLE(p.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8k": "q8k-out", "np_key": "npk-out", "new_sellers": "ns-out"}},
	// The same, the auctions' view on the join's left: the graph's and
	// the stages' second input is the persons' view's source.
	"_BYKEYSWAP": {"both views in the join's segment, swapped", `
CREATE VIEW np_key AS SELECT id, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS versions
FROM person GROUP BY id, TUMBLE(date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8w AS SELECT a.seller, TUMBLE_START(a.window_start, INTERVAL '10' SECOND) AS window_start, max(p.versions) AS versions, max(a.auctions) AS auctions
FROM new_sellers a JOIN np_key p ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY a.seller, TUMBLE(a.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8w": "q8w-out", "np_key": "npk-out", "new_sellers": "ns-out"}},
})

// withDedupShapes adds to shapes some of them over deduplicated
// sources: both views in the join's segment, over the second source (the
// auctions; in the swapped shape the persons) or both (the join stage's
// second input comes through that source's dedup stage); and a join over
// a join, whose two joins read the auctions through one dedup stage.
func withDedupShapes(shapes map[string]viewJoinShape) map[string]viewJoinShape {
	for env, d := range map[string]struct {
		of   string
		srcs []string
	}{
		"_DEDUP2":     {"_BYKEY", []string{"auction"}},
		"_DEDUP2SWAP": {"_BYKEYSWAP", []string{"person"}},
		"_DEDUPBOTH":  {"_BYKEY", []string{"person", "auction"}},
		"_NESTEDDA":   {"_NESTED", []string{"auction"}},
	} {
		s := shapes[d.of]
		s.name += ", deduplicating " + strings.Join(d.srcs, " and ")
		shapes[env], shapeDedup[s.name] = s, d.srcs
	}
	return shapes
}

// shapeDedup are the sources a shape (by name) gives a dedup key: their
// id, within an hour. Each such source's events come with copies
// (withCopies).
var shapeDedup = map[string][]string{}

// withDedup is script text (q8's and a shape's) with s's deduplicated
// sources given their dedup key.
func (s viewJoinShape) withDedup(text []byte) []byte {
	for _, src := range shapeDedup[s.name] {
		path := "path = '" + src + ".jsonl'"
		text = bytes.Replace(text, []byte(path+")"), []byte(path+", dedup_key = 'id', dedup_within = '1 hour')"), 1)
	}
	return text
}

// withCopies are the person and auction events with, for each source s
// deduplicates, a copy of every seventh event: next to it, and of every
// 49th a hundred events later, in another poll and partition. A
// deduplicated person stream loses its later versions of a person (a
// dedup by the id keeps the one it sees first, which over several
// partitions is any of them): the copies are the only events of one id.
func (s viewJoinShape) withCopies(persons, auctions [][]byte) ([][]byte, [][]byte) {
	copies := func(evs [][]byte) [][]byte {
		var out [][]byte
		for i, e := range evs {
			out = append(out, e)
			if i%7 == 0 {
				out = append(out, e)
			}
			if i >= 100 && (i-100)%49 == 0 {
				out = append(out, evs[i-100])
			}
		}
		return out
	}
	for _, src := range shapeDedup[s.name] {
		if src == "person" {
			persons = copies(firstVersions(persons))
		} else {
			auctions = copies(auctions)
		}
	}
	return persons, auctions
}

// firstVersions are the persons without their later versions.
func firstVersions(persons [][]byte) [][]byte {
	var out [][]byte
	seen := map[int64]bool{}
	for _, p := range persons {
		var v struct{ ID int64 }
		if err := json.Unmarshal(p, &v); err != nil {
			panic(err) // bench/gen's output
		}
		if !seen[v.ID] {
			seen[v.ID] = true
			out = append(out, p)
		}
	}
	return out
}

// viewJoinShapeOrder is the order the tests run the shapes in.
var viewJoinShapeOrder = []string{"_SIDES", "_NESTED", "_IJSIDE", "_BYNONE", "_APART", "_BYKEY", "_BYKEYSWAP", "_DEDUP2", "_DEDUP2SWAP", "_DEDUPBOTH", "_NESTEDDA"}

// compile compiles q8 and the shape's script (each query to its own
// topic), returning the shape's last query.
func (s viewJoinShape) compile() (*plan.Query, error) {
	text, err := os.ReadFile("../bench/queries/q8.sql")
	if err != nil {
		return nil, err
	}
	prog, err := plan.Compile(string(s.withDedup(append(text, s.sql...))), plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		return nil, err
	}
	return prog.Queries[len(prog.Queries)-1], nil
}

// options runs q into its topic, the views into theirs, from topics
// person and auction.
func (s viewJoinShape) options(q *plan.Query, addrs []string) Options {
	o := q8Options(q, addrs)
	if streams, _ := inputsOf(q); streams[0].Name == "auction" {
		o.Source, o.JoinSource = o.JoinSource, o.Source // the query's first stream is the auctions
	}
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
	for _, env := range viewJoinShapeOrder {
		s := viewJoinShapes[env]
		persons, auctions := s.withCopies(nexmark(t, "person", 12000, 8), nexmark(t, "auction", 36000, 8))
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
					// Each source is read, and its events counted, once,
					// whichever stage of a side reads it.
					st := runFinals(t, o, s.topics, want, len(persons)+len(auctions))
					if dd := len(shapeDedup[s.name]) > 0; dd != (st.Duplicates > 0) {
						t.Errorf("%d duplicates dropped: want some exactly when a source is deduplicated (%v)", st.Duplicates, dd)
					}
				})
			}
		})
	}
}

// runFinals runs o until caught up and returns its stats: it must count
// events events, none late or malformed, and every topic's finals must
// equal want's.
func runFinals(t *testing.T, o Options, topics map[string]string, want map[string]map[string]string, events int) Stats {
	t.Helper()
	st := runToEnd(t, o, 3*time.Minute)
	if !st.CaughtUp || st.Late != 0 || st.Malformed != 0 || st.EventsIn != int64(events) {
		t.Errorf("stats %+v: want %d events", st, events)
	}
	addrs := o.Source.Config.Brokers
	for name, topic := range topics {
		got := readFinals(t, addrs, topic)
		if len(got) != len(want[name]) {
			t.Errorf("%s: %d finals, in process %d", name, len(got), len(want[name]))
		}
		compareFinals(t, got, want[name])
	}
	return st
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
			q8KillOver(t, q, env, s.topics, s.withCopies)
		})
	}
}

// reported is what a run reports of the events it does not apply: each
// late event as the query that met it and the event, sorted, and the
// counters of the input.
type reported struct {
	late                     []string
	events, malformed, lateN int64
}

// graphReported runs q's graph in process over the person and auction
// streams, interleaved as graphFinals does, then over the person and
// auction records of tail: what it reports (ubik run over files runs
// this graph).
func graphReported(t testing.TB, q *plan.Query, persons, auctions [][]byte, tail [2][][]byte) reported {
	t.Helper()
	var r reported
	cfg := drive.Config{Emit: func(*changelog.Record) error { return nil },
		Late:      func(ev *drive.LateEvent) { r.late = append(r.late, q.Name+" "+string(ev.Event)) },
		LateTable: func(ev *drive.LateEvent) { r.late = append(r.late, q.Name+" "+string(ev.Event)) }}
	g, err := drive.NewGraph(q, nil, cfg, nil, func(name string, ev *drive.LateEvent) { r.late = append(r.late, name+" "+string(ev.Event)) })
	if err != nil {
		t.Fatal(err)
	}
	push := func(f func([]byte) error, vs [][]byte) {
		for _, v := range vs {
			var ee *drive.EventError
			if err := f(v); err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
		}
	}
	for i, j := 0, 0; i < len(persons) || j < len(auctions); i, j = i+300, j+900 {
		push(g.Push, persons[min(i, len(persons)):min(i+300, len(persons))])
		push(g.PushTable, auctions[min(j, len(auctions)):min(j+900, len(auctions))])
	}
	push(g.Push, tail[0])
	push(g.PushTable, tail[1])
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	c, tc := g.Counts(), g.TableCounts()
	r.events, r.malformed, r.lateN = c.Records+tc.Records, c.Malformed+tc.Malformed, c.Late+tc.Late
	slices.Sort(r.late)
	return r
}

// sharedViewShapes are joins of two views whose right side computes a
// view the left computes too: the join over a join (its right side that
// view alone, a driver), and one whose right side reads that view (a
// graph whose root is that view).
var sharedViewShapes = []viewJoinShape{viewJoinShapes["_NESTED"], {"the right side reading it", `
CREATE VIEW ns10 AS SELECT seller, TUMBLE_START(window_start, INTERVAL '10' SECOND) AS window_start, sum(auctions) AS auctions
FROM new_sellers GROUP BY seller, TUMBLE(window_start, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8g AS SELECT x.id, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, max(y.auctions) AS auctions
FROM q8 x JOIN ns10 y ON x.id = y.seller AND x.window_start = y.window_start
GROUP BY x.id, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
	map[string]string{"q8g": "q8g-out", "q8": "q8-out", "ns10": "ns10-out", "new_persons": "np-out", "new_sellers": "ns-out"}}}

// TestRunKafkaViewJoinSharedViewLate: a view both sides of a join of two
// views compute (new_sellers) meets an auction an hour behind: the Kafka
// run reports it once, as the in-process graph (a file run's) does, with
// the late person and the malformed auction, and counts the events, the
// late and the malformed as it does. The side that does not publish the
// view reports and counts nothing of it.
func TestRunKafkaViewJoinSharedViewLate(t *testing.T) {
	persons, auctions := nexmark(t, "person", 6000, 10), nexmark(t, "auction", 18000, 10)
	tail := [2][][]byte{
		{[]byte(`{"id":1000,"name":"Late Person","email":"e","city":"c","state":"s","date_time":"2026-07-18 09:00:00.000"}`)},
		{[]byte(`{"id":1,"item_name":"i","seller":1000,"category":1,"initial_bid":1,"reserve":1,"date_time":"2026-07-18 09:00:00.000","expires":"2026-07-18 09:10:00.000"}`),
			[]byte(`{"id":2,"seller":`)},
	}
	for _, s := range sharedViewShapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each on a cluster of its own
			sameReported(t, s, persons, auctions, tail, func(want reported) string {
				if len(want.late) != 2 || want.lateN != 2 || want.malformed != 1 {
					return "want the person and the auction late, one malformed"
				}
				return ""
			}, slices.Clone[[]string])
		})
	}
}

// sameReported runs shape s's query in process (graphReported), checks
// what it reported with wantOK (a reason, "" if right), then runs it over
// Kafka (kafkaReported, with the client options extra): the late events
// (as lateOf keeps them), events, malformed and late counts, and bad
// events handed over must be the same.
func sameReported(t *testing.T, s viewJoinShape, persons, auctions [][]byte, tail [2][][]byte, wantOK func(reported) string, lateOf func([]string) []string, extra ...kgo.Opt) {
	t.Helper()
	q, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	want := graphReported(t, q, persons, auctions, tail)
	if why := wantOK(want); why != "" {
		t.Fatalf("in process: %d events, late %q (%d), %d malformed: %s", want.events, want.late, want.lateN, want.malformed, why)
	}
	got, bad := kafkaReported(t, s, q, persons, auctions, tail, extra...)
	if g, w := lateOf(got.late), lateOf(want.late); !slices.Equal(g, w) {
		t.Errorf("late events reported:\n%q\nin process:\n%q", g, w)
	}
	if got.events != want.events || got.malformed != want.malformed || got.lateN != want.lateN || bad != want.malformed {
		t.Errorf("events %d, malformed %d (%d reported), late %d; in process %d, %d, %d", got.events, got.malformed, bad, got.lateN, want.events, want.malformed, want.lateN)
	}
}

// TestRunKafkaViewJoinDrainsBothSides: a join of two views whose left
// side reads persons and auctions (q8, a join of two views; pa, an
// interval join) and whose right side reads persons only. The resumed
// run's new records are auctions alone, and every read of them is held
// back a second. The run is caught up only once the left side has
// consumed them too: before, the join stage took its left side as
// drained from the last run's positions in the person topic (nothing new
// there) and stopped without reading the auctions.
func TestRunKafkaViewJoinDrainsBothSides(t *testing.T) {
	persons, auctions := nexmark(t, "person", 6000, 10), nexmark(t, "auction", 18000, 10)
	tail := [2][][]byte{nil, {
		[]byte(`{"id":1,"item_name":"i","seller":1000,"category":1,"initial_bid":1,"reserve":1,"date_time":"2026-07-18 09:00:00.000","expires":"2026-07-18 09:10:00.000"}`),
		[]byte(`{"id":2,"seller":`)}}
	shapes := []viewJoinShape{{"a join of two views", `
CREATE VIEW q8n AS SELECT x.id, TUMBLE_START(x.window_start, INTERVAL '10' SECOND) AS window_start, max(y.versions) AS versions
FROM q8 x JOIN new_persons y ON x.id = y.id AND x.window_start = y.window_start
GROUP BY x.id, TUMBLE(x.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
		map[string]string{"q8n": "q8n-out", "q8": "q8-out", "new_persons": "np-out", "new_sellers": "ns-out"}},
		viewJoinShapes["_IJSIDE"]}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each on a cluster of its own
			sameReported(t, s, persons, auctions, tail, func(want reported) string {
				if len(want.late) != 1 || want.lateN != 1 || want.malformed != 1 {
					return "want the auction late, one malformed"
				}
				return ""
			}, slices.Clone[[]string], kgo.WithHooks(holdRecords{tail[1]}))
		})
	}
}

// holdRecords is a client hook that holds back for a second the fetch of
// a record whose value is one of values.
type holdRecords struct{ values [][]byte }

func (h holdRecords) OnFetchRecordBuffered(r *kgo.Record) {
	for _, v := range h.values {
		if bytes.Equal(r.Value, v) {
			time.Sleep(time.Second)
		}
	}
}

// kafkaReported runs shape s's query q over Kafka until caught up, then
// again over the records of tail: what the two runs reported, and the
// bad events handed to OnBadEvent. Every topic gets finals. extra are
// client options of every client of the runs.
func kafkaReported(t *testing.T, s viewJoinShape, q *plan.Query, persons, auctions [][]byte, tail [2][][]byte, extra ...kgo.Opt) (reported, int64) {
	t.Helper()
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 2, nil)
	mkTopic(t, addrs, "auction", 2, nil)
	produceValues(t, addrs, "person", 2, persons, nil)
	produceValues(t, addrs, "auction", 2, auctions, nil)
	var mu sync.Mutex
	var got reported
	var bad int64
	o := s.options(q, addrs)
	o.UntilCaughtUp, o.Logger = true, testLogger(t)
	o.ClientOpts = append(o.ClientOpts, extra...)
	o.OnViewLate = func(name string, ev *drive.LateEvent) {
		mu.Lock()
		defer mu.Unlock()
		got.late = append(got.late, name+" "+string(ev.Event))
	}
	o.OnLate = func(ev *drive.LateEvent) { o.OnViewLate(q.Name, ev) }
	o.OnBadEvent = func(*BadEvent) { mu.Lock(); bad++; mu.Unlock() }
	run := func() {
		t.Helper()
		st := runToEnd(t, o, 3*time.Minute)
		if !st.CaughtUp || st.Aborts != 0 {
			t.Fatalf("stats %+v: an aborted transaction is redone, and counted again", st)
		}
		got.events, got.malformed, got.lateN = got.events+st.EventsIn, got.malformed+st.Malformed, got.lateN+st.Late+st.TableLate
	}
	run()
	produceValues(t, addrs, "person", 2, tail[0], nil)
	produceValues(t, addrs, "auction", 2, tail[1], nil)
	run()
	for name, topic := range s.topics {
		if len(readFinals(t, addrs, topic)) == 0 {
			t.Errorf("%s: no finals", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got.late)
	return got, bad
}
