package ubik_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/internal/drive"
)

// TestRestoreRefusesWhatNoCheckpointHolds: a host's store holds one
// value per key and every checkpoint writes the meta entry, so a restore
// that loads a key twice, or entries without the meta entry, is refused
// with ErrBadState naming the problem (both were accepted: the first as
// a group counted twice, the second as a state with the clocks and
// counters of a fresh query). What a checkpoint holds, in any order and
// with deletes, still restores.
func TestRestoreRefusesWhatNoCheckpointHolds(t *testing.T) {
	const sql = `CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl');
SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`
	eng, _ := ubik.Open(ubik.DefaultOptions())
	q, err := eng.Start(sql, ubik.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := q.Push([]byte(fmt.Sprintf(`{"k":"k%d","ts":"2024-01-01 00:00:%02d"}`, i%3, i/4))); err != nil {
			t.Fatal(err)
		}
	}
	type entry struct{ k, v string }
	var entries []entry
	if err := q.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
		entries = append(entries, entry{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 || entries[len(entries)-1].k != drive.MetaKey {
		t.Fatalf("checkpoint entries %q", entries)
	}
	restore := func(es []entry) error {
		q, err := eng.Start(sql, ubik.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		for _, e := range es {
			if _, err := q.Restore([]byte(e.k), []byte(e.v)); err != nil {
				return err
			}
		}
		return q.FinishRestore()
	}
	// The meta entry first, a delete of an entry not held: still a
	// checkpoint (a compacted store gives entries in its own order).
	reordered := append([]entry{entries[len(entries)-1], {"gxxxxxxxxgone", ""}}, entries[:len(entries)-1]...)
	for name, es := range map[string][]entry{"as written": entries, "reordered, with a delete": reordered} {
		if err := restore(es); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]struct {
		es   []entry
		want string
	}{
		"a group entry twice":    {append([]entry{entries[0]}, entries...), "restored twice"},
		"the meta entry twice":   {append(entries, entries[len(entries)-1]), "restored twice"},
		"no meta entry":          {entries[:len(entries)-1], "no meta entry"},
		"the meta entry deleted": {append(entries[:len(entries)-1:len(entries)-1], entry{drive.MetaKey, ""}), "no meta entry"},
	} {
		err := restore(c.es)
		if !errors.Is(err, drive.ErrBadState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ErrBadState error saying %q", name, err, c.want)
		}
	}
}
