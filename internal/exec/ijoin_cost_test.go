package exec

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// TestIntervalRowBytes holds many rows in an interval join (few keys with
// long lists, and many keys with short ones) and checks the live heap
// they take per row against IntervalRowBytes plus their text.
func TestIntervalRowBytes(t *testing.T) {
	q := ijoinEntriesQuery(t)
	const rows = 100_000
	for _, keys := range []int{10, 1000, 100_000} {
		t.Run(fmt.Sprint(keys, "keys"), func(t *testing.T) {
			j, err := NewIntervalJoin(q, true) // external watermarks: nothing expires
			if err != nil {
				t.Fatal(err)
			}
			names := make([]string, keys)
			for i := range names {
				names[i] = fmt.Sprintf("k%07d", i)
			}
			heap := func() uint64 {
				var m runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			before := heap()
			for i := range rows {
				row := []types.Value{types.Str(names[i%keys]), types.Big(int64(i)), types.TS(int64(i) * 1000)}
				if _, err := j.Push(0, row); err != nil { // left rows only: no joined rows
					t.Fatal(err)
				}
			}
			got := float64(heap()-before) / rows
			runtime.KeepAlive(j)
			// Text: the key string (8 bytes, a 8-byte size class) and the
			// row's copy of k, each its own allocation.
			want := float64(IntervalRowBytes(q.IJoin, 0)+2*allocBytes(len(names[0]))) + float64(IntervalKeyBytes*keys)/rows
			if j.Pending() != 0 || j.Stats().LeftHeld != rows {
				t.Fatalf("%d joined, %d held", j.Pending(), j.Stats().LeftHeld)
			}
			t.Logf("%d keys: %.0f bytes per held row measured, %.0f estimated", keys, got, want)
			if got < want*0.8 || got > want*1.25 {
				t.Fatalf("%d keys: %.0f bytes per held row, estimated %.0f", keys, got, want)
			}
		})
	}
}
