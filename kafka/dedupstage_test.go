package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// dedupQuery is tumbleQuery over a source whose dedup key is the
// merchant: every event of a merchant after its first is a copy.
func dedupQuery(name string) *plan.Query {
	q := tumbleQuery(name, 0)
	src := *q.Source
	src.Dedup = &plan.Dedup{Col: 0, Within: 3600 * 1_000_000}
	q.Source = &src
	return q
}

// TestOldDedupStateRefused: an earlier version deduplicated in the
// aggregating stage and kept the dedup keys in its state topic. Such a
// state is refused with ErrOldState saying what to do, before anything
// runs; the reset it names runs the query over, deduplicated in the
// dedup stage (its counters those of the whole input).
func TestOldDedupStateRefused(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	q := dedupQuery("olddedup")
	mkTopic(t, addrs, q.Name+"-state", 2, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	// The old layout: the aggregating stage's operator, with its dedup
	// entries, checkpointed to its state topic.
	d, err := drive.New(q, drive.Config{Emit: func(*changelog.Record) error { return nil }, Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(3, 300)
	if err := d.Push(evs[0].json()); err != nil {
		t.Fatal(err)
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	err = d.Checkpoint(true, newTracker(2).appendTo(nil), func(k, v []byte) error {
		r := &kgo.Record{Topic: q.Name + "-state", Partition: 0, Key: stateKey(0, k), Value: append([]byte(nil), v...)}
		return cl.ProduceSync(context.Background(), r).FirstErr()
	})
	if err != nil {
		t.Fatal(err)
	}
	produceEvents(t, addrs, "events", 2, evs, false)
	o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", UntilCaughtUp: true}
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = pl.Run(ctx)
	if !errors.Is(err, ErrOldState) || !strings.Contains(err.Error(), "--reset-state") || !strings.Contains(err.Error(), q.Name+"-dedup-state") {
		t.Fatalf("Run over a state topic of the aggregating stage's dedup: %v, want ErrOldState naming the dedup stage and --reset-state", err)
	}
	if st := pl.Stats(); st.EventsIn != 0 || st.RecordsOut != 0 {
		t.Errorf("the refused run consumed %d events and produced %d records, want none", st.EventsIn, st.RecordsOut)
	}
	o.ResetState = true
	if pl, err = New(o); err != nil {
		t.Fatal(err)
	}
	if err := pl.Run(ctx); err != nil {
		t.Fatalf("the run with a reset: %v", err)
	}
	keys := map[string]bool{}
	for _, e := range evs {
		keys[e.merchant] = true
	}
	st := pl.Stats()
	if !st.CaughtUp || st.EventsIn != int64(len(evs)) || st.Duplicates != int64(len(evs)-len(keys)) || st.DedupKeys != int64(len(keys)) || st.DedupLate != 0 {
		t.Errorf("the run with a reset: caught up %v, %d events in, %d duplicates, %d dedup keys, %d dedup late; want caught up, %d in, %d duplicates, %d keys, 0 late",
			st.CaughtUp, st.EventsIn, st.Duplicates, st.DedupKeys, st.DedupLate, len(evs), len(evs)-len(keys), len(keys))
	}
	if st.DedupBytes <= 0 || st.StateBytes < st.DedupBytes {
		t.Errorf("%d state bytes, %d dedup bytes: want the dedup's counted in the state's", st.StateBytes, st.DedupBytes)
	}
	if st.EventsApplied != int64(len(evs)) {
		t.Errorf("%d events applied, want %d (the copies reach the query's dedup)", st.EventsApplied, len(evs))
	}
	// A reset deletes the dedup stage's group and topics too: kept, its
	// keys would make every event read again a copy.
	if pl, err = New(o); err != nil {
		t.Fatal(err)
	}
	if err := pl.Run(ctx); err != nil {
		t.Fatalf("the second run with a reset: %v", err)
	}
	if st2 := pl.Stats(); !st2.CaughtUp || st2.EventsIn != st.EventsIn || st2.Duplicates != st.Duplicates || st2.RecordsOut != st.RecordsOut {
		t.Errorf("the second reset run: caught up %v, %d events in, %d duplicates, %d records; want those of the first: %d, %d, %d",
			st2.CaughtUp, st2.EventsIn, st2.Duplicates, st2.RecordsOut, st.EventsIn, st.Duplicates, st.RecordsOut)
	}
}
