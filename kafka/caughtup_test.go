package kafka

import (
	"context"
	"hash/fnv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runUntilCaughtUp runs a pipeline with UntilCaughtUp and requires Run to
// return nil by itself, with Stats.CaughtUp set.
func runUntilCaughtUp(t *testing.T, o Options) Stats {
	t.Helper()
	o.UntilCaughtUp = true
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	if err := pl.Run(ctx); err != nil {
		t.Fatalf("Run with UntilCaughtUp: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run with UntilCaughtUp did not stop by itself within 90s")
	}
	st := pl.Stats()
	if !st.CaughtUp {
		t.Fatalf("Run returned nil, but Stats.CaughtUp is false: %+v", st)
	}
	t.Logf("caught up in %s: %+v", time.Since(start), st)
	return st
}

// produceKeyed writes evs to the partition of their merchant (FNV hash),
// so the topic is partitioned by the GROUP BY key (direct mode), inside
// one transaction when txn is set (the input then ends with a commit
// marker, a control record the consumer never sees as a record).
func produceKeyed(t *testing.T, addrs []string, topic string, parts int, evs []event, txn bool) {
	t.Helper()
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1 << 20)}
	if txn {
		opts = append(opts, kgo.TransactionalID("input-producer"))
	}
	cl := client(t, addrs, opts...)
	ctx := context.Background()
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		h := fnv.New32a()
		h.Write([]byte(e.merchant))
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(h.Sum32() % uint32(parts)), Value: e.json()}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing input: %v", err)
	}
	if txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("committing the input transaction: %v", err)
		}
	}
}

// TestUntilCaughtUp: with UntilCaughtUp, Run stops by itself once the
// input is consumed, and every window, the last ones included (no event
// ever moved the watermark past them), has its final record, equal to the
// oracle; every changelog invariant holds on the way.
func TestUntilCaughtUp(t *testing.T) {
	cases := []struct {
		name   string
		direct bool
		txn    bool
	}{
		{"repartition", false, false},
		{"repartition, transactional input", false, true},
		{"direct", true, false},
		{"direct, transactional input", true, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 3, nil)
			evs := genEvents(uint64(40+i), 6000)
			if tc.direct || tc.txn {
				produceKeyed(t, addrs, "events", 3, evs, tc.txn)
			} else {
				produceEvents(t, addrs, "events", 3, evs, false)
			}
			src := endpoint(addrs, "events")
			src.PartitionedByKey = tc.direct
			st := runUntilCaughtUp(t, Options{Query: tumbleQuery("totals", 100*time.Millisecond), Source: src,
				Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)})
			if st.EventsIn != int64(len(evs)) {
				t.Errorf("consumed %d events, produced %d", st.EventsIn, len(evs))
			}
			// Every window finalized, so the owned operators hold nothing.
			if st.LiveGroups != 0 || st.StateBytes != 0 {
				t.Errorf("after catching up: %d live groups, %d state bytes", st.LiveGroups, st.StateBytes)
			}
			f := follow(t, addrs, "out", false)
			f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
		})
	}
}

