package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestDataLossRefused: records deleted (DeleteRecords, as retention does)
// below a stopped query's committed offsets, before it read them, make
// the restart fail naming the partitions and the records lost, in both
// modes; with AllowDataLoss it goes on from the log start and counts them.
func TestDataLossRefused(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 3, nil)
			first, _, _ := restartInput()
			second := genEvents(62, 300)
			for i := range second {
				second[i].ts += 10 * 60_000_000 // past every window of first
			}
			produceInput(t, addrs, 3, first, direct)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			o := Options{Query: tumbleQuery("totals", 0), Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)}
			runUntilCaughtUp(t, o)
			produceInput(t, addrs, 3, second, direct)

			// Delete what the restart has not read yet on partitions 0 and 2:
			// 3 and 1 records past the committed offsets.
			adm := kadm.NewClient(client(t, addrs))
			ctx := context.Background()
			ends, err := adm.ListEndOffsets(ctx, "events")
			if err != nil {
				t.Fatal(err)
			}
			group := "totals-in"
			if direct {
				group = "totals"
			}
			committed, err := adm.FetchOffsetsForTopics(ctx, group, "events")
			if err != nil {
				t.Fatal(err)
			}
			del := kadm.Offsets{}
			var want int64
			for part, n := range map[int32]int64{0: 3, 2: 1} {
				co, _ := committed.Lookup("events", part)
				eo, _ := ends.Lookup("events", part)
				if co.At+n > eo.Offset {
					t.Fatalf("partition %d: committed %d, end %d: not %d records to delete", part, co.At, eo.Offset, n)
				}
				del.Add(kadm.Offset{Topic: "events", Partition: part, At: co.At + n})
				want += n
			}
			resp, err := adm.DeleteRecords(ctx, del)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}

			pl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			err = pl.Run(rctx)
			if !errors.Is(err, ErrDataLoss) {
				t.Fatalf("restart after records were deleted: Run = %v, want ErrDataLoss", err)
			}
			for _, s := range []string{"4 records of source topic events", "partition 0: offsets", "(3 records)", "partition 2: offsets", "(1 records)", "--allow-data-loss"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if got := pl.Stats(); got.DataLost != want || got.EventsIn != 0 || got.Commits != 0 {
				t.Errorf("refused run: DataLost %d, EventsIn %d, Commits %d; want %d, 0, 0", got.DataLost, got.EventsIn, got.Commits, want)
			}

			o.AllowDataLoss = true
			st := runUntilCaughtUp(t, o)
			if st.DataLost != want {
				t.Errorf("allowed run: DataLost %d, want %d", st.DataLost, want)
			}
			if st.EventsIn != int64(len(second))-want {
				t.Errorf("allowed run: %d events consumed, want %d (the %d produced since, less the %d deleted)", st.EventsIn, int64(len(second))-want, len(second), want)
			}
		})
	}
}
