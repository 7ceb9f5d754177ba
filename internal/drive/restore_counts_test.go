package drive

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestRestoreRefusesNegativeDriverCounts: the counters a driver keeps in
// its checkpoint (the events and malformed events in the meta entry's
// position, a join's input counters in its entry) are never negative; a
// crafted entry holding one is refused, one thread or several (it was
// restored as a negative count).
func TestRestoreRefusesNegativeDriverCounts(t *testing.T) {
	nop := func(*changelog.Record) error { return nil }
	meta := func(events, bad int64) []byte {
		pos := binary.AppendVarint(binary.AppendVarint(nil, events), bad)
		return exec.AppendMeta(nil, exec.Meta{Position: append(pos, "pos"...)})
	}
	q := compile(t, testSQL)
	for _, threads := range []int{1, 3} {
		for _, c := range [][2]int64{{-1, 0}, {5, -2}} {
			d, err := New(q, Config{Emit: nop, Threads: threads, CountsInCheckpoint: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Restore([]byte(exec.MetaKey), meta(c[0], c[1])); !errors.Is(err, exec.ErrBadState) {
				t.Errorf("%d threads, counts %v: got %v, want an ErrBadState error", threads, c, err)
			}
		}
		d, _ := New(q, Config{Emit: nop, Threads: threads, CountsInCheckpoint: true})
		if pos, err := d.Restore([]byte(exec.MetaKey), meta(5, 1)); err != nil || string(pos) != "pos" {
			t.Fatalf("%d threads: the valid meta entry: %q, %v", threads, pos, err)
		}
	}
	for _, sql := range []string{
		`CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND);
CREATE TABLE v (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '2' SECOND);
SELECT s.k, sum(v.x) FROM s JOIN v FOR SYSTEM_TIME AS OF s.ts ON s.k = v.k GROUP BY s.k`,
		`CREATE SOURCE l (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, y BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT l.k, sum(l.x * r.y) AS s FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '2' SECOND AND l.ts + INTERVAL '3' SECOND GROUP BY l.k`,
	} {
		prog, err := plan.Compile(sql, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var entry []byte
		d, err := New(prog.Queries[0], Config{Emit: nop})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Checkpoint(true, nil, func(k, v []byte) error {
			if string(k) == exec.JoinStateKey {
				entry = append([]byte(nil), v...)
			}
			return nil
		}); err != nil || entry == nil {
			t.Fatalf("no join entry (%v)", err)
		}
		r, _ := New(prog.Queries[0], Config{Emit: nop})
		if _, err := r.Restore([]byte(exec.JoinStateKey), entry); err != nil {
			t.Fatalf("the join's own entry: %v", err)
		}
		// The first counter (records) made -1: one byte, as 0 was.
		if entry[0] != 0 {
			t.Fatalf("records counter %d, want 0", entry[0])
		}
		crafted := append([]byte{1}, entry[1:]...)
		r, _ = New(prog.Queries[0], Config{Emit: nop})
		if _, err := r.Restore([]byte(exec.JoinStateKey), crafted); !errors.Is(err, exec.ErrBadState) {
			t.Errorf("a join's negative record count: got %v, want an ErrBadState error", err)
		}
	}
}
