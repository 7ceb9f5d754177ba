package drive

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// dedupEvents are events with copies of a key carrying other values and
// times (so a wrong survivor changes the sums), NULL keys (never copies)
// and events beyond the horizon; ts are their times (µs).
func dedupEvents(n int) (raws [][]byte, ts []int64) {
	rng := rand.New(rand.NewSource(7))
	base := int64(1_700_000_000_000_000)
	for i := 0; i < n; i++ {
		base += int64(rng.Intn(300_000))
		t := base - int64(rng.Intn(6_000_000))
		id := fmt.Sprintf(`"k%d"`, rng.Intn(60))
		if rng.Intn(25) == 0 {
			id = "null"
		}
		tm := time.UnixMicro(t).UTC().Format("2006-01-02 15:04:05.000000")
		raws = append(raws, fmt.Appendf(nil, `{"id":%s,"g":"g%d","v":%d,"ts":"%s"}`, id, rng.Intn(4), rng.Intn(100), tm))
		ts = append(ts, t)
	}
	return raws, ts
}

// The dedup node keeps the same survivors in process (in front of the
// aggregate, on one thread and on several) and as the Kafka dedup stage
// runs it (HostDedup, its survivors then aggregated by a driver of the
// query without its dedup, the watermark moved by the host): the same
// records, counters, dedup-late events and checkpoint entries; and a
// driver restored halfway goes on as the one that was not stopped.
func TestDedupNodeSameSurvivors(t *testing.T) {
	q := compile(t, `CREATE SOURCE ev (id VARCHAR, g VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (dedup_key = 'id', dedup_within = '4 seconds');
SELECT g, count(*) AS n, sum(v) AS s FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '2' SECOND)`)
	raws, times := dedupEvents(4000)
	record := func(out *[]string) func(*changelog.Record) error {
		return func(r *changelog.Record) error {
			*out = append(*out, fmt.Sprintf("%s=%s", r.Key, r.Value))
			return nil
		}
	}
	dedupLate := func(out *[]string) func(*exec.LateEvent) {
		return func(ev *exec.LateEvent) {
			if ev.Source.Dedup != nil && bytes.Contains([]byte(ev.Reason), []byte("dedup")) {
				*out = append(*out, fmt.Sprintf("%s at %d", ev.Event, ev.Watermark))
			}
		}
	}

	// As the Kafka dedup stage runs it: the host moves the watermark by
	// the events' times, the survivors go on to the aggregate.
	var hostRecs, hostLate []string
	h, err := NewHostDedup(q, Config{Late: dedupLate(&hostLate)})
	if err != nil {
		t.Fatal(err)
	}
	agg, err := New(exec.NoDedup(q), Config{Emit: record(&hostRecs), ExternalWatermark: true})
	if err != nil {
		t.Fatal(err)
	}
	wm := int64(-1 << 63)
	for i, raw := range raws {
		_, routed, err := h.Push(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		if routed {
			if err := agg.Push(raw); err != nil {
				t.Fatal(err)
			}
		}
		wm = max(wm, times[i]-1_000_000)
		h.AdvanceWatermark(wm)
		if err := agg.AdvanceWatermark(wm); err != nil {
			t.Fatal(err)
		}
	}
	if err := agg.Close(); err != nil {
		t.Fatal(err)
	}
	dups, late, keys, bytesNow := h.Stats()
	if dups == 0 || late == 0 || len(hostLate) != int(late) {
		t.Fatalf("the events hold %d copies and %d events beyond the horizon (%d reported): the test needs both", dups, late, len(hostLate))
	}
	hostEntries := dedupEntries(t, h.Checkpoint)

	for _, threads := range []int{1, 3} {
		var recs, lates []string
		cfg := Config{Emit: record(&recs), Threads: threads}
		if threads == 1 {
			cfg.Late = dedupLate(&lates) // a late hook keeps a driver on one thread
		}
		d, err := New(q, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var saved [][2][]byte
		half, at := len(raws)/2, 0
		for i, raw := range raws {
			if i == half {
				if err := d.Checkpoint(true, nil, func(k, v []byte) error {
					saved = append(saved, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				at = len(recs) // a checkpoint delivers every record before it
			}
			if err := d.Push(raw); err != nil {
				t.Fatal(err)
			}
		}
		s := d.Stats()
		if s.Duplicates != dups || s.DedupLate != late || s.DedupKeys != keys || s.DedupBytes != bytesNow {
			t.Errorf("threads %d: duplicates %d, dedup-late %d, keys %d, bytes %d in process; %d, %d, %d, %d through the stage",
				threads, s.Duplicates, s.DedupLate, s.DedupKeys, s.DedupBytes, dups, late, keys, bytesNow)
		}
		if got := dedupEntries(t, func(full bool, pos []byte, put func(k, v []byte) error) error {
			return d.Checkpoint(full, pos, put)
		}); !slices.Equal(got, hostEntries) {
			t.Errorf("threads %d: %d dedup entries in process, %d through the stage, or other ones", threads, len(got), len(hostEntries))
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(recs, hostRecs) {
			t.Errorf("threads %d: %d records in process, %d through the stage, or other ones", threads, len(recs), len(hostRecs))
		}
		if threads == 1 && !slices.Equal(lates, hostLate) {
			t.Errorf("%d dedup-late events in process, %d through the stage, or other ones", len(lates), len(hostLate))
		}
		restoredRun(t, q, cfg, saved, raws[half:], s, &recs, at)
	}
}

// restoredRun restores a driver of q from saved, pushes raws and closes
// it: its counters must be want's and its records those of all after the
// first at (its Emit appends to all, which is cleared first).
func restoredRun(t *testing.T, q *plan.Query, cfg Config, saved [][2][]byte, raws [][]byte, want exec.Stats, all *[]string, at int) {
	t.Helper()
	whole := *all
	*all = nil
	r, err := New(q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range saved {
		if _, err := r.Restore(e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	r.FinishRestore()
	for _, raw := range raws {
		if err := r.Push(raw); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Stats()
	if s.Rows != want.Rows || s.Duplicates != want.Duplicates || s.DedupLate != want.DedupLate || s.DedupKeys != want.DedupKeys || s.DedupBytes != want.DedupBytes {
		t.Errorf("threads %d, restored halfway: rows %d, duplicates %d, dedup-late %d, keys %d, bytes %d; not stopped %d, %d, %d, %d, %d",
			cfg.Threads, s.Rows, s.Duplicates, s.DedupLate, s.DedupKeys, s.DedupBytes, want.Rows, want.Duplicates, want.DedupLate, want.DedupKeys, want.DedupBytes)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*all, whole[at:]) {
		t.Errorf("threads %d, restored halfway: %d records, not the last %d of a run not stopped", cfg.Threads, len(*all), len(whole)-at)
	}
}

// dedupEntries returns the dedup key entries of a full checkpoint,
// sorted.
func dedupEntries(t *testing.T, ckpt func(full bool, pos []byte, put func(k, v []byte) error) error) []string {
	t.Helper()
	var out []string
	if err := ckpt(true, nil, func(k, v []byte) error {
		if k[0] == 'd' {
			out = append(out, fmt.Sprintf("%x=%x", k, v))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
