package kafka

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// TestEarlyEmissionAtCommit: an EMIT EARLY query's early emission happens
// at the end of a transaction, so each (group, window) has at most one
// early record a transaction, carrying the newest value it holds. The
// processing clock moves 20 ms at each look, so an emission is due at
// every poll of 100 records; the skewed merchants change in nearly every
// one of the 300 polls, yet the early records of each key number no
// more than the commits.
func TestEarlyEmissionAtCommit(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(79, 30000)
	produceKeyed(t, addrs, "events", 3, evs, false)
	src := endpoint(addrs, "events")
	src.PartitionedByKey = true
	src.IdleTimeout = time.Hour // the fast clock must not make a partition idle
	var looks atomic.Int64
	fast := func() time.Time { return time.Now().Add(time.Duration(looks.Add(1)) * 20 * time.Millisecond) }
	st := runUntilCaughtUp(t, Options{Query: tumbleQuery("totals", 10*time.Millisecond), Source: src,
		Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t), Now: fast,
		MaxPollRecords: 100, CommitInterval: 5 * time.Second, CommitRecords: 5000})
	cl := client(t, addrs, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	early, finals := map[string]int64{}, 0
	deadline := time.Now().Add(30 * time.Second)
	for finals < len(tumbleOracle(evs)) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if decodeOut(t, r).meta.Final {
				finals++
			} else {
				early[string(r.Key)]++
			}
		})
		cancel()
	}
	if finals != len(tumbleOracle(evs)) {
		t.Fatalf("%d finals, want %d", finals, len(tumbleOracle(evs)))
	}
	most := int64(0)
	for k, n := range early {
		most = max(most, n)
		if n > st.Commits {
			t.Errorf("key %s: %d early records in %d transactions", k, n, st.Commits)
		}
	}
	if most < 2 {
		t.Errorf("at most %d early record a key: the test shows nothing", most)
	}
	t.Logf("%d commits, at most %d early records a key, %d keys", st.Commits, most, len(early))
}
