package exec

import "math"

// fsum is an exactly rounded, order-independent sum of doubles: Shewchuk's
// algorithm as in Python's math.fsum. The partials represent the exact sum
// of every input, so the rounded result does not depend on the order the
// inputs arrived in, on batching, or on how partial sums were merged. That is
// what lets a final value be byte-identical across restarts and partitions.
type fsum struct {
	partials []float64
	special  float64 // sum of the non-finite inputs (inf, nan)
	infSum   float64 // sum of the infinite inputs, to detect inf + -inf
	overflow float64 // sign of an intermediate overflow (the exact sum left the double range)
}

func (s *fsum) add(x float64) {
	xsave := x
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
	if x == 0 {
		return
	}
	if math.IsInf(x, 0) || math.IsNaN(x) {
		if !math.IsInf(xsave, 0) && !math.IsNaN(xsave) {
			// The running sum overflowed although the input is finite:
			// the exact sum is beyond the double range in x's direction.
			// Python raises here; DuckDB's sum returns an infinity. We
			// keep the infinity, and keep it sticky so the result does not
			// depend on which input tipped it over.
			s.overflow = math.Copysign(1, x)
			s.partials = s.partials[:0]
			return
		}
		if math.IsInf(xsave, 0) {
			s.infSum += xsave
		}
		s.special += xsave
		s.partials = s.partials[:0]
		return
	}
	s.partials = append(s.partials, x)
}

func (s *fsum) merge(o *fsum) {
	if o.special != 0 || math.IsNaN(o.special) {
		s.special += o.special
		s.infSum += o.infSum
	}
	if o.overflow != 0 {
		s.overflow = o.overflow
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
	if s.overflow != 0 {
		return math.Inf(int(s.overflow))
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
