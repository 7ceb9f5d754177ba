package land

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

// refuser is a store that refuses, as a whole and naming no record, every
// Land call holding a record of a refused group; otherwise it lands.
type refuser struct {
	mu      sync.Mutex
	refused map[string]bool
	landed  map[string]int
	calls   int
}

func (s *refuser) Land(_ context.Context, recs []changelog.Record) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	for _, r := range recs {
		if s.refused[string(r.Key)] {
			return Result{}, fmt.Errorf("%w: the test store refuses a row", ErrRefused)
		}
	}
	for _, r := range recs {
		s.landed[string(r.Key)]++
	}
	return Result{Landed: len(recs)}, nil
}
func (s *refuser) Get(context.Context, Ref) (Stored, error) { return Stored{}, ErrNotFound }
func (s *refuser) Mode() Mode                               { return Latest }
func (s *refuser) Close() error                             { return nil }

func numbered(n int) []changelog.Record {
	out := make([]changelog.Record, n)
	for i := range out {
		out[i] = rec("q", fmt.Sprint(i), 0, 1)
	}
	return out
}

// TestRunIsolatesRefusedRecords: a store that refuses a batch as a whole
// because of some of its records: the good records land, each refused one
// is handed over once with its position, and the batch commits; the calls
// stay logarithmic per refused record.
func TestRunIsolatesRefusedRecords(t *testing.T) {
	recs := numbered(1000)
	s := &refuser{refused: map[string]bool{}, landed: map[string]int{}}
	bad := map[int]bool{0: true, 417: true, 418: true, 999: true}
	for i := range bad {
		s.refused[string(recs[i].Key)] = true
	}
	src := NewSliceSource(recs)
	var c Counters
	var got []int
	err := Run(context.Background(), src, s, RunOptions{Counters: &c, OnBadRecord: func(b BadRecord) error {
		if !errors.Is(b.Err, ErrRefused) || !bad[b.Index] {
			t.Errorf("handed record %d: %v", b.Index, b.Err)
		}
		got = append(got, b.Index)
		return nil
	}})
	if err != nil || src.Committed() != 1 {
		t.Fatalf("Run = %v, committed %d", err, src.Committed())
	}
	if len(got) != len(bad) || c.Rejected.Load() != int64(len(bad)) || c.Landed.Load() != 996 || c.StoreErrors.Load() != 0 {
		t.Fatalf("handed %v, rejected %d, landed %d, store errors %d", got, c.Rejected.Load(), c.Landed.Load(), c.StoreErrors.Load())
	}
	for i, r := range recs {
		if n := s.landed[string(r.Key)]; n != 1 && !bad[i] {
			t.Fatalf("record %d landed %d times", i, n)
		}
	}
	if s.calls > 4*2*11 {
		t.Fatalf("%d Land calls for 4 refused records of 1000", s.calls)
	}

	// Without OnBadRecord, Run stops at the first refused record, named.
	s = &refuser{refused: map[string]bool{string(recs[417].Key): true}, landed: map[string]int{}}
	src = NewSliceSource(recs)
	err = Run(context.Background(), whereSource{src}, s, RunOptions{})
	var re *RecordError
	if !errors.As(err, &re) || re.Index != 417 || !strings.Contains(err.Error(), "offset 417") || src.Committed() != 0 {
		t.Fatalf("Run = %v, committed %d; want a *RecordError at 417 naming its offset", err, src.Committed())
	}
}

// whereSource names each record's origin as a Kafka source does.
type whereSource struct{ *SliceSource }

func (s whereSource) Next(ctx context.Context) (*Batch, error) {
	b, err := s.SliceSource.Next(ctx)
	if b != nil {
		b.Where = func(i int) string { return fmt.Sprintf("topic t partition 0 offset %d", i) }
	}
	return b, err
}

