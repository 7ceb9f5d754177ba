package kafka

import (
	"testing"
	"time"
)

// TestCommitRecords: Options.CommitRecords ends a transaction once it has
// taken that many input records, before its interval: 6000 events read
// 100 per poll with a 5 s interval (one or two transactions without the
// bound, TestTransactionTakesManyPolls) and a bound of 1000 commit at
// least 6 times, and the finals equal the oracle (every record polled by
// the loop's fetcher is processed in the transaction that commits its
// offset).
func TestCommitRecords(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(78, 6000)
	produceKeyed(t, addrs, "events", 3, evs, false)
	src := endpoint(addrs, "events")
	src.PartitionedByKey = true
	st := runUntilCaughtUp(t, Options{Query: tumbleQuery("totals", 100*time.Millisecond), Source: src,
		Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t),
		MaxPollRecords: 100, CommitInterval: 5 * time.Second, CommitRecords: 1000})
	if st.EventsIn != int64(len(evs)) {
		t.Errorf("consumed %d events, produced %d", st.EventsIn, len(evs))
	}
	if st.Commits < 6 {
		t.Errorf("%d commits for 6000 events at most 1099 a transaction", st.Commits)
	}
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
	t.Logf("%d commits", st.Commits)
}

// TestNewCommitRecordsNegative: a negative bound is refused.
func TestNewCommitRecordsNegative(t *testing.T) {
	o := Options{Query: tumbleQuery("totals", time.Second), Source: endpoint([]string{"127.0.0.1:1"}, "in"),
		Sink: endpoint([]string{"127.0.0.1:1"}, "out"), CommitRecords: -1}
	if _, err := New(o); err == nil {
		t.Fatal("CommitRecords -1 accepted")
	}
}
