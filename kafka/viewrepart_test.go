package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
)

// TestTrackerDrains holds the drain positions of a segment's marker
// table: written as version 3 only when present (stage-1 markers keep
// their bytes), read back, merged by maximum, and a table is at the end
// only when every upstream partition drained past the run's end offsets
// and every source partition is covered.
func TestTrackerDrains(t *testing.T) {
	plain := newTracker(2)
	plain.observe(0, 5)
	plain.setPos(1, 7)
	if b := plain.appendTo(nil); b[0] != wmVersion {
		t.Fatalf("a table without drains is written as version %d", b[0])
	}
	tr := newTracker(2)
	tr.observe(0, 10)
	tr.observe(1, -3)
	tr.setEnd(0, []int64{4, 9, -1})
	b := tr.appendTo(nil)
	if b[0] != wmVersionEnds {
		t.Fatalf("version %d", b[0])
	}
	back, err := decodeTracker(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.appendTo(nil); string(got) != string(b) {
		t.Fatalf("round trip: %x, want %x", got, b)
	}
	for _, cut := range []int{len(b) - 1, len(b) - 2} {
		if _, err := decodeTracker(b[:cut]); !errors.Is(err, errBadWatermark) {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
	end := map[int32]int64{0: 4, 1: 9, 2: 3}
	if tr.consumedTo(end) {
		t.Error("at the end with partition 1 not drained")
	}
	tr.setEnd(1, []int64{4, 9, -1})
	if tr.consumedTo(end) {
		t.Error("at the end with source partition 2 tracked by none")
	}
	tr.setEnd(1, []int64{-1, -1, 3}) // merged by maximum: 4, 9, 3
	if !tr.consumedTo(end) {
		t.Error("not at the end when every partition drained past it")
	}
	if r := tr.reached(3); fmt.Sprint(r) != "[4 9 3]" {
		t.Errorf("reached %v", r)
	}
	end[1] = 10 // a later run over a longer input
	if tr.consumedTo(end) {
		t.Error("a drain of an earlier run ends a later one")
	}
	// Direct mode: each upstream partition knows its own source partition.
	d := newTracker(2)
	d.setEnd(0, []int64{5, -1})
	d.setEnd(1, []int64{-1, 6})
	if !d.consumedTo(map[int32]int64{0: 5, 1: 6}) || d.consumedTo(map[int32]int64{0: 5, 1: 7}) {
		t.Error("direct-mode drains")
	}
}

const repartScript = `CREATE SOURCE ev (merchant VARCHAR, region VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE VIEW tens AS SELECT merchant, region, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, sum(amount) AS total
  FROM ev GROUP BY merchant, region, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW by_region AS SELECT region, TUMBLE_START(ws, INTERVAL '30' SECOND) AS m, sum(n) AS n, sum(total) AS total, count(*) AS cells
  FROM tens GROUP BY region, TUMBLE(ws, INTERVAL '30' SECOND);
CREATE VIEW total AS SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(n) AS n, sum(total) AS total, count(*) AS parts
  FROM by_region GROUP BY TUMBLE(m, INTERVAL '1' MINUTE);
`

// TestViewRepartitionSmallTransactions runs a chain cut twice (a reader
// by region over views per merchant and region, then one group) over 3
// source partitions and 2 repartition partitions with transactions of a
// few dozen records, so each segment's rows and watermark markers are
// spread over many transactions of every upstream partition: every
// query's finals equal the in-process graph's, one final per key.
func TestViewRepartitionSmallTransactions(t *testing.T) {
	t.Parallel()
	q := lastQuery(t, repartScript)
	r := rand.New(rand.NewPCG(5, 5))
	merchants := []string{`"a"`, `"b"`, `null`, `""`, `"\u00e9"`}
	regions := []string{`"eu"`, `"us"`, `null`, `"x\"y"`}
	amounts := []string{"1.5", "-0.0", "1e300", "1e-300", "-2"}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	var values [][]byte
	for i := 0; i < 3000; i++ {
		ts := base.Add(time.Duration(i)*60*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond)
		values = append(values, fmt.Appendf(nil, `{"merchant":%s,"region":%s,"amount":%s,"ts":"%s"}`,
			merchants[r.IntN(len(merchants))], regions[r.IntN(len(regions))], amounts[r.IntN(len(amounts))], ts.Format("2006-01-02 15:04:05.000")))
	}
	// The oracle: the whole graph in one process.
	want := map[string]map[string]string{}
	collect := func(rec *changelog.Record) error {
		m := want[rec.Meta.Query]
		if m == nil {
			m = map[string]string{}
			want[rec.Meta.Query] = m
		}
		m[string(rec.Key)] = string(rec.Value)
		return nil
	}
	g, err := drive.NewGraph(q, nil, drive.Config{Emit: collect}, collect, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := g.Push(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "ev", 3, nil)
	sinks := map[string]Endpoint{"tens": endpoint(addrs, "o-tens"), "by_region": endpoint(addrs, "o-by_region")}
	opts := Options{Query: q, Source: endpoint(addrs, "ev"), Sink: endpoint(addrs, "o-total"), ViewSinks: sinks,
		InstanceID: "i", MaxPollRecords: 40, CommitInterval: 5 * time.Millisecond, RepartitionPartitions: 2,
		Logger: testLogger(t)}
	// Streaming while the events arrive 60 at a time (3.6 s of event
	// time), so the watermark of every segment moves in many steps and
	// windows finalize all along; then a run until caught up finishes.
	pl, stop := runPipeline(t, opts)
	for i := 0; i < len(values); i += 60 {
		produceValues(t, addrs, "ev", 3, values[i:min(i+60, len(values))], nil)
		time.Sleep(15 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	st := pl.Stats()
	opts.UntilCaughtUp = true
	pl, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st2 := pl.Stats()
	t.Logf("streaming: %d events, %d commits, %d markers; caught up: %d events", st.EventsIn, st.Commits, st.MarkersOut, st2.EventsIn)
	if !st2.CaughtUp || st.EventsIn+st2.EventsIn != 3000 || st.EventsApplied+st2.EventsApplied != 3000 || st.Late+st2.Late != 0 || st.Commits < 40 {
		t.Fatalf("stats %+v, then %+v", st, st2)
	}
	for name, topic := range map[string]string{"tens": "o-tens", "by_region": "o-by_region", "total": "o-total"} {
		got := map[string]string{}
		for _, rec := range readAll(t, addrs, topic) {
			if rec.meta.Query != name || rec.meta.Revision != 1 || !rec.meta.Final {
				t.Errorf("%s key %s: query %s revision %d final %v, want one final of %s", topic, rec.key, rec.meta.Query, rec.meta.Revision, rec.meta.Final, name)
			}
			got[rec.key] = rec.value
		}
		if len(got) == 0 || len(got) != len(want[name]) {
			t.Errorf("%s: %d keys, in process %d", topic, len(got), len(want[name]))
		}
		for k, v := range want[name] {
			if got[k] != v {
				t.Errorf("%s key %s: %q, in process %q", topic, k, got[k], v)
			}
		}
	}
	// Two repartitions, each with its group and state.
	adm := kadm.NewClient(client(t, addrs))
	topics, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var internal []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, "total") {
			internal = append(internal, name)
		}
	}
	if fmt.Sprint(internal) != "[total-repartition total-s2-repartition total-s2-state total-s3-repartition total-s3-state total-state]" {
		t.Errorf("internal topics %v", internal)
	}
}

// readAll reads every committed record of topic.
func readAll(t *testing.T, addrs []string, topic string) []outRec {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []outRec
	deadline := time.Now().Add(30 * time.Second)
	for len(left) > 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if !r.Attrs.IsControl() {
				kr, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
				if err != nil {
					t.Errorf("%s partition %d offset %d: %v", topic, r.Partition, r.Offset, err)
				}
				out = append(out, outRec{key: string(r.Key), value: string(r.Value), meta: kr.Meta})
			}
		})
	}
	if len(left) > 0 {
		t.Fatalf("%s: partitions %v not read to the end", topic, left)
	}
	return out
}

// TestSegmentsUnbounded: a chain whose every reader groups by an
// expression of its view's key is cut at each reader, as often as it has
// readers (40 here): each cut is one more repartition topic, no refusal.
func TestSegmentsUnbounded(t *testing.T) {
	const n = 41
	var b strings.Builder
	b.WriteString("CREATE SOURCE ev (a VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n")
	b.WriteString("CREATE VIEW v0 AS SELECT a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "CREATE VIEW v%d AS SELECT upper(a) AS a, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS ws, sum(n) AS n FROM v%d GROUP BY upper(a), TUMBLE(ws, INTERVAL '1' MINUTE);\n", i, i-1)
	}
	q := lastQuery(t, b.String())
	if err := CheckQuery(q); err != nil {
		t.Fatal(err)
	}
	segs, err := chainQueries(q)
	if err != nil || len(segs) != n {
		t.Fatalf("%d segments, want %d (%v)", len(segs), n, err)
	}
}

// TestSegmentOwned: a reset finds every segment's topics and group a
// query name holds on the cluster, however many cuts an earlier text had
// (here 2 and 27), and nothing of another name that only starts alike.
func TestSegmentOwned(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	for _, topic := range []string{"q-s2-state", "q-s2-repartition", "q-s27-repartition", "q-state", "q-s2x-state", "q-s02-state", "qq-s3-state", "q-s1-state"} {
		mkTopic(t, addrs, topic, 1, nil)
	}
	cl := client(t, addrs)
	adm := &admClient{Client: kadm.NewClient(cl), cl: cl}
	for _, g := range []string{"q-s27", "q-s3", "q-sx", "q"} {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "q-state", Partition: 0, At: 0})
		if _, err := adm.CommitOffsets(context.Background(), g, offs); err != nil {
			t.Fatal(err)
		}
	}
	groups, topics, err := segmentOwned(context.Background(), adm, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(topics, " "), "q-s2-repartition q-s2-state q-s27-repartition"; got != want {
		t.Errorf("topics %s, want %s", got, want)
	}
	if got, want := strings.Join(groups, " "), "q-s27 q-s3"; got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
}
