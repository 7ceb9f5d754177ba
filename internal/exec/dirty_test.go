package exec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestDirtyListDropsFinalized: a (group, window) that finalizes while it
// waits on the dirty list leaves the list (its slot cleared, so the
// finalized window is not kept reachable until the next flush), and the
// flush publishes exactly the live windows' groups, in the order they
// first changed; with a flush queued behind the window's finals under
// backpressure, the queued list keeps its slots and skips the dead ones.
func TestDirtyListDropsFinalized(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE e (k VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '1' MINUTE) WITH (format = 'jsonl');
		SELECT k, count(*) AS n FROM e GROUP BY k, HOP(t, INTERVAL '1' SECOND, INTERVAL '3' SECOND)
		EMIT EARLY EVERY INTERVAL '1' SECOND`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, room := range []int{-1, 0} {
		var got []string
		clock := int64(0)
		op, err := New(prog.Queries[0], Config{
			Emit: func(r *changelog.Record) error {
				got = append(got, fmt.Sprintf("%s%s/%v", r.Key, r.Value, r.Meta.Final))
				return nil
			},
			Nanotime: func() int64 { clock++; return clock },
		})
		if err != nil {
			t.Fatal(err)
		}
		push := func(k string, sec int64) {
			t.Helper()
			if err := op.Process([]types.Value{types.Str(k), types.TS(sec * 1e6)}); err != nil {
				t.Fatal(err)
			}
		}
		push("a", 0) // windows -2, -1, 0
		push("b", 2) // windows 0, 1, 2
		if n := op.DirtyLen(); n != 6 {
			t.Fatalf("dirty list holds %d, want 6", n)
		}
		if room >= 0 {
			op.SetRoom(room)
		}
		// Watermark 1 s finalizes window -2 (a's first group), queued
		// behind nothing, so the live list loses that slot.
		if err := op.AdvanceWatermark(1e6); err != nil {
			t.Fatal(err)
		}
		if room < 0 {
			if op.dirty[0] != nil {
				t.Fatal("a finalized group stayed on the dirty list")
			}
			for i, g := range op.dirty[1:] {
				if g == nil || g.has(dead) {
					t.Fatalf("slot %d: a live group's slot was cleared or holds a dead group", i+1)
				}
			}
		}
		if room == 0 {
			// The flush is queued behind the window's finals: its list
			// still holds the group when the group finalizes.
			if err := op.EmitEarly(); err != nil {
				t.Fatal(err)
			}
		}
		for op.Queued() {
			op.SetRoom(1)
			if err := op.Drain(); err != nil {
				t.Fatal(err)
			}
		}
		op.SetRoom(1 << 20)
		if err := op.EmitEarly(); err != nil {
			t.Fatal(err)
		}
		if err := op.Finish(); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(got, "\n")
		want := []string{
			`["a", "1969-12-31 23:59:58"]{"k": "a", "n": 1}/true`,
			`["a", "1969-12-31 23:59:59"]{"k": "a", "n": 1}/false`,
			`["a", "1970-01-01 00:00:00"]{"k": "a", "n": 1}/false`,
			`["b", "1970-01-01 00:00:00"]{"k": "b", "n": 1}/false`,
		}
		if !strings.HasPrefix(out, strings.Join(want, "\n")+"\n") {
			t.Fatalf("room %d: got\n%s\nwant it to begin with\n%s", room, out, strings.Join(want, "\n"))
		}
	}
}
