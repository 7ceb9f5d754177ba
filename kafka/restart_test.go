package kafka

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/types"
)

// lateLog collects the late events a pipeline reports (OnLate), as
// contract keys, and the input records that carried them.
type lateLog struct {
	mu     sync.Mutex
	keys   []string
	events []string
}

func (l *lateLog) add(ev *drive.LateEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, string(changelog.AppendKey(nil, ev.Key)))
	l.events = append(l.events, string(ev.Event)) // valid only during the call: copied
}

func (l *lateLog) records() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *lateLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

func windowKey(merchant string, ts int64) string {
	ws := types.FloorDiv(ts, 60_000_000) * 60_000_000
	return string(changelog.AppendKey(nil, []types.Value{types.Str(merchant), types.TS(ws)}))
}

// produceInput writes evs round-robin over the partitions, or (direct)
// to the partition of their merchant.
func produceInput(t *testing.T, addrs []string, parts int, evs []event, direct bool) {
	t.Helper()
	if direct {
		produceKeyed(t, addrs, "events", parts, evs, false)
	} else {
		produceEvents(t, addrs, "events", parts, evs, false)
	}
}

// restartInput is a first batch of events (the minutes around 10:00), and
// a second one produced after the first run: one event for the window
// (m01, 10:00), which the first run finalized, and two for a new window
// (10:05), far past every window of the first batch.
func restartInput() (first, second []event, late string) {
	first = genEvents(61, 3000)
	lateEv := event{merchant: "m01", amount: 7, ts: baseTS + 30_000_000}
	second = []event{
		lateEv,
		{merchant: "m00", amount: 11, ts: baseTS + 5*60_000_000},
		{merchant: "m02", amount: 13, ts: baseTS + 5*60_000_000 + 1_000_000},
	}
	return first, second, windowKey(lateEv.merchant, lateEv.ts)
}

// TestUntilCaughtUpRestart: produce, catch up, produce again, catch up
// again. The second run consumes everything up to the new end offsets: an
// event for a window the first run finalized is late (counted and
// reported, never applied, no record after that window's final), and
// events for a new window produce its final records.
func TestUntilCaughtUpRestart(t *testing.T) {
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 3, nil)
			first, second, lateKey := restartInput()
			produceInput(t, addrs, 3, first, direct)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			var late lateLog
			o := Options{Query: tumbleQuery("totals", 0), Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a",
				Logger: testLogger(t), OnLate: late.add}
			st := runUntilCaughtUp(t, o)
			if st.EventsIn != int64(len(first)) || st.Late != 0 {
				t.Fatalf("first run: %d events consumed, %d late; want %d, 0", st.EventsIn, st.Late, len(first))
			}
			f := follow(t, addrs, "out", false)
			f.waitFinals(t, tumbleOracle(first), 30*time.Second)

			produceInput(t, addrs, 3, second, direct)
			st = runUntilCaughtUp(t, o)
			if st.EventsIn != int64(len(second)) {
				t.Errorf("second run: %d events consumed, want %d (the events produced since the first run)", st.EventsIn, len(second))
			}
			if st.Late != 1 {
				t.Errorf("second run: %d late events, want 1 (the event for a window the first run finalized)", st.Late)
			}
			if got := late.list(); len(got) != 1 || got[0] != lateKey {
				t.Errorf("late events reported: %q, want one for %q", got, lateKey)
			}
			// The late event carries its record value as produced, in
			// both modes (repartitioning forwards the value unchanged).
			if got := late.records(); len(got) != 1 || got[0] != string(second[0].json()) {
				t.Errorf("late event records: %q, want %q", got, second[0].json())
			}
			want := tumbleOracle(append(append([]event(nil), first...), second[1:]...))
			f.waitFinals(t, want, 30*time.Second)
		})
	}
}

