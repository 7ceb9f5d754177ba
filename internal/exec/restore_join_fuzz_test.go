package exec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// wholeJoinQuery is a temporal join that reads every table column, so a
// version keeps them all and a restored entry is written back byte for
// byte.
func wholeJoinQuery(t testing.TB) *plan.Query {
	prog, err := plan.Compile(`CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND);
CREATE TABLE v (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '2' SECOND);
SELECT s.k, v.k AS vk, sum(v.x), max(v.vt) FROM s LEFT JOIN v FOR SYSTEM_TIME AS OF s.ts ON s.k = v.k GROUP BY s.k, v.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

func intervalQuery(t testing.TB) *plan.Query {
	prog, err := plan.Compile(`CREATE SOURCE l (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, y BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT l.k, sum(l.x * r.y) AS s FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '2' SECOND AND l.ts + INTERVAL '3' SECOND GROUP BY l.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

// joinUnderTest is what FuzzRestoreJoin restores into: a temporal or an
// interval join, writing one entry or incremental ones.
type joinUnderTest struct {
	tj *TemporalJoin
	ij *IntervalJoin
}

func newJoinUnderTest(t testing.TB, mode int) joinUnderTest {
	var u joinUnderTest
	var err error
	if mode < 2 {
		u.tj, err = NewTemporalJoin(wholeJoinQuery(t), 0)
		if err == nil && mode == 1 {
			u.tj.SetExternalWatermarks()
			u.tj.SetIncremental()
		}
	} else {
		u.ij, err = NewIntervalJoin(intervalQuery(t), mode == 3)
		if err == nil && mode == 3 {
			u.ij.SetIncremental()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// entries writes the join's checkpoint into a store keeping one value
// per key, as a compacted topic does (full: every entry).
func (u joinUnderTest) entries(full bool, store map[string][]byte) {
	put := func(k, v []byte) error {
		if v == nil {
			delete(store, string(k))
		} else {
			store[string(k)] = bytes.Clone(v)
		}
		return nil
	}
	switch {
	case u.tj != nil && u.tj.incr:
		_ = u.tj.AppendEntries(full, nil, put)
	case u.tj != nil:
		store[JoinStateKey] = u.tj.AppendState(nil)
	case u.ij.incr:
		_ = u.ij.AppendEntries(full, []byte(JoinStateKey), nil, put)
	default:
		store[JoinStateKey] = u.ij.AppendState(nil)
	}
}

// state is the join's whole state (AppendState).
func (u joinUnderTest) state() []byte {
	if u.tj != nil {
		return u.tj.AppendState(nil)
	}
	return u.ij.AppendState(nil)
}

// restore loads entries (the header first, as a store sorted by key
// gives them) and finishes the restore.
func (u joinUnderTest) restore(keys, vals [][]byte) error {
	for i, k := range keys {
		var err error
		switch {
		case string(k) == JoinStateKey && u.tj != nil:
			err = u.tj.RestoreState(vals[i])
		case string(k) == JoinStateKey:
			err = u.ij.RestoreState(vals[i])
		case u.tj != nil && !u.tj.incr:
			// The host routes only the entry JoinStateKey to a join that
			// writes one entry; the operator refuses any other.
			err = fmt.Errorf("%w: unknown entry key %q", ErrBadState, k)
		case u.tj != nil:
			err = u.tj.RestoreEntry(k, vals[i])
		default:
			err = u.ij.RestoreEntry(k, vals[i])
		}
		if err != nil {
			return err
		}
	}
	if u.tj != nil {
		u.tj.FinishEntries()
	} else {
		u.ij.FinishEntries()
	}
	return nil
}

// joinSeeds are real checkpoints of each mode (0: temporal join, one
// entry; 1: temporal join, incremental entries; 2, 3: the interval join)
// after a random history, in a store's key order.
func joinSeeds(t testing.TB) (modes []int, blobs [][]byte) {
	keys := []string{"a", "b", "", "é\"\\"}
	for mode := range 4 {
		r := rand.New(rand.NewPCG(uint64(mode), 11))
		u := newJoinUnderTest(t, mode)
		store := map[string][]byte{}
		for step := range 300 {
			now := int64(step) * sec / 4
			k := types.Str(keys[r.IntN(len(keys))])
			switch r.IntN(5) {
			case 0, 1:
				if u.tj != nil {
					_, _ = u.tj.PushEvent([]types.Value{k, types.TS(now + r.Int64N(5*sec))})
				} else {
					_, _ = u.ij.Push(0, []types.Value{k, types.Big(r.Int64N(100)), types.TS(now + r.Int64N(3*sec))})
				}
			case 2, 3:
				if u.tj != nil {
					_, _ = u.tj.PushTable([]types.Value{k, types.Big(r.Int64N(100)), types.TS((now/sec + r.Int64N(5)) * sec)})
					drain(u.tj)
				} else {
					_, _ = u.ij.Push(1, []types.Value{k, types.Big(r.Int64N(100)), types.TS(now + r.Int64N(3*sec))})
					taken(u.ij)
				}
			case 4:
				if u.tj != nil && u.tj.incr {
					u.tj.AdvanceTable(now - 3*sec)
					u.tj.AdvanceStream(now - 8*sec)
					drain(u.tj)
				} else if u.ij != nil && u.ij.external {
					u.ij.Advance(r.IntN(2), now-2*sec)
					taken(u.ij)
				}
			}
			if step%60 == 59 {
				u.entries(step == 119, store)
				modes, blobs = append(modes, mode), append(blobs, storeBlob(store))
			}
		}
	}
	return modes, blobs
}

// storeBlob writes a store's entries in key order as encodeEntries does.
func storeBlob(store map[string][]byte) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(store)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = binary.AppendUvarint(b, uint64(len(store[k])))
		b = append(append(b, k...), store[k]...)
	}
	return b
}

// FuzzRestoreJoin: whatever a join's checkpoint holds, restoring it never
// panics, and it either fails with a clean error or gives a join whose
// full checkpoint is exactly the entries restored.
func FuzzRestoreJoin(f *testing.F) {
	modes, blobs := joinSeeds(f)
	for i := range modes {
		f.Add(uint8(modes[i]), blobs[i])
	}
	f.Fuzz(func(t *testing.T, mode uint8, blob []byte) {
		keys, vals, ok := decodeEntries(blob)
		if !ok || len(keys) == 0 || string(keys[0]) != JoinStateKey {
			return // a store always holds the header, first in key order
		}
		u := newJoinUnderTest(t, int(mode)%4)
		want := map[string][]byte{}
		for i, k := range keys {
			want[string(k)] = vals[i]
		}
		if len(want) != len(keys) {
			return // a store holds one value per key
		}
		if err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("restore panicked: %v", p)
				}
			}()
			return u.restore(keys, vals)
		}(); err != nil {
			return
		}
		// converted: the entries are of the other format (an interval
		// join's rows as entries into one writing a whole entry, or a
		// whole entry's rows into an incremental join), which the join
		// writes back in its own.
		converted := len(keys) > 1 && (u.ij != nil && !u.ij.incr) ||
			u.tj != nil && u.tj.incr && len(u.tj.buf)+int(u.tj.nver) > len(keys)-1 ||
			u.ij != nil && u.ij.incr && u.ij.sides[0].held+u.ij.sides[1].held > int64(len(keys)-1)
		got := map[string][]byte{}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("checkpoint of the restored join panicked: %v", p)
				}
			}()
			u.entries(true, got)
		}()
		if converted {
			v := newJoinUnderTest(t, int(mode)%4)
			gk := slices.Sorted(maps.Keys(got))
			gv := make([][]byte, len(gk))
			keys = keys[:0]
			for i, k := range gk {
				keys, gv[i] = append(keys, []byte(k)), got[k]
			}
			if err := v.restore(keys, gv); err != nil {
				t.Fatalf("the written back entries do not restore: %v", err)
			}
			if !bytes.Equal(v.state(), u.state()) {
				t.Fatalf("the written back entries restore to another state")
			}
			return
		}
		if !maps.EqualFunc(got, want, bytes.Equal) {
			for k, v := range want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("entry %q restored as %x, written back as %x", k, v, got[k])
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Fatalf("entry %q written back, not restored", k)
				}
			}
		}
	})
}

// drain releases every releasable event.
func drain(j *TemporalJoin) {
	for {
		if _, ok, err := j.Release(); !ok || err != nil {
			return
		}
	}
}

// TestJoinSeedsRestore: every seed of FuzzRestoreJoin restores and holds
// state (the fuzzer starts from checkpoints the joins accept).
func TestJoinSeedsRestore(t *testing.T) {
	modes, blobs := joinSeeds(t)
	for i, mode := range modes {
		keys, vals, ok := decodeEntries(blobs[i])
		if !ok {
			t.Fatalf("seed %d does not decode", i)
		}
		u := newJoinUnderTest(t, mode)
		if err := u.restore(keys, vals); err != nil {
			t.Fatalf("seed %d (mode %d): %v", i, mode, err)
		}
		held := int64(0)
		if u.tj != nil {
			st := u.tj.Stats()
			held = st.Buffered + st.Versions
		} else {
			st := u.ij.Stats()
			held = st.LeftHeld + st.RightHeld
		}
		if held == 0 {
			t.Fatalf("seed %d (mode %d) holds nothing", i, mode)
		}
	}
}
