package exec

import (
	"encoding/binary"
	"math"
	"math/big"
)

// fsum is an exactly rounded, order-independent sum of doubles: Shewchuk's
// algorithm as in Python's math.fsum. The partials represent the exact sum
// of every input, so the rounded result does not depend on the order the
// inputs arrived in, on batching, or on how partial sums were merged. That is
// what lets a final value be byte-identical across restarts and partitions.
//
// It is laid out for the common case, where one or two partials suffice:
// those live inline, and everything rarer (more partials, non-finite inputs,
// sums near the top of the double range) lives behind ext. A live (group,
// window) thus pays 32 bytes for an exact sum.
type fsum struct {
	p    [2]float64 // the partials while there are at most two and ext is nil or unspilled
	n    uint8      // partials in use in p
	seen bool       // some input was added (sum of nothing is NULL, not 0)
	ext  *fsumExt
}

type fsumExt struct {
	more    []float64 // all partials once there are more than two
	spilled bool      // partials live in more, not in p
	special float64   // sum of the non-finite inputs (inf, nan)
	infSum  float64   // sum of the infinite inputs, to detect inf + -inf
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

func (s *fsum) extension() *fsumExt {
	if s.ext == nil {
		s.ext = &fsumExt{}
	}
	return s.ext
}

// partials returns the live partials (aliasing the inline array when they
// fit there).
func (s *fsum) partials() []float64 {
	if s.ext != nil && s.ext.spilled {
		return s.ext.more
	}
	return s.p[:s.n]
}

// setPartials stores ps, which may alias s.p or be a grown copy.
func (s *fsum) setPartials(ps []float64) {
	if (s.ext == nil || !s.ext.spilled) && len(ps) <= 2 {
		n := copy(s.p[:], ps)
		s.n = uint8(n)
		return
	}
	e := s.extension()
	e.more, e.spilled = ps, true
	s.n = 0
}

func (s *fsum) add(x float64) {
	s.seen = true
	if math.IsInf(x, 0) || math.IsNaN(x) {
		e := s.extension()
		if math.IsInf(x, 0) {
			e.infSum += x
		}
		e.special += x
		return
	}
	if s.ext != nil && s.ext.wide != nil {
		s.ext.wide.Add(s.ext.wide, new(big.Float).SetFloat64(x))
		return
	}
	ps := s.partials()
	if n := len(ps); math.Abs(x) >= wideThreshold || (n > 0 && math.Abs(ps[n-1]) >= wideThreshold) {
		w := newWide()
		for _, p := range ps {
			w.Add(w, new(big.Float).SetFloat64(p))
		}
		w.Add(w, new(big.Float).SetFloat64(x))
		s.setPartials(nil)
		s.extension().wide = w
		return
	}
	s.setPartials(addPartial(ps, x))
}

// addPartial adds x to the non-overlapping partials ps in place (the grow
// step of Shewchuk's algorithm) and returns them, the new top partial
// appended (within ps's capacity when it has room).
func addPartial(ps []float64, x float64) []float64 {
	i := 0
	for _, y := range ps {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			ps[i] = lo
			i++
		}
		x = hi
	}
	ps = ps[:i]
	if x != 0 {
		ps = append(ps, x)
	}
	return ps
}

func (s *fsum) merge(o *fsum) {
	s.seen = s.seen || o.seen
	if o.ext != nil {
		if o.ext.special != 0 || math.IsNaN(o.ext.special) {
			e := s.extension()
			e.special += o.ext.special
			e.infSum += o.ext.infSum
		}
		if o.ext.wide != nil {
			e := s.extension()
			if e.wide == nil {
				w := newWide()
				for _, p := range s.partials() {
					w.Add(w, new(big.Float).SetFloat64(p))
				}
				s.setPartials(nil)
				e.wide = w
			}
			e.wide.Add(e.wide, o.ext.wide)
		}
	}
	for _, p := range o.partials() {
		s.add(p)
	}
}