// TestStreamingRestart: a plain streaming run after a caught-up run, and
// a streaming run after a stopped streaming run, follow the same rule:
// the restart consumes what was produced since, an event for a window
// already final is late, and a new window is applied and finalizes when
// the watermark passes it.
func TestStreamingRestart(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	first, second, lateKey := restartInput()
	produceInput(t, addrs, 3, first, false)
	var late lateLog
	o := Options{Query: tumbleQuery("totals", 0), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a",
		Logger: testLogger(t), OnLate: late.add}
	runUntilCaughtUp(t, o)
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(first), 30*time.Second)

	// Streaming after catching up; flush events move the watermark past
	// the new window.
	produceInput(t, addrs, 3, second, false)
	var maxTS int64
	for _, e := range append(append([]event(nil), first...), second...) {
		maxTS = max(maxTS, e.ts)
	}
	produceFlush(t, addrs, 3, maxTS)
	pl, stop := runPipeline(t, o)
	want := tumbleOracle(append(append([]event(nil), first...), second[1:]...))
	f.waitFinals(t, want, 30*time.Second)
	waitStat(t, func() bool { return pl.Stats().EventsIn == int64(len(second)+3) }, "the second batch consumed")
	time.Sleep(300 * time.Millisecond) // let the last transaction commit
	stop()
	if st := pl.Stats(); st.Late != 1 {
		t.Errorf("streaming after a caught-up run: %d late, want 1", st.Late)
	}
	if got := late.list(); len(got) != 1 || got[0] != lateKey {
		t.Errorf("late events reported: %q, want one for %q", got, lateKey)
	}

	// Streaming after a stopped streaming run: one event for the
	// finalized window (m00, 10:05), one for a new window (10:20).
	third := []event{
		{merchant: "m00", amount: 17, ts: baseTS + 5*60_000_000 + 2_000_000},
		{merchant: "m03", amount: 19, ts: maxTS + 20*60_000_000},
	}
	produceInput(t, addrs, 3, third, false)
	produceFlush(t, addrs, 3, third[1].ts)
	pl, stop = runPipeline(t, o)
	want[windowKey("m03", third[1].ts)] = agg{orders: 1, total: 19}
	f.waitFinals(t, want, 30*time.Second)
	waitStat(t, func() bool { return pl.Stats().EventsIn == int64(len(third)+3) }, "the third batch consumed")
	time.Sleep(300 * time.Millisecond)
	stop()
	if st := pl.Stats(); st.Late != 1 {
		t.Errorf("streaming after a streaming run: %d late, want 1", st.Late)
	}
	if got := late.list(); len(got) != 2 || got[1] != windowKey("m00", third[0].ts) {
		t.Errorf("late events reported: %q, want the second for %q", got, windowKey("m00", third[0].ts))
	}
}

// produceFlush writes one flush event per partition, far after maxTS.
func produceFlush(t *testing.T, addrs []string, parts int, maxTS int64) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := 0; p < parts; p++ {
		r := &kgo.Record{Topic: "events", Partition: int32(p), Value: flushEvent(maxTS, p).json()}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func waitStat(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTrackerPositions: the consumed positions markers carry round-trip,
// merge by maximum, decide consumedTo, and a version-1 encoding (no
// positions, written before they existed) still decodes, as unknown.
func TestTrackerPositions(t *testing.T) {
	tr := newTracker(2)
	tr.observe(0, 5)
	tr.setPos(0, 10)
	tr.observe(1, 7)
	end := map[int32]int64{0: 10, 1: 0}
	if tr.consumedTo(end) {
		t.Fatal("consumedTo with partition 1's position unknown")
	}
	tr.setPos(1, 0)
	if !tr.consumedTo(end) {
		t.Fatal("consumedTo false with every partition at its end")
	}
	back, err := decodeTracker(tr.appendTo(nil))
	if err != nil || back.parts[0].pos != 10 || back.parts[1].pos != 0 || !back.consumedTo(end) {
		t.Fatalf("round trip: %v %+v", err, back.parts)
	}
	m := newTracker(2)
	m.setPos(0, 4) // an older marker: never moves the position back
	back.merge(m)
	if back.parts[0].pos != 10 || back.consumedTo(map[int32]int64{0: 11, 1: 0}) {
		t.Fatalf("merge: %+v", back.parts[0])
	}
	v1 := []byte{1, 2, 1, 0, 10, 0} // n=2, one entry: partition 0, wm 5, active
	old, err := decodeTracker(v1)
	if err != nil || old.parts[0].wm != 5 || old.parts[0].pos != -1 {
		t.Fatalf("version 1: %v %+v", err, old.parts)
	}
}

// TestPositionPerInput: a checkpoint's position holds one marker table
// per input of the graph. One table's is the table's bytes, and two's the
// layout a temporal join wrote (a uvarint length, the source's, the
// table's), so earlier state topics read the same; three round trip.
func TestPositionPerInput(t *testing.T) {
	var marks []*tracker
	for i := range 3 {
		m := newTracker(i + 2)
		m.observe(int32(i), int64(10*i-5))
		m.setIdle(0, i == 1)
		marks = append(marks, m)
	}
	if got, want := appendPosition(nil, marks[:1]), marks[0].appendTo(nil); string(got) != string(want) {
		t.Fatalf("one input: %x, want the table's %x", got, want)
	}
	s := marks[0].appendTo(nil)
	two := marks[1].appendTo(append(binary.AppendUvarint(nil, uint64(len(s))), s...))
	if got := appendPosition(nil, marks[:2]); string(got) != string(two) {
		t.Fatalf("two inputs: %x, want the temporal join's layout %x", got, two)
	}
	for n := 1; n <= 3; n++ {
		back, err := splitPosition(appendPosition(nil, marks[:n]), n)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range back {
			if string(m.appendTo(nil)) != string(marks[i].appendTo(nil)) {
				t.Fatalf("%d inputs: input %d came back as %x", n, i, m.appendTo(nil))
			}
		}
	}
	if _, err := splitPosition(appendPosition(nil, marks[:1]), 2); err == nil {
		t.Fatal("one table read as two")
	}
}
