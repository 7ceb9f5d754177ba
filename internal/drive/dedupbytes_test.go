package drive

import (
	"fmt"
	"testing"

	"github.com/ubiksql/ubik/changelog"
)

// The dedup keys are live state: state_bytes counts them, on one thread
// and on several, after a restore too, and gives them back when the
// watermark evicts them (10M dedup keys once held 1.23 GB with a
// state_bytes of 0).
func TestStateBytesCountDedup(t *testing.T) {
	q := compile(t, `CREATE SOURCE ev (id VARCHAR, g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (dedup_key = 'id', dedup_within = '1 minute');
SELECT g, count(*) FROM ev GROUP BY g`)
	emit := func(*changelog.Record) error { return nil }
	const keys = 5000
	for _, threads := range []int{1, 3} {
		d, err := New(q, Config{Emit: emit, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < keys; i++ {
			if err := d.Push(fmt.Appendf(nil, `{"id":"event-%06d","g":"g%d","ts":"2026-07-18 10:00:00"}`, i, i%3)); err != nil {
				t.Fatal(err)
			}
		}
		s := d.Stats()
		if s.DedupKeys != keys || s.DedupBytes < keys*12 {
			t.Fatalf("threads %d: %d dedup keys, %d bytes", threads, s.DedupKeys, s.DedupBytes)
		}
		if s.StateBytes < s.DedupBytes || s.StateBytesPeak < s.StateBytes {
			t.Errorf("threads %d: state_bytes %d (peak %d) leaves out the dedup state's %d bytes", threads, s.StateBytes, s.StateBytesPeak, s.DedupBytes)
		}
		var entries [][2][]byte
		if err := d.Checkpoint(true, nil, func(k, v []byte) error {
			entries = append(entries, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		r, err := New(q, Config{Emit: emit, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, err := r.Restore(e[0], e[1]); err != nil {
				t.Fatal(err)
			}
		}
		r.FinishRestore()
		if rs := r.Stats(); rs.StateBytes != s.StateBytes || rs.DedupBytes != s.DedupBytes {
			t.Errorf("threads %d: restored state_bytes %d, dedup %d; checkpointed %d, %d", threads, rs.StateBytes, rs.DedupBytes, s.StateBytes, s.DedupBytes)
		}
		// An hour later every key is past its horizon.
		if err := d.Push([]byte(`{"id":"late","g":"g0","ts":"2026-07-18 11:00:00"}`)); err != nil {
			t.Fatal(err)
		}
		if after := d.Stats(); after.DedupKeys != 1 || after.StateBytes >= s.StateBytes-s.DedupBytes/2 {
			t.Errorf("threads %d: after eviction %d keys, state_bytes %d (was %d with %d dedup bytes)", threads, after.DedupKeys, after.StateBytes, s.StateBytes, s.DedupBytes)
		}
	}
}
