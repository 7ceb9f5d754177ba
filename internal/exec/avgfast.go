package exec

import (
	"math"

	"github.com/ubiksql/ubik/internal/types"
)

// quoExpansion is S/d rounded once to the nearest double (ties to even),
// where S is the exact sum of the non-overlapping partials ps (smallest
// first, as fsum keeps them) and d is a positive integer below 2^53. ok is
// false when the magnitudes leave the range where every step below is
// exact; the caller then divides with big.Float.
//
// It guesses q = S/d in floating point, off by a few ulps at most, and settles
// the rounding exactly: S/d is above the midpoint m between q and its
// successor iff S - d*m > 0, and d*m is the exact sum of d*q (two doubles,
// by FMA) and d*ulp/2 (a double), so the sign of S - d*m is the sign of the
// top partial of an exact expansion.
func quoExpansion(ps []float64, d float64) (float64, bool) {
	var buf [16]float64
	if len(ps) == 0 {
		return 0, true
	}
	if len(ps) > 12 { // the comparison's expansion holds at most len(ps)+3 partials
		return 0, false
	}
	top := ps[len(ps)-1]
	if top == 0 || math.Abs(top) > 0x1p1000 {
		return 0, false
	}
	neg := top < 0
	sgn := 1.0
	if neg {
		sgn = -1
	}
	// Work on |S|. The naive sum of the partials is within an ulp or two
	// of S, a starting guess the loop below corrects.
	approx := 0.0
	for _, p := range ps {
		approx += p
	}
	q := math.Abs(approx) / d
	if q < 0x1p-900 || q > 0x1p1000 {
		return 0, false
	}
	// cmp reports the sign of |S| - d*m for m = q + h (h may be negative).
	cmp := func(q, h float64) int {
		ex := buf[:0]
		for _, p := range ps {
			ex = addPartial(ex, sgn*p)
		}
		ph := d * q
		pl := math.FMA(d, q, -ph)
		ex = addPartial(ex, -ph)
		ex = addPartial(ex, -pl)
		ex = addPartial(ex, -d*h)
		if len(ex) == 0 {
			return 0
		}
		if ex[len(ex)-1] > 0 {
			return 1
		}
		return -1
	}
	for range 8 {
		up := math.Nextafter(q, math.Inf(1))
		down := math.Nextafter(q, 0)
		switch c := cmp(q, (up-q)/2); {
		case c > 0:
			q = up
			continue
		case c == 0:
			if math.Float64bits(q)&1 != 0 {
				q = up
			}
			return sgn * q, true
		}
		switch c := cmp(q, (down-q)/2); {
		case c < 0:
			q = down
			continue
		case c == 0:
			if math.Float64bits(q)&1 != 0 {
				q = down
			}
		}
		return sgn * q, true
	}
	return 0, false
}

// int128Expansion writes x as an exact expansion of doubles into buf.
func int128Expansion(x types.Int128, buf []float64) []float64 {
	ps := buf[:0]
	for _, c := range []float64{
		float64(x.Lo & (1<<32 - 1)),
		float64(x.Lo>>32) * 0x1p32,
		float64(uint64(x.Hi)&(1<<32-1)) * 0x1p64,
		float64(x.Hi>>32) * 0x1p96,
	} {
		if c != 0 {
			ps = addPartial(ps, c)
		}
	}
	return ps
}
