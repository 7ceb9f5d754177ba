package exec

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

func ijoinSplitQuery(t *testing.T) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(`CREATE SOURCE l (k VARCHAR, d DOUBLE, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, d DOUBLE, y BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT l.k, sum(l.x * r.y) AS s FROM l JOIN r ON l.k = r.k AND l.d = r.d AND r.ts BETWEEN l.ts - INTERVAL '2' SECOND AND l.ts + INTERVAL '3' SECOND GROUP BY l.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

// splitJoin is a join split over instances as a host runs it: the
// coordinator admits, the key's instance joins, watermarks go to all.
type splitJoin struct {
	c     *IntervalJoin
	parts []*IntervalJoin
	seed  maphash.Seed
}

func (s *splitJoin) pick(key []byte) int {
	return int(maphash.Bytes(s.seed, key) % uint64(len(s.parts)))
}

// push returns the joined rows' (x, y) as one join would order them.
func (s *splitJoin) push(side int, row []types.Value) (out []int64, err error) {
	key, seq, late, err := s.c.Admit(side, row)
	if err != nil || late || key == nil {
		return nil, err
	}
	p := s.parts[s.pick(key)]
	p.PushAt(side, slices.Clone(row), key, seq)
	return xy(p), nil
}

// xy drains the joined rows: x*1000+y of each.
func xy(j *IntervalJoin) []int64 {
	var out []int64
	for j.Pending() > 0 {
		r := j.Take()
		out = append(out, r[2].I*1000+r[6].I)
	}
	return out
}

func (s *splitJoin) advance(side int, wm int64) {
	s.c.Advance(side, wm)
	for _, p := range s.parts {
		p.Advance(side, wm)
	}
}

// TestIntervalJoinSplit: a join split by key over 1 to 4 instances makes
// the joined rows of one join, in its order, and the same counters and
// checkpoint entry, byte for byte, with join keys that are NULL, NaN,
// -0.0 and +0.0, and strings with escapes; an entry restored into a split
// join of another width (SplitHeld) goes on as the one join does.
func TestIntervalJoinSplit(t *testing.T) {
	q := ijoinSplitQuery(t)
	keys := []string{"a", "b\"c", "d\\e", "é\n", ""}
	ds := []types.Value{types.Float(math.NaN()), types.Float(0), types.Float(math.Copysign(0, -1)), types.Float(1.5), {Null: true, Kind: types.KindDouble}}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		one, err := NewIntervalJoin(q, true)
		if err != nil {
			t.Fatal(err)
		}
		newSplit := func(n int) *splitJoin {
			s := &splitJoin{seed: maphash.MakeSeed()}
			if s.c, err = NewIntervalCoordinator(q); err != nil {
				t.Fatal(err)
			}
			for range n {
				p, _ := NewIntervalJoin(q, true)
				s.parts = append(s.parts, p)
			}
			return s
		}
		sp := newSplit(1 + int(seed%4))
		var wm [2]int64
		for i := range 600 {
			side := r.IntN(2)
			if r.IntN(10) == 0 {
				wm[side] += int64(r.IntN(1500)) * 1000
				one.Advance(side, wm[side])
				sp.advance(side, wm[side])
				continue
			}
			ts := wm[side] + int64(r.IntN(4000)-1000)*1000
			row := []types.Value{types.Str(keys[r.IntN(len(keys))]), ds[r.IntN(len(ds))], types.Big(int64(i)), types.TS(ts)}
			late, err := one.Push(side, row)
			var want []int64
			if !late && err == nil {
				want = xy(one)
			}
			got, err2 := sp.push(side, row)
			if !errors.Is(err2, err) || !slices.Equal(got, want) {
				t.Fatalf("seed %d row %d: split joined %v (%v), one join %v (%v)", seed, i, got, err2, want, err)
			}
			if i == 300 {
				// A checkpoint of the split join restores into one of
				// another width.
				st := sp.c.AppendSplitState(nil, sp.parts)
				if want := one.AppendState(nil); !bytes.Equal(st, want) {
					t.Fatalf("seed %d: the split join's entry differs from the one join's", seed)
				}
				sp = newSplit(1 + int((seed+1)%4))
				if err := sp.c.RestoreState(st); err != nil {
					t.Fatal(err)
				}
				sp.c.FinishEntries()
				sp.c.SplitHeld(sp.parts, sp.pick)
			}
		}
		a, b := one.Stats(), sp.c.Stats()
		if a.Matches < 50 || a.NullKeys == 0 {
			t.Fatalf("seed %d: %d matches, %d NULL keys: the input tries too little", seed, a.Matches, a.NullKeys)
		}
		for _, p := range sp.parts {
			b.Matches += p.Stats().Matches
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seed %d: split join's counters %+v, one join's %+v", seed, b, a)
		}
		if st, want := sp.c.AppendSplitState(nil, sp.parts), one.AppendState(nil); !bytes.Equal(st, want) {
			t.Fatalf("seed %d: the split join's entry differs from the one join's at the end", seed)
		}
	}
}
