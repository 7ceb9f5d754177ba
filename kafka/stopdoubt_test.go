package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStopAfterLostEnd: the answer to a transaction's commit is lost
// after the broker committed it, and the run is stopped while it waits:
// the end's outcome is unknown when the loop stops, and no next session
// will settle it. The stage asks the broker once more on its way out, so
// the events of every committed transaction are counted: the events
// consumed equal the offsets the group committed (before, the stalled
// transaction's events were left out of the counts).
func TestStopAfterLostEnd(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	produceEvents(t, addrs, "events", 3, genEvents(19, 9000), false)
	q := tumbleQuery("stopdoubt", 0)
	h := &lostEndTxn{stall: time.Minute, targets: map[string]int{q.Name + ".a": 2}}
	src := endpoint(addrs, "events")
	src.PartitionedByKey = true // one stage, reading the source
	pl, err := New(Options{Query: q, Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t),
		MaxPollRecords: 500, CommitRecords: 500, ClientOpts: []kgo.Opt{kgo.Dialer(h.dial)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); h.fired.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no commit answer stalled in 30 s: %v", <-done)
		}
	}
	time.Sleep(200 * time.Millisecond) // the end waits for its answer
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after a stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the stop")
	}
	offs, err := kadm.NewClient(client(t, addrs)).FetchOffsets(context.Background(), q.Name)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	st := pl.Stats()
	t.Logf("events %d, committed %d, commits %d, aborts %d, redos %d", st.EventsIn, committed, st.Commits, st.Aborts, st.Redos)
	if committed < 1000 || st.EventsIn != committed {
		t.Errorf("%d events consumed, the group committed %d (the stalled transaction committed: its events must count)", st.EventsIn, committed)
	}
	if st.Commits < 3 {
		t.Errorf("%d commits counted, want the stalled third one too", st.Commits)
	}
}
