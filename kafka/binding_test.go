package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runErr runs a pipeline that must refuse to start, and returns its error.
func runErr(t *testing.T, o Options) error {
	t.Helper()
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = pl.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run: %v (context %v), want a refusal", err, ctx.Err())
	}
	return err
}

// TestBindingRefused: a query name is bound to its inputs. The same name
// over another source topic, another sink topic or another query is
// refused, naming what differs and the ways out; with ResetState the run
// starts over on the new inputs and produces the right records; an
// unchanged restart resumes from the committed offsets and state.
func TestBindingRefused(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	mkTopic(t, addrs, "events2", 2, nil)
	a, b := genEvents(71, 2000), genEvents(72, 1500)
	produceEvents(t, addrs, "events", 2, a, false)
	produceEvents(t, addrs, "events2", 2, b, false)
	q := tumbleQuery("totals", 0)
	o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)}
	runUntilCaughtUp(t, o)
	follow(t, addrs, "out", false).waitFinals(t, tumbleOracle(a), 30*time.Second)

	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"source topic", Options{Query: q, Source: endpoint(addrs, "events2"), Sink: endpoint(addrs, "out")},
			[]string{"the source topic was events, now events2"}},
		{"sink topic", Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out2")},
			[]string{"the sink topic was out, now out2"}},
		{"query", Options{Query: continuousQuery("totals"), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out")},
			[]string{"the query text was"}},
		{"source and sink", Options{Query: q, Source: endpoint(addrs, "events2"), Sink: endpoint(addrs, "out2")},
			[]string{"the source topic was events, now events2", "the sink topic was out, now out2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.InstanceID, tc.o.Logger, tc.o.UntilCaughtUp = "a", testLogger(t), true
			err := runErr(t, tc.o)
			if !errors.Is(err, ErrBindingMismatch) {
				t.Fatalf("Run: %v, want ErrBindingMismatch", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range append(tc.want, "query totals ran before", "totals-state", "transactional ids totals-in.a and totals.a",
				"consumer groups totals-in and totals", "totals-repartition", "new name", "--reset-state", "sink topic is kept") {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q:\n%s", w, msg)
				}
			}
		})
	}

	// --reset-state: over events2 into out2, from the start of events2.
	o2 := Options{Query: q, Source: endpoint(addrs, "events2"), Sink: endpoint(addrs, "out2"), InstanceID: "a", Logger: testLogger(t)}
	reset := o2
	reset.ResetState = true
	st := runUntilCaughtUp(t, reset)
	if st.EventsIn != int64(len(b)) || st.Late != 0 {
		t.Errorf("after the reset: %d events consumed, %d late; want %d, 0", st.EventsIn, st.Late, len(b))
	}
	f2 := follow(t, addrs, "out2", false)
	f2.waitFinals(t, tumbleOracle(b), 30*time.Second)
	// The old inputs are now the other ones.
	o.UntilCaughtUp = true
	if err := runErr(t, o); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "the source topic was events2, now events") {
		t.Errorf("the old inputs after the reset: %v, want ErrBindingMismatch naming events2", err)
	}

	// An unchanged restart resumes: only the new events are consumed.
	more := []event{{merchant: "m05", amount: 3, ts: baseTS + 10*60_000_000}}
	produceEvents(t, addrs, "events2", 2, more, false)
	st = runUntilCaughtUp(t, o2)
	if st.EventsIn != 1 || st.RestoredEntries == 0 {
		t.Errorf("unchanged restart: %d events consumed, %d entries restored; want 1, > 0", st.EventsIn, st.RestoredEntries)
	}
	f2.waitFinals(t, tumbleOracle(append(append([]event(nil), b...), more...)), 30*time.Second)

	// A partition added to a source the query repartitions moves no
	// group: the restart reads it (read by key, it is refused:
	// TestSourcePartitionsAdded).
	if _, err := kadm.NewClient(client(t, addrs)).CreatePartitions(context.Background(), 1, "events2"); err != nil {
		t.Fatal(err)
	}
	grown := []event{{merchant: "m06", amount: 4, ts: baseTS + 11*60_000_000}}
	pc := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pc.ProduceSync(context.Background(), &kgo.Record{Topic: "events2", Partition: 2, Value: grown[0].json()}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if st = runUntilCaughtUp(t, o2); st.EventsIn != 1 {
		t.Errorf("restart after a partition was added: %d events consumed, want 1 (the new partition's)", st.EventsIn)
	}
}
