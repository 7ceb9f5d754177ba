package exec

import (
	"unsafe"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// IntervalRowBytes estimates the memory one held row of input side (0
// left, 1 right) of interval join j takes, beyond its text (the bytes of
// its strings and of its join key, each held row having its own copies):
// the row's values, its entry in its key's list and in the expiry heap,
// with the spare capacity append leaves those slices (a quarter on
// average, as they grow). Live heap: the Go runtime lets the heap reach
// about twice the live bytes between collections (GOGC=100).
func IntervalRowBytes(j *plan.IntervalJoin, side int) int {
	src := j.Left
	if side == 1 {
		src = j.Right
	}
	row := allocBytes(int(unsafe.Sizeof(types.Value{})) * len(src.Columns))
	entries := int(unsafe.Sizeof(ijRow{}) + unsafe.Sizeof(expEntry{}))
	return row + entries*5/4
}

// IntervalKeyBytes estimates the memory an interval join takes per
// distinct join key it holds rows of, beyond the rows: the key's map
// entry (at the map's average load) and its first copy of the key.
const IntervalKeyBytes = 64

// allocBytes rounds n up to the Go allocator's size class, within a few
// per cent: steps of 16 bytes up to 256, then a sixteenth of the next
// power of two.
func allocBytes(n int) int {
	if n <= 8 {
		return 8
	}
	step := 16
	for p := 256; p < n; p *= 2 {
		step = p / 8
	}
	return (n + step - 1) / step * step
}
