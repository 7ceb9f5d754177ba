package pool

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/land"
)

func TestRunAddsEveryChunk(t *testing.T) {
	for _, tc := range []struct{ n, size, limit int }{{0, 3, 2}, {1, 3, 2}, {3, 3, 2}, {10, 3, 2}, {10, 1, 16}, {1000, 7, 4}} {
		var seen []atomic.Int32
		seen = make([]atomic.Int32, tc.n)
		var running, peak atomic.Int32
		res, err := Run(context.Background(), tc.n, tc.size, tc.limit, "items", func(_ context.Context, lo, hi int) (land.Result, error) {
			if r := running.Add(1); r > peak.Load() {
				peak.Store(r)
			}
			defer running.Add(-1)
			if hi-lo > tc.size || hi <= lo {
				t.Errorf("chunk %d..%d of size %d", lo, hi, tc.size)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
			time.Sleep(100 * time.Microsecond)
			return land.Result{Landed: hi - lo}, nil
		})
		if err != nil || res.Landed != tc.n || res.Total() != tc.n {
			t.Fatalf("%+v: %+v, %v", tc, res, err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("%+v: item %d written %d times", tc, i, seen[i].Load())
			}
		}
		if p := int(peak.Load()); p > tc.limit {
			t.Fatalf("%+v: %d chunks at once, limit %d", tc, p, tc.limit)
		}
	}
}

// TestRunFirstErrorCancels: a failed chunk cancels the running ones, no
// chunk starts after it, the error names it, and Run returns only after
// every write it started returned (no goroutine outlives the call).
func TestRunFirstErrorCancels(t *testing.T) {
	boom := errors.New("store down")
	for range 50 {
		var started, running, late atomic.Int32
		res, err := Run(context.Background(), 100, 10, 3, "records", func(ctx context.Context, lo, hi int) (land.Result, error) {
			started.Add(1)
			if lo >= 30 {
				late.Add(1)
			}
			running.Add(1)
			defer running.Add(-1)
			if lo == 20 {
				return land.Result{Landed: 1}, boom
			}
			select {
			case <-ctx.Done(): // the failure must reach the others
				return land.Result{}, ctx.Err()
			case <-time.After(10 * time.Second):
				return land.Result{}, errors.New("not cancelled")
			}
		})
		if r := running.Load(); r != 0 {
			t.Fatalf("Run returned with %d writes still running", r)
		}
		if !errors.Is(err, boom) || res != (land.Result{}) {
			t.Fatalf("got %+v, %v; want the store error and no counts", res, err)
		}
		if !strings.Contains(err.Error(), "records 20..29 of 100 (chunk 3 of 10)") {
			t.Fatalf("the error does not name the chunk: %v", err)
		}
		// Chunks 1 and 2 block (or never begin), chunk 3 fails; the slots
		// stay full until it does, and nothing starts after it.
		if s, l := started.Load(), late.Load(); s > 3 || l != 0 {
			t.Fatalf("%d chunks started, %d of them after the failure", s, l)
		}
	}
}

func TestRunCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	_, err := Run(ctx, 100, 10, 1, "records", func(ctx context.Context, lo, hi int) (land.Result, error) {
		if calls.Add(1) == 2 {
			cancel()
		}
		return land.Result{Landed: hi - lo}, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled Run returned %v", err)
	}
	if c := calls.Load(); c > 3 {
		t.Fatalf("%d chunks ran after the cancel", c)
	}
	// One chunk: the error is wrapped the same way.
	_, err = Run(context.Background(), 5, 10, 2, "keys", func(context.Context, int, int) (land.Result, error) {
		return land.Result{}, errors.New("x")
	})
	if err == nil || err.Error() != "keys 0..4 of 5 (chunk 1 of 1): x" {
		t.Fatalf("single chunk error: %v", err)
	}
	if _, err := Run(context.Background(), 5, 0, 2, "keys", nil); err == nil {
		t.Fatal("size 0 accepted")
	}
}
