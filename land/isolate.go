package land

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

func landBatch(ctx context.Context, l Lander, b *Batch, o RunOptions) (BatchStats, error) {
	st := BatchStats{Records: len(b.Records), Skipped: b.Skipped, Lag: b.Lag}
	pos := make([]int, len(b.Records))
	for i := range pos {
		pos[i] = i
	}
	x := &batchLanding{l: l, b: b, o: o, st: &st}
	err := x.land(ctx, pos)
	return st, err
}

// batchLanding lands one batch, isolating the records that can never land.
type batchLanding struct {
	l  Lander
	b  *Batch
	o  RunOptions
	st *BatchStats
}

// land lands the records of the batch at positions pos. A record the
// lander or the store names as bad is left out (or stops the batch) and
// the rest is landed again; a permanent failure that names no record is
// halved until the record is alone. Landing part of a batch twice is
// harmless: the guard makes it a duplicate.
func (x *batchLanding) land(ctx context.Context, pos []int) error {
	for len(pos) > 0 {
		err := x.attempt(ctx, pos)
		if err == nil {
			return nil
		}
		if !Permanent(err) {
			return err
		}
		bad := badIndexes(err, len(pos))
		if len(bad) == 0 {
			if len(pos) == 1 {
				return x.reject(pos[0], err)
			}
			h := len(pos) / 2
			if err := x.land(ctx, pos[:h]); err != nil {
				return err
			}
			pos = pos[h:]
			continue
		}
		rest := make([]int, 0, len(pos)-len(bad))
		for i, p := range pos {
			reason, isBad := bad[i]
			if !isBad {
				rest = append(rest, p)
			} else if err := x.reject(p, reason); err != nil {
				return err
			}
		}
		pos = rest
	}
	return nil
}

// attempt lands the records at pos, retrying what is not permanent.
func (x *batchLanding) attempt(ctx context.Context, pos []int) error {
	recs := x.b.Records
	if len(pos) != len(recs) {
		recs = make([]changelog.Record, len(pos))
		for i, p := range pos {
			recs[i] = x.b.Records[p]
		}
	}
	var failed *atomic.Int64
	if x.o.Counters != nil {
		failed = &x.o.Counters.StoreErrors
	}
	var res Result
	var took time.Duration
	retries, err := retry(ctx, x.o, "land", failed, func() error {
		start := time.Now()
		var err error
		res, err = x.l.Land(ctx, recs)
		took = time.Since(start)
		return err
	})
	x.st.Retries += retries
	if err == nil {
		x.st.Result = x.st.Result.Add(res)
		x.st.StoreTime += took
	}
	return err
}

// badIndexes maps the records err names (positions in a Land call of n
// records) to their reasons.
func badIndexes(err error, n int) map[int]error {
	var many RecordErrors
	var one *RecordError
	switch {
	case errors.As(err, &many):
	case errors.As(err, &one):
		many = RecordErrors{one}
	}
	out := make(map[int]error, len(many))
	for _, re := range many {
		if re.Index >= 0 && re.Index < n {
			out[re.Index] = re.Err
		}
	}
	return out
}

// reject sets the record at batch position i aside, or returns the error
// that stops Run.
func (x *batchLanding) reject(i int, reason error) error {
	re := &RecordError{Index: i, Err: reason}
	if x.b.Where != nil {
		re.Where = x.b.Where(i)
	}
	if x.o.OnBadRecord == nil || errors.Is(reason, ErrModeMismatch) {
		return re
	}
	br := BadRecord{Batch: x.b, Index: i, Where: re.Where, Record: x.b.Records[i], Err: reason}
	if err := x.o.OnBadRecord(br); err != nil {
		return fmt.Errorf("land: setting aside %v: %w", re, err)
	}
	x.o.Logger.Error("land: left out a record that cannot land", "record", re.Where, "err", reason)
	x.st.Rejected++
	return nil
}
