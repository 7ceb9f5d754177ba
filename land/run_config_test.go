package land

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

// failing is a store whose Land fails with err for its first fails calls
// (every call when fails is negative), then lands.
type failing struct {
	err   error
	fails int64
	calls atomic.Int64
}

func (s *failing) Land(_ context.Context, recs []changelog.Record) (Result, error) {
	if n := s.calls.Add(1); s.fails < 0 || n <= s.fails {
		return Result{}, s.err
	}
	return Result{Landed: len(recs)}, nil
}
func (s *failing) Get(context.Context, Ref) (Stored, error) { return Stored{}, ErrNotFound }
func (s *failing) Mode() Mode                               { return Latest }
func (s *failing) Close() error                             { return nil }

// TestRunStopsOnConfigError: a configuration error stops Run at the first
// attempt, whatever the batches in flight, blames no record (OnBadRecord
// is not called, nothing is rejected or committed) and is returned as is.
func TestRunStopsOnConfigError(t *testing.T) {
	for _, inFlight := range []int{1, 4} {
		s := &failing{err: fmt.Errorf("%w: the test store has no table t; check: the table", ErrConfig), fails: -1}
		src := NewSliceSource(numbered(10), numbered(10), numbered(10), numbered(10), numbered(10))
		var c Counters
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := Run(ctx, src, s, RunOptions{MaxInFlight: inFlight, Counters: &c, OnBadRecord: func(b BadRecord) error {
			t.Errorf("record %d set aside: %v", b.Index, b.Err)
			return nil
		}})
		cancel()
		if !errors.Is(err, ErrConfig) || !Config(err) || Permanent(err) {
			t.Fatalf("in flight %d: Run = %v, want the configuration error", inFlight, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("in flight %d: took %v to stop", inFlight, took)
		}
		if n := s.calls.Load(); n > int64(inFlight) {
			t.Errorf("in flight %d: %d Land calls, want at most one a batch in flight", inFlight, n)
		}
		if src.Committed() != 0 || c.Rejected.Load() != 0 || c.Retried.Load() != 0 || c.StoreErrors.Load() != 0 {
			t.Errorf("in flight %d: committed %d, rejected %d, retried %d, store errors %d", inFlight, src.Committed(),
				c.Rejected.Load(), c.Retried.Load(), c.StoreErrors.Load())
		}
	}
}

// TestRunRetriesOutage: an error of no class (an outage) is still retried
// until the store answers, with nothing lost.
func TestRunRetriesOutage(t *testing.T) {
	s := &failing{err: errors.New("dial tcp: connection refused"), fails: 5}
	src := NewSliceSource(numbered(10))
	var c Counters
	err := Run(context.Background(), src, s, RunOptions{Counters: &c, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil || src.Committed() != 1 || c.Landed.Load() != 10 || c.Retried.Load() != 5 {
		t.Fatalf("Run = %v, committed %d, landed %d, retried %d", err, src.Committed(), c.Landed.Load(), c.Retried.Load())
	}
}
