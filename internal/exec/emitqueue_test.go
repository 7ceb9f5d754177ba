package exec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestEmissionQueueHoldsRoom: with room for 2 records, a watermark that
// finalizes 5 groups emits 2 and queues the rest; rows and checkpoints are
// refused (ErrQueued, nothing applied) until Drain with more room renders
// the remaining 3, in creation order.
func TestEmissionQueueHoldsRoom(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE e (k VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');
		SELECT k, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	clock := int64(0)
	op, err := New(prog.Queries[0], Config{
		Emit:     func(r *changelog.Record) error { got = append(got, string(r.Key)); return nil },
		Nanotime: func() int64 { clock++; return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := op.Process([]types.Value{types.Str(fmt.Sprintf("k%d", i)), types.TS(int64(i) * 1e6)}); err != nil {
			t.Fatal(err)
		}
	}
	op.SetRoom(2)
	if err := op.AdvanceWatermark(60e6); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !op.Queued() {
		t.Fatalf("emitted %v, queued %v; want 2 records and the rest queued", got, op.Queued())
	}
	rows := op.Stats().Rows
	if err := op.Process([]types.Value{types.Str("late"), types.TS(61e6)}); !errors.Is(err, ErrQueued) {
		t.Fatalf("Process with records queued: %v, want ErrQueued", err)
	}
	if op.Stats().Rows != rows {
		t.Fatal("a refused row was counted")
	}
	if err := op.Checkpoint(true, nil, func(k, v []byte) error { t.Fatal("a refused checkpoint wrote an entry"); return nil }); !errors.Is(err, ErrQueued) {
		t.Fatalf("Checkpoint with records queued: %v, want ErrQueued", err)
	}
	if err := op.Drain(); err != nil || len(got) != 2 {
		t.Fatalf("Drain without room: %v, %d records", err, len(got))
	}
	op.SetRoom(10)
	if err := op.Drain(); err != nil {
		t.Fatal(err)
	}
	want := `[["k0", "1970-01-01 00:00:00"] ["k1", "1970-01-01 00:00:00"] ["k2", "1970-01-01 00:00:00"] ["k3", "1970-01-01 00:00:00"] ["k4", "1970-01-01 00:00:00"]]`
	if fmt.Sprint(got) != want || op.Queued() {
		t.Fatalf("got %v (queued %v), want %s", got, op.Queued(), want)
	}
	if err := op.Process([]types.Value{types.Str("k9"), types.TS(61e6)}); err != nil {
		t.Fatal(err)
	}
}
