package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestExchangeInputTag: a temporal join grouped by the stream puts its
// two inputs on one topic, the events (stage 1) and the table's rows
// (the table stage), with their markers, interleaved in each partition.
// Every record and marker names its input in header ubik.in, and the
// finals, across a stop and a restart, are the in-process run's byte for
// byte.
func TestExchangeInputTag(t *testing.T) {
	t.Parallel()
	q := kjoinQuery(t)
	events, versions := kjoinData(11, 800)
	want := kjoinInProcess(t, q, events, versions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 2, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	// Both inputs arrive in slices while the pipeline runs; it stops, and
	// a second run takes it up to the end.
	o := kjoinOptions(q, addrs)
	o.Logger = testLogger(t)
	_, stop := runPipeline(t, o)
	const slices = 4
	for i := range slices {
		produceValues(t, addrs, "prices", 2, versions[i*len(versions)/slices:(i+1)*len(versions)/slices], nil)
		time.Sleep(150 * time.Millisecond)
		produceValues(t, addrs, "usage", 2, events[i*len(events)/slices:(i+1)*len(events)/slices], nil)
		time.Sleep(150 * time.Millisecond)
	}
	stop()
	o.UntilCaughtUp = true
	st := runCaughtUp(t, o)
	if st.Malformed != 0 || st.Late != 0 || st.TableLate != 0 {
		t.Errorf("stats %+v: want nothing malformed or late", st)
	}
	compareFinals(t, readFinals(t, addrs, "charges"), want)

	// Each partition holds both inputs' records and markers, interleaved.
	tags := map[int32][]string{}
	for _, r := range readRecords(t, addrs, q.Name+"-repartition") {
		in, ok := headerValue(r, inHeader)
		wantIn := "usage"
		if hasHeader(r, tableRowHeader) || hasHeader(r, tableMarkerHeader) {
			wantIn = "prices"
		}
		if !ok || string(in) != wantIn {
			t.Fatalf("partition %d offset %d: header %s %q (present %v), want %q", r.Partition, r.Offset, inHeader, in, ok, wantIn)
		}
		if l := tags[r.Partition]; len(l) == 0 || l[len(l)-1] != wantIn {
			tags[r.Partition] = append(l, wantIn)
		}
	}
	for part, runs := range tags {
		if len(runs) < 3 {
			t.Errorf("partition %d: the inputs come in %d runs (%v), want them interleaved", part, len(runs), runs)
		}
	}
}

// TestExchangeUntaggedRecords: a rolling upgrade. An earlier version's
// stage 1 routed the first half of the events and its markers without a
// tag and committed its offsets; this version's continues with the rest,
// tagged. The aggregating stage reads both as the source's: the finals
// are the in-process run's, nothing malformed.
func TestExchangeUntaggedRecords(t *testing.T) {
	t.Parallel()
	q := tumbleQuery("untagged", 0)
	evs := genEvents(5, 2000)
	want := closedFinals(t, q, evs)
	addrs := cluster(t).ListenAddrs()
	const parts = 2
	rep := q.Name + "-repartition"
	mkTopic(t, addrs, "events", parts, nil)
	mkTopic(t, addrs, rep, parts, nil)
	half := len(evs) / 2
	produceEvents(t, addrs, "events", parts, evs[:half], false)
	router, err := drive.NewRouter(q, drive.Config{Decoder: drive.NewDecoder(q.Source)})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	wm := newTracker(parts)
	for i, e := range evs[:half] {
		key, err := router.Route([]byte{routeKeyVersion}, e.json())
		if err != nil {
			t.Fatal(err)
		}
		if mark, ok := router.Mark(); ok {
			wm.observe(int32(i%parts), mark)
		}
		recs = append(recs, &kgo.Record{Topic: rep, Partition: -1, Key: key, Value: e.json()})
	}
	for p := range parts {
		recs = append(recs, &kgo.Record{Topic: rep, Partition: int32(p), Key: markerKey, Value: wm.appendTo(nil),
			Headers: []kgo.RecordHeader{{Key: markerHeader, Value: []byte{1}}}})
	}
	produceSync(t, addrs, rep, recs)
	var offs kadm.Offsets
	for p := range parts {
		offs.Add(kadm.Offset{Topic: "events", Partition: int32(p), At: int64((half + parts - 1 - p) / parts)})
	}
	if _, err := kadm.NewClient(client(t, addrs)).CommitOffsets(context.Background(), q.Name+"-in", offs); err != nil {
		t.Fatal(err)
	}
	produceEvents(t, addrs, "events", parts, evs[half:], false)
	st := runCaughtUp(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", UntilCaughtUp: true})
	if st.Malformed != 0 || st.Late != 0 || st.EventsIn != int64(len(evs)-half) {
		t.Errorf("stats %+v: want %d events in, nothing malformed or late", st, len(evs)-half)
	}
	compareFinals(t, readFinals(t, addrs, "out"), want)
	var untagged, tagged int
	for _, r := range readRecords(t, addrs, rep) {
		if in, ok := headerValue(r, inHeader); !ok {
			untagged++
		} else if string(in) == q.Source.Name {
			tagged++
		}
	}
	if untagged != half+parts || tagged <= len(evs)-half {
		t.Errorf("%s holds %d untagged and %d tagged records, want the earlier version's %d and more than this one's %d events", rep, untagged, tagged, half+parts, len(evs)-half)
	}
}

// TestExchangeUnknownInput: a record and a marker whose tag names an
// input the stage does not read (another query text's stage wrote them)
// are counted malformed and reported where they were read; neither is
// applied: the marker's watermark moves nothing, the finals are those of
// the events alone.
func TestExchangeUnknownInput(t *testing.T) {
	t.Parallel()
	q := tumbleQuery("unknown", 0)
	evs := genEvents(9, 1000)
	want := closedFinals(t, q, evs)
	addrs := cluster(t).ListenAddrs()
	rep := q.Name + "-repartition"
	mkTopic(t, addrs, "events", 2, nil)
	mkTopic(t, addrs, rep, 2, nil)
	ahead := newTracker(2)
	ahead.observe(0, math.MaxInt64-1)
	ahead.observe(1, math.MaxInt64-1)
	tag := []kgo.RecordHeader{inTag("nosuch")}
	produceSync(t, addrs, rep, []*kgo.Record{
		{Topic: rep, Partition: 1, Key: []byte{routeKeyVersion}, Value: evs[0].json(), Headers: tag},
		{Topic: rep, Partition: 0, Key: markerKey, Value: ahead.appendTo(nil), Headers: append([]kgo.RecordHeader{{Key: markerHeader, Value: []byte{1}}}, tag...)},
	})
	produceEvents(t, addrs, "events", 2, evs, false)
	var mu sync.Mutex
	var bad []*BadEvent
	o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", UntilCaughtUp: true,
		OnBadEvent: func(b *BadEvent) { mu.Lock(); bad = append(bad, b); mu.Unlock() }}
	st := runCaughtUp(t, o)
	compareFinals(t, readFinals(t, addrs, "out"), want)
	if st.Malformed != 2 || st.Late != 0 || len(bad) != 2 {
		t.Fatalf("stats %+v, %d bad events: want 2 malformed, none late", st, len(bad))
	}
	for _, b := range bad {
		if !errors.Is(b, ErrUnknownInput) || b.Topic != rep || b.Offset != 0 || b.Partition != 1 && b.Partition != 0 {
			t.Errorf("bad event %v (topic %s partition %d offset %d): want ErrUnknownInput at %s offset 0", b, b.Topic, b.Partition, b.Offset, rep)
		}
	}
}

// TestExchangeDirectSourceHeaders: a source topic a stage reads directly
// is its source's whatever its records' headers (a user's topic's headers
// are the user's): events tagged with another input are applied.
func TestExchangeDirectSourceHeaders(t *testing.T) {
	t.Parallel()
	q := tumbleQuery("directtag", 0)
	evs := genEvents(3, 600)
	want := closedFinals(t, q, evs)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "events", 1, nil)
	var recs []*kgo.Record
	for i, e := range evs {
		r := &kgo.Record{Topic: "events", Partition: 0, Value: e.json()}
		if i%2 == 0 {
			r.Headers = []kgo.RecordHeader{inTag("nosuch")}
		}
		recs = append(recs, r)
	}
	produceSync(t, addrs, "events", recs)
	src := endpoint(addrs, "events")
	src.PartitionedByKey = true
	st := runCaughtUp(t, Options{Query: q, Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a", UntilCaughtUp: true})
	if st.Malformed != 0 || st.EventsApplied != int64(len(evs)) {
		t.Errorf("stats %+v: want %d events applied, none malformed", st, len(evs))
	}
	compareFinals(t, readFinals(t, addrs, "out"), want)
}

// TestInputsOf: a record goes to the input its tag names; without a tag,
// or with a tag two inputs share, by the untagged rule; a tag naming no
// input is ErrUnknownInput.
func TestInputsOf(t *testing.T) {
	ins := inputs{"persons", "auctions", "persons"}
	side := func(*kgo.Record) (int, error) { return 7, nil }
	for _, c := range []struct {
		tag  string
		want int
	}{{"auctions", 1}, {"", 7}, {"persons", 7}, {"bids", -1}} {
		r := &kgo.Record{}
		if c.tag != "" {
			r.Headers = []kgo.RecordHeader{inTag(c.tag)}
		}
		got, err := ins.of(r, side)
		if got != c.want || (err != nil) != (c.want < 0) || err != nil && !errors.Is(err, ErrUnknownInput) {
			t.Errorf("tag %q: input %d, %v; want %d", c.tag, got, err, c.want)
		}
	}
}

// closedFinals is the in-process run's finals of evs, every window closed.
func closedFinals(t *testing.T, q *plan.Query, evs []event) map[string]string {
	t.Helper()
	out := map[string]string{}
	d, err := drive.New(q, drive.Config{Decoder: drive.NewDecoder(q.Source), Emit: func(r *changelog.Record) error {
		if r.Meta.Final {
			out[string(r.Key)] = string(r.Value)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := d.Push(e.json()); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// produceSync produces recs (a manual partition, or by key as the
// stages do) and waits for each.
func produceSync(t *testing.T, addrs []string, topic string, recs []*kgo.Record) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(mixedPartitioner(map[string]bool{topic: true})))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readRecords reads topic (read_committed) to its last stable offsets.
func readRecords(t *testing.T, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	ends := stableEnds(t, addrs, topic)
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	pos := map[int32]int64{}
	for !reachedEnds(pos, ends) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read to %v of %v", topic, pos, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// tagProblems lists where pipeline p's stages tag a record of an
// exchange topic with an input the graph reading that topic does not
// have, or a graph input no stage tags (its rows and markers would
// never arrive), for TestTopologyFromPlan's every shape.
func tagProblems(p *Pipeline) []string {
	writes := map[string][]string{} // topic -> tags written
	reads := map[string]inputs{}    // topic -> the reading graph's inputs
	direct := map[string]bool{}     // topic -> its reader's first input is a source it reads directly
	var walk func(p *Pipeline)
	stage := func(c *Pipeline) {
		for _, f := range c.forwards() {
			writes[f.topic] = append(writes[f.topic], f.in)
		}
		st := &stage2{p: c}
		if _, err := st.newTask(0); err != nil {
			return // TestTopologyFromPlan reports it
		}
		reads[c.repTopic], direct[c.repTopic] = st.ins, c.direct
	}
	in := func(c *Pipeline) { // the stages reading c's declared inputs
		first := firstStream(c.root).Name
		switch {
		case c.dedup:
			writes[c.ddTopic()] = append(writes[c.ddTopic()], first)
			reads[c.ddTopic()] = inputs{first}
			writes[c.repTopic] = append(writes[c.repTopic], first)
		case !c.direct:
			writes[c.repTopic] = append(writes[c.repTopic], first)
		}
		if c.tj != nil {
			writes[c.repTopic] = append(writes[c.repTopic], c.tj.src.Name)
		}
	}
	walk = func(p *Pipeline) {
		switch {
		case p.vj != nil:
			for _, sd := range p.vj.sides {
				if sd.owned {
					walk(sd.p)
				}
			}
			if !p.readsRows() {
				in(p)
			}
			stage(p)
		default:
			in(p)
			stage(p)
		}
		for _, c := range p.after {
			stage(c)
		}
	}
	walk(p)
	var out []string
	for topic, tags := range writes {
		ins, ok := reads[topic]
		for _, tag := range tags {
			if n := len(slices.DeleteFunc(slices.Clone(ins), func(s string) bool { return s != tag })); ok && n == 0 {
				out = append(out, fmt.Sprintf("%s: tag %q, the reader's inputs %v", topic, tag, ins))
			}
		}
	}
	for topic, ins := range reads {
		for i, name := range ins {
			if !slices.Contains(writes[topic], name) && !(i == 0 && direct[topic]) {
				out = append(out, fmt.Sprintf("%s: input %q (of %v): no stage tags a record with it", topic, name, ins))
			}
		}
	}
	slices.Sort(out)
	return out
}