// TestUntilCaughtUpAfterStop: a query that ran (and was stopped) before
// the input ended is finished by a second run with UntilCaughtUp: it
// resumes from the committed offsets and state, consumes the rest, and
// finalizes everything. An empty remainder works too (the second run of a
// continuous view starts at the end already).
func TestUntilCaughtUpAfterStop(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	evs := genEvents(7, 8000)
	produceEvents(t, addrs, "events", 2, evs[:4000], false)
	q := tumbleQuery("totals", 100*time.Millisecond)
	o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)}
	pl, stop := runPipeline(t, o)
	deadline := time.Now().Add(30 * time.Second)
	for pl.Stats().EventsApplied < 4000 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the last transaction commit
	stop()
	produceEvents(t, addrs, "events", 2, evs[4000:], false)
	runUntilCaughtUp(t, o)
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 30*time.Second)

	// A continuous view: run it to the end, then again with nothing new.
	cq := continuousQuery("view")
	co := Options{Query: cq, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "view-out"), InstanceID: "a", Logger: testLogger(t)}
	first := runUntilCaughtUp(t, co)
	// A continuous view never closes: its groups stay live, and the gauges
	// the metrics endpoint reads show them.
	if first.LiveGroups == 0 || first.StateBytes == 0 {
		t.Errorf("continuous view after its run: %d live groups, %d state bytes; want both > 0", first.LiveGroups, first.StateBytes)
	}
	st := runUntilCaughtUp(t, co)
	if st.EventsIn != 0 || st.RecordsOut != 0 {
		t.Errorf("second run over a consumed input: %d events, %d records, want none", st.EventsIn, st.RecordsOut)
	}
	vf := follow(t, addrs, "view-out", true)
	vf.waitLatest(t, continuousOracle(evs), 30*time.Second)
}

// TestTransactionTakesManyPolls: one aggregate transaction takes the
// polls of a commit interval, not one poll each: 6000 events read 100 per poll (60
// polls) with a 5 s commit interval commit in a few transactions, and the
// finals equal the oracle (every record polled inside a transaction is
// processed and committed in it). The transaction carrying the finals
// ends as soon as the input is consumed, not at the interval's end.
func TestTransactionTakesManyPolls(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct", false: "repartition"}[direct], func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 3, nil)
			evs := genEvents(77, 6000)
			produceKeyed(t, addrs, "events", 3, evs, false)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			start := time.Now()
			st := runUntilCaughtUp(t, Options{Query: tumbleQuery("totals", 100*time.Millisecond), Source: src,
				Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t),
				MaxPollRecords: 100, CommitInterval: 5 * time.Second})
			if st.EventsIn != int64(len(evs)) {
				t.Errorf("consumed %d events, produced %d", st.EventsIn, len(evs))
			}
			// 60 polls at least; a transaction per poll would commit 60
			// times. The repartition stage still commits once per poll
			// (its transactions are not counted apart), so only the
			// finals are checked there.
			if direct && st.Commits > 12 {
				t.Errorf("%d commits for 60 polls or more within a 5 s interval: a transaction takes one poll", st.Commits)
			}
			f := follow(t, addrs, "out", false)
			f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
			t.Logf("%d commits, %s", st.Commits, time.Since(start))
		})
	}
}

// TestEmptyEndsAreNotAborts: a stage whose JoinGroup waits (here the
// broker holds the repartition stage's first join for 3 s) ends an empty
// transaction after every poll, with no assignment and nothing in it;
// none of those is an aborted transaction. They used to be counted as
// aborts: a final run of the chaos test whose join waited 60 s reported
// some 600 aborts that aborted nothing.
func TestEmptyEndsAreNotAborts(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	evs := genEvents(11, 2000)
	produceEvents(t, addrs, "events", 2, evs, false)
	var held atomic.Bool
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.JoinGroupRequest); r.Group == "totals-in" && held.CompareAndSwap(false, true) {
			c.SleepControl(func() { time.Sleep(3 * time.Second) })
		}
		return nil, nil, false
	})
	start := time.Now()
	st := runUntilCaughtUp(t, Options{Query: tumbleQuery("totals", 100*time.Millisecond), Source: endpoint(addrs, "events"),
		Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)})
	if !held.Load() || time.Since(start) < 3*time.Second {
		t.Fatalf("the join was not held (%v, caught up after %s)", held.Load(), time.Since(start))
	}
	if st.Aborts != 0 {
		t.Errorf("%d aborts, want 0: nothing was aborted (the stage waited for its join)", st.Aborts)
	}
	if st.EventsIn != int64(len(evs)) || st.Commits == 0 {
		t.Errorf("consumed %d events of %d, %d commits", st.EventsIn, len(evs), st.Commits)
	}
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
}
