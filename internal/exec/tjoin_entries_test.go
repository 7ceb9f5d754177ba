package exec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestTemporalJoinEntries: the incremental entries, written at random
// points into a store that keeps the latest value per key (a tombstone
// deletes, as a compacted topic does) and restored into a fresh join,
// give the state of the join that wrote them, byte for byte (AppendState),
// and the same releases afterwards; with external watermarks moved by the
// host, as the Kafka pipeline does.
func TestTemporalJoinEntries(t *testing.T) {
	q := joinQuery(t, "LEFT")
	var joined, dropped, unmatched int64
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 3))
		mk := func() *TemporalJoin {
			j, err := NewTemporalJoin(q, 0)
			if err != nil {
				t.Fatal(err)
			}
			j.SetExternalWatermarks()
			j.SetIncremental()
			return j
		}
		j, ref := mk(), mk() // ref: the same operations, never restored
		store := map[string][]byte{}
		put := func(k, v []byte) error {
			if v == nil {
				delete(store, string(k))
			} else {
				store[string(k)] = bytes.Clone(v)
			}
			return nil
		}
		keys := []string{"a", "b", "", "é\"\\"}
		var streamWM, tableWM int64
		var got, want []int64
		for step := range 400 {
			now := int64(step) * sec / 4
			switch r.IntN(6) {
			case 0, 1:
				e := ev(keys[r.IntN(len(keys))], now+r.Int64N(5*sec))
				if _, err := j.PushEvent(e); err != nil {
					t.Fatal(err)
				}
				ref.PushEvent(e)
			case 2, 3:
				v := ver(keys[r.IntN(len(keys))], r.Int64N(100), (now/sec+r.Int64N(5))*sec) // whole seconds: a key gets a second version at one time (an upsert)
				if _, err := j.PushTable(v); err != nil {
					t.Fatal(err)
				}
				ref.PushTable(v)
			case 4:
				tableWM = max(tableWM, now-r.Int64N(3*sec))
				j.AdvanceTable(tableWM)
				streamWM = max(streamWM, now-8*sec)
				j.AdvanceStream(streamWM)
				ref.AdvanceTable(tableWM)
				ref.AdvanceStream(streamWM)
				got = append(got, released(t, j)...)
				want = append(want, released(t, ref)...)
			case 5:
				if err := j.AppendEntries(r.IntN(10) == 0, nil, put); err != nil {
					t.Fatal(err)
				}
				// Restore what the store holds and compare the states.
				k := mk()
				names := make([]string, 0, len(store))
				for n := range store {
					names = append(names, n)
				}
				sort.Strings(names)
				if len(names) == 0 || names[0] != JoinStateKey {
					t.Fatalf("seed %d step %d: no header entry first: %q", seed, step, names)
				}
				if err := k.RestoreState(store[JoinStateKey]); err != nil {
					t.Fatal(err)
				}
				for _, n := range names[1:] {
					if !IsJoinEntry([]byte(n)) {
						t.Fatalf("entry %q", n)
					}
					if err := k.RestoreEntry([]byte(n), store[n]); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				k.FinishEntries()
				if a, b := j.AppendState(nil), k.AppendState(nil); !bytes.Equal(a, b) {
					t.Fatalf("seed %d step %d: restored state differs (%d and %d bytes; %d waiting, %d versions)", seed, step, len(a), len(b), j.Waiting(), j.Stats().Versions)
				}
				// The restored join goes on in the written one's place.
				if r.IntN(2) == 0 {
					j = k
				}
			}
		}
		j.AdvanceTable(1 << 62)
		ref.AdvanceTable(1 << 62)
		got = append(got, released(t, j)...)
		want = append(want, released(t, ref)...)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: released %v\nwant %v", seed, got, want)
		}
		if !bytes.Equal(j.AppendState(nil), ref.AppendState(nil)) {
			t.Fatalf("seed %d: final state differs from the join never restored", seed)
		}
		s := j.Stats()
		joined, dropped, unmatched = joined+s.Joined, dropped+s.Dropped, unmatched+s.Unmatched
	}
	if joined == 0 || dropped == 0 || unmatched == 0 {
		t.Fatalf("the runs must join, drop versions and leave events unmatched: %d, %d, %d", joined, dropped, unmatched)
	}
}
