package metamorphic

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// Reference runs c unbatched in process (one event per push, records to a
// callback): the run every other path is compared with.
func Reference(c *Case) (*Result, Finals, error) {
	res, err := RunInProcess(c, Config{Batch: 1, Callback: true})
	if err != nil {
		return nil, nil, err
	}
	f, err := Check(res, c)
	if err != nil {
		return nil, nil, err
	}
	return res, f, nil
}

// Configs draws the in-process configurations of one case: batch sizes 1,
// 7 and 1000 pulled with Next under a random MaxPendingRecords, one with a
// callback, and restore points at random events (full and incremental
// checkpoints; and crashes a few events after a checkpoint, replayed);
// and on 2 to 4 threads, pushed or fed in blocks of 1, 7, 4096 events.
func Configs(r *rand.Rand, events int) []Config {
	pending := func() int { return []int{1, 2, 3, 7, 64, 1 + r.IntN(500)}[r.IntN(6)] }
	restores := func() []int {
		var at []int
		for i := 0; i < events; i++ {
			if r.IntN(events/3+1) == 0 {
				at = append(at, i)
			}
		}
		if len(at) == 0 && events > 1 {
			at = []int{1 + r.IntN(events-1)}
		}
		return at
	}
	return []Config{
		{Batch: 1, MaxPending: pending()},
		{Batch: 7, MaxPending: pending()},
		{Batch: 1000, MaxPending: pending()},
		{Batch: 7, Callback: true},
		{Batch: 1 + r.IntN(50), MaxPending: pending(), RestoreAt: restores()},
		{Batch: 1 + r.IntN(50), MaxPending: pending(), RestoreAt: restores(), Incremental: true},
		{Batch: 1 + r.IntN(50), Callback: true, RestoreAt: restores(), Incremental: r.IntN(2) == 0},
		{Batch: 1 + r.IntN(50), MaxPending: pending(), RestoreAt: restores(), Incremental: r.IntN(2) == 0, Crash: true},
		{Batch: 1 + r.IntN(50), Callback: true, RestoreAt: restores(), Incremental: r.IntN(2) == 0, Crash: true},
		{Batch: 7, Callback: true, Threads: 2 + r.IntN(3), FixedClock: true},
		{Batch: 1 + r.IntN(50), Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, RestoreAt: restores(), Incremental: r.IntN(2) == 0},
		{Batch: 1 + r.IntN(50), Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, RestoreAt: restores(), Crash: true},
		// Fed in blocks decoded by the threads: blocks of 1, 7 and 4096 events.
		{Batch: 7, Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, Feed: 1},
		{Batch: 1 + r.IntN(50), Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, Feed: 7},
		{Batch: 1000, Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, Feed: 4096},
		{Batch: 1 + r.IntN(50), Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, Feed: 7, RestoreAt: restores(), Incremental: r.IntN(2) == 0},
		{Batch: 1 + r.IntN(50), Callback: true, Threads: 2 + r.IntN(3), FixedClock: true, Feed: 1 + r.IntN(20), RestoreAt: restores(), Crash: true},
	}
}

// SameChangelog checks that a run on several threads gave exactly the
// records, in the order, of the same configuration on one thread (the
// property that output never depends on threading): key and value bytes,
// revision and finality, record by record.
func SameChangelog(one, many *Result) error {
	n := min(len(one.Recs), len(many.Recs))
	for i := 0; i < n; i++ {
		a, b := one.Recs[i], many.Recs[i]
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || a.Final != b.Final || a.Revision != b.Revision {
			return fmt.Errorf("record %d of %d differs from one thread's:\n one: %s %s final=%v rev=%d\nmany: %s %s final=%v rev=%d",
				i, len(one.Recs), a.Key, a.Value, a.Final, a.Revision, b.Key, b.Value, b.Final, b.Revision)
		}
	}
	if len(one.Recs) != len(many.Recs) {
		return fmt.Errorf("%d records, one thread %d", len(many.Recs), len(one.Recs))
	}
	return nil
}

// Compare checks one path's result against the reference's finals and
// counters, and the path's own invariants.
func Compare(c *Case, ref *Result, want Finals, got *Result) error {
	f, err := Check(got, c)
	if err != nil {
		return err
	}
	if d := Diff(want, f); d != "" {
		return fmt.Errorf("%s: the final changelog differs from the unbatched in-process run: %s", got.Path, d)
	}
	if got.Malformed >= 0 && got.Malformed != ref.Malformed {
		return fmt.Errorf("%s: %d malformed events, the unbatched in-process run %d", got.Path, got.Malformed, ref.Malformed)
	}
	if got.TableLate >= 0 && got.TableLate != ref.TableLate {
		return fmt.Errorf("%s: %d late table rows, the unbatched in-process run %d", got.Path, got.TableLate, ref.TableLate)
	}
	if got.Duplicates >= 0 && got.Duplicates != ref.Duplicates {
		return fmt.Errorf("%s: %d duplicates dropped, the unbatched in-process run %d", got.Path, got.Duplicates, ref.Duplicates)
	}
	return nil
}
