package exec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

func ijoinEntriesQuery(t *testing.T) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(`CREATE SOURCE l (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, y BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT l.k, sum(l.x * r.y) AS s FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '2' SECOND AND l.ts + INTERVAL '3' SECOND GROUP BY l.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

// taken drains the joined rows: x*y of each.
func taken(j *IntervalJoin) []int64 {
	var out []int64
	for j.Pending() > 0 {
		row := j.Take()
		out = append(out, row[1].I*1000+row[4].I)
	}
	return out
}

// TestIntervalJoinEntries: the incremental entries, written at random
// points into a store that keeps the latest value per key (a tombstone
// deletes, as a compacted topic does) and restored into a fresh join,
// give the state of the join that wrote them, byte for byte
// (AppendState), and the same joined rows afterwards; with external
// watermarks moved by the host, as the Kafka pipeline does.
func TestIntervalJoinEntries(t *testing.T) {
	q := ijoinEntriesQuery(t)
	var restores, tombstones, matches int64
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 7))
		mk := func() *IntervalJoin {
			j, err := NewIntervalJoin(q, true)
			if err != nil {
				t.Fatal(err)
			}
			j.SetIncremental()
			return j
		}
		j, ref := mk(), mk() // ref: the same operations, never restored
		store := map[string][]byte{}
		put := func(k, v []byte) error {
			if v == nil {
				if _, ok := store[string(k)]; !ok {
					t.Fatalf("seed %d: a tombstone for %q, never written", seed, k)
				}
				tombstones++
				delete(store, string(k))
			} else {
				store[string(k)] = bytes.Clone(v)
			}
			return nil
		}
		keys := []string{"a", "b", "", "é\"\\"}
		var wm [2]int64
		var got, want []int64
		for step := range 500 {
			now := int64(step) * sec / 4
			switch r.IntN(6) {
			case 0, 1, 2:
				side := r.IntN(2)
				row := []types.Value{types.Str(keys[r.IntN(len(keys))]), types.Big(r.Int64N(100)), types.TS(now + r.Int64N(3*sec))}
				if r.IntN(8) == 0 {
					row[0] = types.Value{Kind: types.KindVarchar, Null: true}
				}
				if _, err := j.Push(side, row); err != nil {
					t.Fatal(err)
				}
				ref.Push(side, row)
				got, want = append(got, taken(j)...), append(want, taken(ref)...)
			case 3:
				side := r.IntN(2)
				wm[side] = max(wm[side], now-r.Int64N(2*sec))
				j.Advance(side, wm[side])
				ref.Advance(side, wm[side])
			case 4, 5:
				if err := j.AppendEntries(r.IntN(10) == 0, []byte(JoinStateKey), []byte{7}, put); err != nil {
					t.Fatal(err)
				}
				names := make([]string, 0, len(store))
				for n := range store {
					names = append(names, n)
				}
				sort.Strings(names)
				if len(names) == 0 || names[0] != JoinStateKey || store[JoinStateKey][0] != 7 {
					t.Fatalf("seed %d step %d: no header entry first: %q", seed, step, names)
				}
				k := mk()
				if err := k.RestoreState(store[JoinStateKey][1:]); err != nil {
					t.Fatal(err)
				}
				for _, n := range names[1:] {
					if !IsIntervalEntry([]byte(n)) {
						t.Fatalf("entry %q", n)
					}
					if err := k.RestoreEntry([]byte(n), store[n]); err != nil {
						t.Fatal(err)
					}
				}
				k.FinishEntries()
				if a, b := k.AppendState(nil), ref.AppendState(nil); !bytes.Equal(a, b) {
					t.Fatalf("seed %d step %d: restored state differs (%d entries)", seed, step, len(names))
				}
				if st := k.Stats(); st.LeftHeld+st.RightHeld != int64(len(names)-1) {
					t.Fatalf("seed %d step %d: %d rows held, %d entries", seed, step, st.LeftHeld+st.RightHeld, len(names)-1)
				}
				j = k // go on from the restored join
				restores++
			}
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d joined rows, want %d", seed, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d: joined row %d is %d, want %d", seed, i, got[i], want[i])
			}
		}
		matches += int64(len(got))
	}
	if restores == 0 || tombstones == 0 || matches == 0 {
		t.Fatalf("restores %d, tombstones %d, matches %d: the test exercised nothing", restores, tombstones, matches)
	}
}

// TestIntervalJoinEntriesFromWhole: an incremental join restored from a
// whole entry (AppendState's, the one-entry format a host wrote before it
// kept an entry per row) writes every held row as its own entry at its
// next AppendEntries, even one that is not full, and none of a row
// dropped before it: restored from those entries, a join has the state
// of the one that wrote the whole entry, byte for byte, and goes on
// with the same joined rows.
func TestIntervalJoinEntriesFromWhole(t *testing.T) {
	q := ijoinEntriesQuery(t)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 9))
		mk := func(incr bool) *IntervalJoin {
			j, err := NewIntervalJoin(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if incr {
				j.SetIncremental()
			}
			return j
		}
		old := mk(false)
		keys := []string{"a", "b", "c"}
		row := func(ts int64) []types.Value {
			return []types.Value{types.Str(keys[r.IntN(len(keys))]), types.Big(r.Int64N(100)), types.TS(ts)}
		}
		for step := range 200 {
			if _, err := old.Push(r.IntN(2), row(int64(step)*sec/4+r.Int64N(3*sec))); err != nil {
				t.Fatal(err)
			}
			taken(old)
		}
		old.Advance(0, 30*sec)
		old.Advance(1, 25*sec)
		taken(old)
		whole := old.AppendState(nil)
		if st := old.Stats(); st.LeftHeld == 0 || st.RightHeld == 0 {
			t.Fatalf("seed %d: held %d and %d rows: the test needs both", seed, st.LeftHeld, st.RightHeld)
		}
		j := mk(true)
		if err := j.RestoreState(whole); err != nil {
			t.Fatal(err)
		}
		j.FinishEntries()
		if r.IntN(2) == 0 { // some rows dropped before the first AppendEntries
			j.Advance(0, 35*sec)
			old.Advance(0, 35*sec)
			taken(old)
		}
		store := map[string][]byte{}
		put := func(k, v []byte) error {
			if v == nil {
				t.Fatalf("seed %d: a tombstone for %q, never written", seed, k)
			}
			store[string(k)] = bytes.Clone(v)
			return nil
		}
		if err := j.AppendEntries(false, []byte(JoinStateKey), nil, put); err != nil {
			t.Fatal(err)
		}
		k := mk(true)
		for n, v := range store {
			if n == JoinStateKey {
				if err := k.RestoreState(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		for n, v := range store {
			if n != JoinStateKey {
				if err := k.RestoreEntry([]byte(n), v); err != nil {
					t.Fatal(err)
				}
			}
		}
		k.FinishEntries()
		if st := old.Stats(); st.LeftHeld+st.RightHeld != int64(len(store)-1) {
			t.Fatalf("seed %d: %d rows held, %d row entries", seed, st.LeftHeld+st.RightHeld, len(store)-1)
		}
		if a, b := k.AppendState(nil), old.AppendState(nil); !bytes.Equal(a, b) {
			t.Fatalf("seed %d: the state restored from the entries differs from the whole entry's join", seed)
		}
		for step := range 100 {
			rw := row(40*sec + int64(step)*sec/4)
			side := r.IntN(2)
			k.Push(side, rw)
			old.Push(side, rw)
			if a, b := taken(k), taken(old); !slices.Equal(a, b) {
				t.Fatalf("seed %d step %d: joined %v, want %v", seed, step, a, b)
			}
		}
	}
}

// TestIntervalJoinHeldBound: past SetMaxHeld rows a push is refused with
// ErrIntervalJoinFull, changing nothing; a row the join would not hold
// (its match window already passed) is still taken.
func TestIntervalJoinHeldBound(t *testing.T) {
	q := ijoinEntriesQuery(t)
	j, err := NewIntervalJoin(q, true)
	if err != nil {
		t.Fatal(err)
	}
	j.SetMaxHeld(3)
	row := func(k string, ts int64) []types.Value {
		return []types.Value{types.Str(k), types.Big(1), types.TS(ts)}
	}
	for i := range 3 {
		if _, err := j.Push(0, row("a", int64(i)*sec)); err != nil {
			t.Fatal(err)
		}
	}
	before := j.AppendState(nil)
	_, err = j.Push(1, row("a", 0))
	if !errors.Is(err, ErrIntervalJoinFull) || j.Pending() != 0 || !bytes.Equal(before, j.AppendState(nil)) {
		t.Fatalf("push past the bound: %v, %d pending, state changed %v", err, j.Pending(), !bytes.Equal(before, j.AppendState(nil)))
	}
	// The left watermark far ahead: a right row is then matched but not held.
	j.Advance(0, 100*sec)
	if _, err := j.Push(1, row("a", 0)); err != nil || j.Pending() != 3 {
		t.Fatalf("a row the join does not hold: %v, %d joined", err, j.Pending())
	}
}

// TestIntervalJoinPushOwned: a join fed rows it may keep (PushOwned)
// makes the joined rows and holds the state Push makes, and a held row's
// strings are its own: the bytes they were read from may change after
// the call.
func TestIntervalJoinPushOwned(t *testing.T) {
	q := ijoinEntriesQuery(t)
	mk := func() *IntervalJoin {
		j, err := NewIntervalJoin(q, false)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	owned, ref := mk(), mk()
	r := rand.New(rand.NewPCG(3, 9))
	buf := []byte("abc")
	for step := range 400 {
		side, ts, at := r.IntN(2), int64(step)*sec/4+r.Int64N(3*sec), r.IntN(3)
		row := func() []types.Value {
			k := unsafe.String(&buf[at], 1) // aliases buf, as a decoded string may
			return []types.Value{{Kind: types.KindVarchar, S: k}, types.Big(int64(step)), types.TS(ts)}
		}
		if _, err := ref.Push(side, row()); err != nil {
			t.Fatal(err)
		}
		if _, err := owned.PushOwned(side, row()); err != nil {
			t.Fatal(err)
		}
		copy(buf, "xyz") // no held row may change with it
		if got, want := taken(owned), taken(ref); !slices.Equal(got, want) {
			t.Fatalf("step %d: joined %v, Push joins %v", step, got, want)
		}
		if !bytes.Equal(owned.AppendState(nil), ref.AppendState(nil)) {
			t.Fatalf("step %d: the state differs from Push's", step)
		}
		copy(buf, "abc")
	}
}
