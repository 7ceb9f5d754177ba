package exec

import (
	"math"

	"github.com/ubiksql/ubik/internal/types"
)

// Event-time arithmetic that cannot wrap. Event times lie in the TIMESTAMP
// range (types.MinTimestamp..MaxTimestamp), which reaches to within hours of
// the int64 limits, so a window end, a watermark delay or an allowed
// lateness added to one can overflow. Comparisons (is this window final?)
// use saturating sums; window bounds that would leave the range make the
// event an evaluation error instead of a wrapped window.

// satAdd returns a+b clamped to the int64 range (b may be negative).
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// satSub returns a-b clamped to the int64 range.
func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b
	}
	return satAdd(a, -b)
}

// alignedWindows returns the first (oldest) and last window start of the
// aligned windows [s, s+size) with s a multiple of slide that contain ts,
// without overflow; ok is false when one of them starts or ends outside
// the TIMESTAMP range. It needs 0 < slide <= size.
func alignedWindows(ts, size, slide int64) (first, last int64, ok bool) {
	mod := ts % slide
	if mod < 0 {
		mod += slide
	}
	// last = ts - mod, checked against the range's start.
	if ts < types.MinTimestamp+mod {
		return 0, 0, false
	}
	last = ts - mod
	if last > types.MaxTimestamp-size {
		return 0, 0, false // its end is past the range
	}
	// Starts last - k*slide for k >= 0 with start > ts - size, that is
	// k*slide < size - mod; k*slide stays below size, so it cannot overflow.
	back := (size - mod - 1) / slide * slide
	if last < types.MinTimestamp+back {
		return 0, 0, false
	}
	return last - back, last, true
}
