package exec

import (
	"math"
	"math/big"
)

// fsum is an exactly rounded, order-independent sum of doubles: Shewchuk's
// algorithm as in Python's math.fsum. The partials represent the exact sum
// of every input, so the rounded result does not depend on the order the
// inputs arrived in, on batching, or on how partial sums were merged. That is
// what lets a final value be byte-identical across restarts and partitions.
type fsum struct {
	partials []float64
	special  float64 // sum of the non-finite inputs (inf, nan)
	infSum   float64 // sum of the infinite inputs, to detect inf + -inf
	// wide holds the exact sum once a magnitude near the top of the double
	// range appears, where the partials' own additions could overflow.
	// Rare, so it may be slow; it is exact because its precision covers
	// the whole double exponent range.
	wide *big.Float
}

// wideThreshold: while every input and partial is below 2^1022 in
// magnitude, no two-sum in add can overflow.
var wideThreshold = math.Ldexp(1, 1022)

// widePrec covers 2^1024 down to 2^-1074 plus 64 bits of carry.
const widePrec = 2200

func newWide() *big.Float { return new(big.Float).SetPrec(widePrec) }

func (s *fsum) add(x float64) {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		if math.IsInf(x, 0) {
			s.infSum += x
		}
		s.special += x
		return
	}
	if s.wide != nil {
		s.wide.Add(s.wide, new(big.Float).SetFloat64(x))
		return
	}
	if n := len(s.partials); math.Abs(x) >= wideThreshold || (n > 0 && math.Abs(s.partials[n-1]) >= wideThreshold) {
		s.wide = newWide()
		for _, p := range s.partials {
			s.wide.Add(s.wide, new(big.Float).SetFloat64(p))
		}
		s.partials = s.partials[:0]
		s.wide.Add(s.wide, new(big.Float).SetFloat64(x))
		return
	}
	i := 0
	for _, y := range s.partials {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			s.partials[i] = lo
			i++
		}
		x = hi
	}
	s.partials = s.partials[:i]
	if x != 0 {
		s.partials = append(s.partials, x)
	}
}

func (s *fsum) merge(o *fsum) {
	if o.special != 0 || math.IsNaN(o.special) {
		s.special += o.special
		s.infSum += o.infSum
	}
	if o.wide != nil {
		if s.wide == nil {
			s.wide = newWide()
			for _, p := range s.partials {
				s.wide.Add(s.wide, new(big.Float).SetFloat64(p))
			}
			s.partials = s.partials[:0]
		}
		s.wide.Add(s.wide, o.wide)
	}
	for _, p := range o.partials {
		s.add(p)
	}
}

func (s *fsum) result() float64 {
	if s.special != 0 || math.IsNaN(s.special) {
		if math.IsNaN(s.infSum) {
			return math.NaN()
		}
		return s.special
	}
	if s.wide != nil {
		f, _ := s.wide.Float64() // nearest-even; ±Inf when the exact sum is out of range
		return f
	}
	p := s.partials
	n := len(p)
	if n == 0 {
		return 0
	}
	n--
	hi := p[n]
	var lo float64
	for n > 0 {
		x := hi
		n--
		y := p[n]
		hi = x + y
		yr := hi - x
		lo = y - yr
		if lo != 0 {
			break
		}
	}
	// Half-even rounding across several partials.
	if n > 0 && ((lo < 0 && p[n-1] < 0) || (lo > 0 && p[n-1] > 0)) {
		y := lo * 2
		x := hi + y
		yr := x - hi
		if y == yr {
			hi = x
		}
	}
	return hi
}

func (s *fsum) bytes() int { return 8*cap(s.partials) + 24 + 24 }

// canonical returns partials that depend only on the exact sum, not on the
// order of the additions that built it: the sum rounded to nearest, then
// the rest rounded to nearest, and so on (smallest first, as add keeps
// them). Checkpoints write these, so that equal states have equal bytes.
func (s *fsum) canonical() []float64 {
	if s.wide != nil || len(s.partials) <= 1 {
		return s.partials
	}
	rest := fsum{partials: append([]float64(nil), s.partials...)}
	var out []float64
	for len(rest.partials) > 0 && len(out) < 64 {
		r := rest.result()
		if r == 0 {
			break
		}
		out = append(out, r)
		rest.add(-r)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
