package kafka

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
)

// TestInfiniteWatermarkStateRefused: earlier versions ended an
// --until-caught-up run by moving every operator (and the source
// partitions' watermarks in its checkpoint position) to +infinity, and
// checkpointed that. Continued, every later event would be late, silently.
// Such a state topic is refused with ErrOldState naming the partition and
// the ways out; the reset it names then runs the query over from scratch.
func TestInfiniteWatermarkStateRefused(t *testing.T) {
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 1, nil)
			q := tumbleQuery("old"+name, 0)
			mkTopic(t, addrs, q.Name+"-state", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
			// The old format: one event applied, then the watermark
			// +infinity (the operator's and, in the position, the
			// source partition's), checkpointed.
			d, err := drive.New(q, drive.Config{Emit: func(*changelog.Record) error { return nil }, Now: func() time.Time { return time.Unix(0, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			evs := genEvents(1, 50)
			err = d.Push(evs[0].json())
			if err == nil {
				err = d.AdvanceWatermark(math.MaxInt64)
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Watermark() != math.MaxInt64 {
				t.Fatalf("the old-format operator's watermark is %d, want +infinity", d.Watermark())
			}
			pos := newTracker(1)
			pos.observe(0, math.MaxInt64)
			cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			err = d.Checkpoint(true, pos.appendTo(nil), func(k, v []byte) error {
				r := &kgo.Record{Topic: q.Name + "-state", Partition: 0, Key: stateKey(0, k), Value: append([]byte(nil), v...)}
				return cl.ProduceSync(context.Background(), r).FirstErr()
			})
			if err != nil {
				t.Fatal(err)
			}
			produceEvents(t, addrs, "events", 1, evs, false)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			o := Options{Query: q, Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a", UntilCaughtUp: true}
			pl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			err = pl.Run(ctx)
			if !errors.Is(err, ErrOldState) || !strings.Contains(err.Error(), "partition 0") || !strings.Contains(err.Error(), "--reset-state") {
				t.Fatalf("Run over a state topic holding the watermark +infinity: %v, want ErrOldState naming the partition and --reset-state", err)
			}
			if st := pl.Stats(); st.RecordsOut != 0 || st.Late != 0 {
				t.Errorf("the refused run produced %d records and counted %d late events, want none", st.RecordsOut, st.Late)
			}
			// The way out it names: a reset starts over and applies every event.
			o.ResetState = true
			pl, err = New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := pl.Run(ctx); err != nil {
				t.Fatalf("the run with a reset: %v", err)
			}
			if st := pl.Stats(); !st.CaughtUp || st.EventsApplied != int64(len(evs)) || st.Late != 0 {
				t.Errorf("the run with a reset: caught up %v, %d events applied, %d late; want caught up, %d applied, 0 late", st.CaughtUp, st.EventsApplied, st.Late, len(evs))
			}
		})
	}
}
