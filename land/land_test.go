package land

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

func TestGroupKey(t *testing.T) {
	cases := []struct {
		key  string
		pos  []int
		want string
	}{
		{`["acme", "2026-07-18 10:00:00"]`, []int{1}, `["acme"]`},
		{`["2026-07-18 10:00:00", "acme", 3]`, []int{0}, `["acme", 3]`},
		{`["a", "w", "b", "e"]`, []int{1, 3}, `["a", "b"]`},
		{`["only window"]`, []int{0}, `[]`},
		{`["x,]\"y", null, 1.5e3, true]`, []int{1}, `["x,]\"y", 1.5e3, true]`},
		{`["a","w"]`, nil, `["a", "w"]`},
	}
	for _, c := range cases {
		got, err := groupKey([]byte(c.key), c.pos)
		if err != nil || string(got) != c.want {
			t.Errorf("groupKey(%s, %v) = %s, %v; want %s", c.key, c.pos, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `{}`, `[`, `["a"`, `["a",]`, `["a" "b"]`, `["a"] x`, `["a`, `[,]`, `[{]`, `["a", [1, 2]]`} { // key cells are scalars
		if _, err := groupKey([]byte(bad), []int{0}); err == nil {
			t.Errorf("groupKey(%q) accepted", bad)
		}
	}
	if _, err := groupKey([]byte(`["a"]`), []int{1}); err == nil {
		t.Error("a position past the last cell was accepted")
	}
}

func FuzzSplitKey(f *testing.F) {
	for _, s := range []string{`["a", 1]`, `[]`, `["\"", null]`, `[[1,[2]], {"a":"]"}]`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		cells, err := splitKey([]byte(key))
		if err != nil {
			return
		}
		// Re-joining the cells gives a key that splits to the same cells.
		all := make([]int, 0)
		g, err := groupKey([]byte(key), all)
		if err != nil {
			t.Fatalf("groupKey of a key that splits: %v", err)
		}
		again, err := splitKey(g)
		if err != nil || len(again) != len(cells) {
			t.Fatalf("%q -> %q: %d cells, then %d (%v)", key, g, len(cells), len(again), err)
		}
		for i := range cells {
			if string(cells[i]) != string(again[i]) {
				t.Fatalf("cell %d: %q then %q", i, cells[i], again[i])
			}
		}
	})
}

func TestVersionCompare(t *testing.T) {
	vs := []Version{{-1, 5}, {0, 0}, {0, 1}, {0, 1 << 63}, {1, 0}, {1 << 62, 1}}
	for i, a := range vs {
		for j, b := range vs {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Continuous, Latest, History} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("newest"); err == nil {
		t.Error("ParseMode accepted newest")
	}
}

func rec(q, group string, ws int64, rev uint64) changelog.Record {
	return changelog.Record{
		Key: fmt.Appendf(nil, `[%q, "w%d"]`, group, ws), Value: []byte(`{}`),
		Meta: changelog.Meta{Query: q, Revision: rev, Windowed: true, WindowStart: ws, WindowEnd: ws + 10, WindowPositions: []int{1}},
	}
}

func TestPrepareBatch(t *testing.T) {
	recs := []changelog.Record{rec("q", "a", 10, 1), rec("q", "a", 20, 1), rec("q", "a", 10, 3), rec("q", "a", 20, 1), rec("p", "a", 0, 1)}
	items, res, err := PrepareBatch(Latest, "", recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || res != (Result{Duplicate: 1, Superseded: 2}) {
		t.Fatalf("latest: %d items, %+v", len(items), res)
	}
	if items[0].Version != (Version{20, 1}) || string(items[0].Group) != `["a"]` || items[0].WindowStart != 0 {
		t.Fatalf("latest kept %+v", items[0])
	}
	items, res, err = PrepareBatch(History, "", recs)
	if err != nil || len(items) != 3 || res != (Result{Duplicate: 1, Superseded: 1}) {
		t.Fatalf("history: %d items, %+v, %v", len(items), res, err)
	}
	if _, _, err := PrepareBatch(Continuous, "", recs); !errors.Is(err, ErrModeMismatch) {
		t.Fatalf("windowed records in continuous mode: %v", err)
	}
	if _, _, err := PrepareBatch(Latest, "other", recs); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("records of another query: %v", err)
	}
	r := rec("", "a", 0, 1)
	if it, err := Prepare(Latest, "ns", r); err != nil || it.Query != "ns" {
		t.Fatalf("a record with no query takes the lander's: %+v, %v", it, err)
	}
	if _, err := Prepare(Latest, "", rec("a:b", "a", 0, 1)); err == nil {
		t.Fatal("a query name with ':' was accepted")
	}
}

// flaky fails its first n calls, then behaves like a lander that counts.
type flaky struct {
	fails   atomic.Int32
	calls   atomic.Int32
	landed  atomic.Int64
	perm    bool
	inside  atomic.Int32
	maxSeen atomic.Int32
}

func (f *flaky) Land(ctx context.Context, recs []changelog.Record) (Result, error) {
	f.calls.Add(1)
	n := f.inside.Add(1)
	defer f.inside.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	if f.fails.Add(-1) >= 0 {
		if f.perm {
			return Result{}, &RecordError{Index: 0, Err: ErrBadRecord}
		}
		return Result{}, errors.New("store down")
	}
	f.landed.Add(int64(len(recs)))
	return Result{Landed: len(recs)}, nil
}
func (f *flaky) Get(context.Context, Ref) (Stored, error) { return Stored{}, ErrNotFound }
func (f *flaky) Mode() Mode                               { return Latest }
func (f *flaky) Close() error                             { return nil }

func batches(n int) [][]changelog.Record {
	var out [][]changelog.Record
	for i := range n {
		out = append(out, []changelog.Record{rec("q", "a", int64(i), 1)})
	}
	return out
}

func TestRunRetriesAndCommitsInOrder(t *testing.T) {
	f := &flaky{}
	f.fails.Store(5)
	src := NewSliceSource(batches(40)...)
	var c Counters
	var stats []BatchStats
	var mu sync.Mutex
	err := Run(context.Background(), src, f, RunOptions{
		MaxInFlight: 4, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Counters: &c,
		OnBatch: func(s BatchStats) { mu.Lock(); stats = append(stats, s); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if src.Committed() != 40 || f.landed.Load() != 40 || c.Landed.Load() != 40 || len(stats) != 40 {
		t.Fatalf("committed %d, landed %d/%d, %d stats", src.Committed(), f.landed.Load(), c.Landed.Load(), len(stats))
	}
	if c.Retried.Load() != 5 {
		t.Fatalf("retried %d, want 5", c.Retried.Load())
	}
	if m := f.maxSeen.Load(); m > 4 {
		t.Fatalf("%d batches in flight, bound 4", m)
	}
}

func TestRunStopsOnPermanentError(t *testing.T) {
	f := &flaky{perm: true}
	f.fails.Store(1)
	src := NewSliceSource(batches(10)...)
	err := Run(context.Background(), src, f, RunOptions{MinBackoff: time.Millisecond})
	var re *RecordError
	if !errors.As(err, &re) {
		t.Fatalf("Run = %v, want the RecordError", err)
	}
	if src.Committed() != 0 {
		t.Fatalf("committed %d batches past a failed one", src.Committed())
	}
}

func TestRunMaxAttempts(t *testing.T) {
	f := &flaky{}
	f.fails.Store(100)
	src := NewSliceSource(batches(3)...)
	err := Run(context.Background(), src, f, RunOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxAttempts: 3})
	if err == nil || f.calls.Load() != 3 || src.Committed() != 0 {
		t.Fatalf("Run = %v after %d calls, %d committed; want a failure after 3 attempts", err, f.calls.Load(), src.Committed())
	}
}

// TestRunOutagePausesUntilCancelled: a store that stays down pauses Run
// (nothing committed, nothing lost) until the context ends.
func TestRunOutagePausesUntilCancelled(t *testing.T) {
	f := &flaky{}
	f.fails.Store(1 << 30)
	src := NewSliceSource(batches(3)...)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := Run(ctx, src, f, RunOptions{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err == nil || errors.Is(err, io.EOF) || src.Committed() != 0 || f.calls.Load() < 3 {
		t.Fatalf("Run = %v, %d committed, %d calls", err, src.Committed(), f.calls.Load())
	}
}

func TestRunOptionsValidation(t *testing.T) {
	for _, o := range []RunOptions{{MaxInFlight: -1}, {MinBackoff: time.Second, MaxBackoff: time.Millisecond}, {MaxAttempts: -2}} {
		if err := Run(context.Background(), NewSliceSource(), &flaky{}, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// commitFlaky is a SliceSource whose commits fail the first n times and
// whose batches report one skipped bad record each.
type commitFlaky struct {
	*SliceSource
	fails atomic.Int32
}

func (s *commitFlaky) Next(ctx context.Context) (*Batch, error) {
	b, err := s.SliceSource.Next(ctx)
	if b != nil {
		b.Skipped = 1
	}
	return b, err
}

func (s *commitFlaky) Commit(ctx context.Context, b *Batch) error {
	if s.fails.Add(-1) >= 0 {
		return errors.New("coordinator away")
	}
	return s.SliceSource.Commit(ctx, b)
}

// TestRunCounters: store errors, commit errors, retries and skipped records
// are counted once each; every committed batch reports its store round trip.
func TestRunCounters(t *testing.T) {
	f := &flaky{}
	f.fails.Store(3)
	src := &commitFlaky{SliceSource: NewSliceSource(batches(10)...)}
	src.fails.Store(2)
	var c Counters
	var stats []BatchStats
	err := Run(context.Background(), src, f, RunOptions{
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Counters: &c,
		OnBatch: func(s BatchStats) { stats = append(stats, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	got := [...]int64{c.Batches.Load(), c.Landed.Load(), c.Skipped.Load(), c.StoreErrors.Load(), c.CommitErrors.Load(), c.Retried.Load()}
	if want := [...]int64{10, 10, 10, 3, 2, 5}; got != want {
		t.Fatalf("batches, landed, skipped, store errors, commit errors, retried = %v, want %v", got, want)
	}
	retries := 0
	for _, s := range stats {
		retries += s.Retries
		// flaky sleeps a millisecond per call: the round trip is measured.
		if s.StoreTime < time.Millisecond || s.StoreTime > s.Elapsed || s.Skipped != 1 {
			t.Fatalf("batch stats %+v", s)
		}
	}
	if retries != 5 {
		t.Fatalf("the batches report %d retries, want 5", retries)
	}

	// A permanent error and the end of the context are not store errors.
	f = &flaky{perm: true}
	f.fails.Store(1)
	var c2 Counters
	if err := Run(context.Background(), NewSliceSource(batches(1)...), f, RunOptions{Counters: &c2}); err == nil {
		t.Fatal("a bad record did not stop Run")
	}
	if c2.StoreErrors.Load() != 0 || c2.Retried.Load() != 0 {
		t.Fatalf("a bad record counted %d store errors, %d retries", c2.StoreErrors.Load(), c2.Retried.Load())
	}
}

// ctxSource is a SliceSource whose commits fail once their context is
// done, as a broker client's do.
type ctxSource struct{ *SliceSource }

func (s ctxSource) Commit(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.SliceSource.Commit(ctx, b)
}

// stopWhileLanding stops the run (stop) while its after-th batch lands:
// the store has the batch when Land returns.
type stopWhileLanding struct {
	flaky
	n, after int
	stop     context.CancelFunc
}

func (l *stopWhileLanding) Land(ctx context.Context, recs []changelog.Record) (Result, error) {
	if l.n++; l.n == l.after {
		l.stop()
	}
	return l.flaky.Land(context.WithoutCancel(ctx), recs)
}

// TestStopCommitsLanded: a stop that comes while a batch lands still
// commits it once the store has acknowledged it, so a clean stop leaves no
// landed batch uncommitted (before, the commit ran under the stopped
// context and failed: the batch replayed after a restart, and a consumer
// group's lag stayed above zero with everything landed).
func TestStopCommitsLanded(t *testing.T) {
	src := ctxSource{NewSliceSource(batches(10)...)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &stopWhileLanding{after: 3, stop: cancel}
	err := Run(ctx, src, l, RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if got := src.Committed(); got != 3 {
		t.Fatalf("%d batches committed, want the 3 landed", got)
	}
}
