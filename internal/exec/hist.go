package exec

import (
	"math"
	"math/bits"
)

// latencyHist is a fixed-size log-linear histogram of durations in
// nanoseconds (8 sub-buckets per power of two: at most 12.5% error), so
// recording is O(1) and memory is bounded however long a query runs.
type latencyHist struct {
	counts [64 * 8]uint64
	n      uint64
	max    int64
}

func (h *latencyHist) record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.counts[histIndex(uint64(ns))]++
	h.n++
	if ns > h.max {
		h.max = ns
	}
}

func histIndex(v uint64) int {
	if v < 8 {
		return int(v)
	}
	e := 63 - bits.LeadingZeros64(v) // v in [2^e, 2^(e+1))
	sub := (v >> (uint(e) - 3)) & 7
	return (e-2)*8 + int(sub)
}

func histUpper(i int) float64 {
	if i < 8 {
		return float64(i)
	}
	e := i/8 + 2
	sub := i % 8
	return math.Ldexp(float64(8+sub+1), e-3)
}

// quantile returns an upper bound of the q-quantile in nanoseconds.
func (h *latencyHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			u := histUpper(i)
			if u > float64(h.max) {
				u = float64(h.max)
			}
			return u
		}
	}
	return float64(h.max)
}