// TestRunBadRecordsOfPrepare: every bad record of a batch is found in one
// pass; a failing OnBadRecord and a mode mismatch stop Run.
func TestRunBadRecordsOfPrepare(t *testing.T) {
	recs := numbered(6)
	recs[1].Key = []byte(`{"not":"an array"}`)
	recs[4].Meta.Query = "a:b"
	m := &prepLander{}
	src := NewSliceSource(recs)
	var c Counters
	var got []int
	err := Run(context.Background(), src, m, RunOptions{Counters: &c, OnBadRecord: func(b BadRecord) error {
		got = append(got, b.Index)
		return nil
	}})
	if err != nil || fmt.Sprint(got) != "[1 4]" || c.Landed.Load() != 4 || m.calls != 2 {
		t.Fatalf("Run = %v, handed %v, landed %d in %d calls", err, got, c.Landed.Load(), m.calls)
	}

	stop := errors.New("dead letter full")
	err = Run(context.Background(), NewSliceSource(recs), &prepLander{}, RunOptions{OnBadRecord: func(BadRecord) error { return stop }})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("a failing OnBadRecord: Run = %v", err)
	}

	unwindowed := numbered(2)
	unwindowed[1].Meta.Windowed = false
	err = Run(context.Background(), NewSliceSource(unwindowed), &prepLander{}, RunOptions{
		MinBackoff: time.Millisecond, OnBadRecord: func(BadRecord) error { return nil }})
	if !errors.Is(err, ErrModeMismatch) {
		t.Fatalf("a record of another mode: Run = %v, want it stopped", err)
	}
}

// prepLander prepares its batches as every lander does, and lands them.
type prepLander struct{ calls int }

func (p *prepLander) Land(_ context.Context, recs []changelog.Record) (Result, error) {
	p.calls++
	items, res, err := PrepareBatch(Latest, "", recs)
	if err != nil {
		return Result{}, err
	}
	return res.Add(Result{Landed: len(items)}), nil
}
func (p *prepLander) Get(context.Context, Ref) (Stored, error) { return Stored{}, ErrNotFound }
func (p *prepLander) Mode() Mode                               { return Latest }
func (p *prepLander) Close() error                             { return nil }

// picky refuses the records of its refused set, either naming them (as a
// lander's own checks do) or refusing any call that holds one, as a whole
// (as a server's statement does).
type picky struct {
	mu      sync.Mutex // Run lands up to MaxInFlight batches at once
	refused map[string]bool
	named   bool
	landed  map[string]int
}

func (p *picky) Land(_ context.Context, recs []changelog.Record) (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var bad RecordErrors
	for i, r := range recs {
		if p.refused[string(r.Key)] {
			bad = append(bad, &RecordError{Index: i, Err: fmt.Errorf("%w: test limit", ErrRefused)})
		}
	}
	switch {
	case len(bad) > 0 && p.named:
		return Result{}, bad
	case len(bad) > 0:
		return Result{}, fmt.Errorf("%w: a statement of %d rows", ErrRefused, len(recs))
	}
	for _, r := range recs {
		p.landed[string(r.Key)]++
	}
	return Result{Landed: len(recs)}, nil
}
func (p *picky) Get(context.Context, Ref) (Stored, error) { return Stored{}, ErrNotFound }
func (p *picky) Mode() Mode                               { return Latest }
func (p *picky) Close() error                             { return nil }

// TestRunIsolationProperty: over random batches with random refused
// records, refused by name or as a whole, every good record lands exactly
// once, every refused one is handed over exactly once, and every batch
// commits.
func TestRunIsolationProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for trial := range 300 {
		recs := numbered(1 + r.IntN(300))
		p := &picky{refused: map[string]bool{}, named: r.IntN(2) == 0, landed: map[string]int{}}
		share := r.Float64() * r.Float64()
		for _, rec := range recs {
			if r.Float64() < share {
				p.refused[string(rec.Key)] = true
			}
		}
		var batches [][]changelog.Record
		for rest := recs; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(64))
			batches = append(batches, rest[:n])
			rest = rest[n:]
		}
		src := NewSliceSource(batches...)
		handed := map[string]int{}
		var mu sync.Mutex
		err := Run(context.Background(), src, p, RunOptions{MaxInFlight: 1 + r.IntN(3), OnBadRecord: func(b BadRecord) error {
			mu.Lock()
			handed[string(b.Record.Key)]++
			mu.Unlock()
			return nil
		}})
		if err != nil || src.Committed() != len(batches) {
			t.Fatalf("trial %d (seed %d): Run = %v, %d of %d batches committed", trial, seed, err, src.Committed(), len(batches))
		}
		for _, rec := range recs {
			k := string(rec.Key)
			if want := map[bool][2]int{true: {0, 1}, false: {1, 0}}[p.refused[k]]; [2]int{p.landed[k], handed[k]} != want {
				t.Fatalf("trial %d (seed %d): record %s landed %d, handed over %d; refused %v", trial, seed, k, p.landed[k], handed[k], p.refused[k])
			}
		}
	}
}