func (s *fsum) result() float64 {
	if e := s.ext; e != nil {
		if e.special != 0 || math.IsNaN(e.special) {
			if math.IsNaN(e.infSum) {
				return math.NaN()
			}
			return e.special
		}
		if e.wide != nil {
			f, _ := e.wide.Float64() // nearest-even; ±Inf when the exact sum is out of range
			return f
		}
	}
	p := s.partials()
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

// avg is the exact sum divided by n (n > 0), rounded once to the nearest
// double (ties to even). With one partial the sum is an exact double and,
// n being exact below 2^53, one IEEE division is that rounding; otherwise
// the quotient of the exact rational sum is rounded once. Non-finite inputs
// give the non-finite sum divided by n. An exact sum beyond the double
// range still gives its finite average.
func (s *fsum) avg(n int64) float64 {
	if e := s.ext; e != nil && (e.special != 0 || math.IsNaN(e.special)) {
		return s.result() / float64(n)
	}
	if n == 1 {
		return s.result()
	}
	if p := s.partials(); (s.ext == nil || s.ext.wide == nil) && len(p) <= 1 && n < 1<<53 {
		if len(p) == 0 {
			return 0
		}
		return p[0] / float64(n)
	}
	if (s.ext == nil || s.ext.wide == nil) && n < 1<<53 {
		if q, ok := quoExpansion(s.partials(), float64(n)); ok {
			return q
		}
	}
	var sum *big.Float
	if s.ext != nil && s.ext.wide != nil {
		sum = s.ext.wide
	} else {
		p := s.partials()
		// The partials do not overlap: their exact sum spans from the
		// lowest bit of the smallest to the top of the largest.
		_, lo := math.Frexp(p[0])
		_, hi := math.Frexp(p[len(p)-1])
		sum = new(big.Float).SetPrec(uint(min(hi-lo+53+64, widePrec)))
		for _, x := range p {
			sum.Add(sum, new(big.Float).SetFloat64(x))
		}
	}
	return quoRound(sum, new(big.Float).SetInt64(n))
}

// quoRound is num/den, both exact, rounded once to the nearest double (ties
// to even). big.Float rounds the quotient correctly to 53 bits; that is
// the double unless it lies in the subnormal range, where the double has
// fewer bits and the exact rational quotient is rounded instead.
func quoRound(num, den *big.Float) float64 {
	q := new(big.Float).SetPrec(53).Quo(num, den)
	if q.Sign() == 0 || q.MantExp(nil) > -1021 {
		f, _ := q.Float64() // exact, or ±Inf beyond the range
		return f
	}
	a, _ := num.Rat(nil)
	b, _ := den.Rat(nil)
	f, _ := a.Quo(a, b).Float64()
	return f
}

// bytes estimates the memory of the sum (the inline part is counted by the
// state that embeds it).
func (s *fsum) bytes() int {
	if s.ext == nil {
		return 0
	}
	return 64 + 8*cap(s.ext.more)
}

func (s *fsum) appendState(b []byte) []byte {
	var special, infSum float64
	var wide *big.Float
	if s.ext != nil {
		special, infSum, wide = s.ext.special, s.ext.infSum, s.ext.wide
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(special))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(infSum))
	if wide != nil {
		t, _ := wide.GobEncode()
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	} else {
		b = append(b, 0)
	}
	b = appendBool(b, s.seen)
	ps := s.canonical()
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
	}
	return b
}

func (s *fsum) readState(r *reader) {
	*s = fsum{}
	special, infSum := r.f64(), r.f64()
	if special != 0 || infSum != 0 || math.IsNaN(special) {
		e := s.extension()
		e.special, e.infSum = special, infSum
	}
	if wn := r.uvarint(); wn > 0 {
		w := newWide()
		if err := w.GobDecode(r.bytes(int(wn))); err != nil {
			r.fail("wide sum")
			return
		}
		s.extension().wide = w
	}
	seen := r.byte1() == 1
	n := r.uvarint()
	if n > uint64(len(r.b)/8) {
		r.fail("fsum partials")
		return
	}
	defer func() { s.seen = seen }()
	ps := make([]float64, n)
	for i := range ps {
		ps[i] = r.f64()
	}
	s.setPartials(ps)
}

// canonical returns partials that depend only on the exact sum, not on the
// order of the additions that built it: the sum rounded to nearest, then
// the rest rounded to nearest, and so on (smallest first, as add keeps
// them). Checkpoints write these, so that equal states have equal bytes.
func (s *fsum) canonical() []float64 {
	ps := s.partials()
	if s.ext != nil && s.ext.wide != nil || len(ps) <= 1 {
		return ps
	}
	var rest fsum
	rest.setPartials(append([]float64(nil), ps...))
	var out []float64
	for len(rest.partials()) > 0 && len(out) < 64 {
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
