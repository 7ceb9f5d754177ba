package kafka

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdlePartitionsNamed: events on one partition of four. Until the
// idle timeout passes, the three empty partitions are named silent (they
// hold the watermark back, so the window does not finalize); once it
// passes they are named idle, stop holding it, and the window finalizes.
// Processing time is a test clock, so the idle timeout passes exactly
// when the test says.
func TestIdlePartitionsNamed(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 4, nil)
			evs := genEvents(81, 500)
			last := event{merchant: "m00", amount: 1, ts: baseTS + 5*60_000_000}
			cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var recs []*kgo.Record
			for _, e := range append(append([]event(nil), evs...), last) {
				recs = append(recs, &kgo.Record{Topic: "events", Partition: 0, Value: e.json()})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			var clock atomic.Int64
			clock.Store(time.Now().UnixNano())
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct // one partition holds every group: valid for direct mode
			src.IdleTimeout = time.Minute
			pl, stop := runPipeline(t, Options{Query: tumbleQuery("totals", 0), Source: src, Sink: endpoint(addrs, "out"),
				InstanceID: "a", Logger: testLogger(t), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
			defer stop()
			waitStat(t, func() bool {
				st := pl.Stats()
				return st.EventsIn == int64(len(evs)+1) && slices.Equal(st.SilentPartitions, []int32{1, 2, 3})
			}, "partitions 1, 2, 3 named silent")
			if st := pl.Stats(); len(st.IdlePartitions) != 0 {
				t.Errorf("before the idle timeout: idle partitions %v, want none", st.IdlePartitions)
			}
			clock.Add(int64(2 * time.Minute))
			waitStat(t, func() bool { return slices.Equal(pl.Stats().IdlePartitions, []int32{0, 1, 2, 3}) }, "every partition named idle")
			if st := pl.Stats(); len(st.SilentPartitions) != 0 {
				t.Errorf("after the idle timeout: silent partitions %v, want none", st.SilentPartitions)
			}
			follow(t, addrs, "out", false).waitFinals(t, tumbleOracle(evs), 30*time.Second)
		})
	}
}

// TestAssignmentRemembersDropped: a partition revoked (or lost) and then
// assigned back before the processing loop looks is reported as dropped,
// so the loop restores its operator (another instance may have changed its
// state in between) although the owned set looks unchanged.
func TestAssignmentRemembersDropped(t *testing.T) {
	a := &assignment{owned: map[int32]bool{}}
	a.assign(nil, nil, map[string][]int32{"t": {0, 1}})
	if owned, ok := a.snapshot(); !ok || len(owned) != 2 {
		t.Fatalf("snapshot after the first assignment: %v %v", owned, ok)
	}
	if d := a.takeDropped(); len(d) != 0 {
		t.Fatalf("dropped before any revoke: %v", d)
	}
	a.revoke(nil, nil, map[string][]int32{"t": {1}})
	a.assign(nil, nil, map[string][]int32{"t": {1}})
	owned, ok := a.snapshot()
	if !ok || !owned[0] || !owned[1] || len(owned) != 2 {
		t.Fatalf("snapshot after partition 1 left and came back: %v %v, want {0 1} changed", owned, ok)
	}
	if d := a.takeDropped(); len(d) != 1 || !d[1] {
		t.Fatalf("dropped after partition 1 left and came back: %v, want {1}", d)
	}
	if d := a.takeDropped(); len(d) != 0 {
		t.Fatalf("dropped reported twice: %v", d)
	}
}
