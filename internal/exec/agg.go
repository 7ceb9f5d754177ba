package exec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unsafe"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// aggState is the running state of one aggregate call for one (group, window).
// Every state is mergeable, which session windows need when two sessions join.
type aggState interface {
	update(v types.Value) error
	merge(o aggState) error
	result() types.Value
	// size estimates the bytes this state holds, for the state-size metric.
	size() int
	// appendState and readState serialize the state for checkpoints.
	appendState(b []byte) []byte
	readState(r *reader) error
}

// newAggState returns a fresh state for call c.
func newAggState(c *plan.AggCall) (aggState, error) {
	var argT types.Type
	if len(c.Args) > 0 {
		argT = c.Args[0].Type()
	}
	if c.Distinct && c.Func != "approx_count_distinct" && c.Func != "min" && c.Func != "max" && c.Func != "bool_and" && c.Func != "bool_or" {
		plain := *c
		plain.Distinct = false
		inner, err := newAggState(&plain)
		if err != nil {
			return nil, err
		}
		if _, multi := inner.(argsUpdater); multi {
			return nil, fmt.Errorf("exec: %s(DISTINCT ...) is not supported", c.Func)
		}
		return &distinctState{inner: inner, t: argT}, nil
	}
	switch c.Func {
	case "count_star", "count":
		return &countState{}, nil
	case "min_by", "max_by":
		return &byState{max: c.Func == "max_by", t: c.Type}, nil
	case "first", "last":
		return &firstLastState{last: c.Func == "last", t: c.Type}, nil
	case "var_samp", "var_pop", "stddev_samp", "stddev_pop":
		if argT.IsNumeric() {
			return &varState{pop: strings.HasSuffix(c.Func, "_pop"), sqrt: strings.HasPrefix(c.Func, "stddev")}, nil
		}
	case "bool_and", "bool_or":
		if argT.Kind == types.KindBoolean {
			return &boolState{or: c.Func == "bool_or"}, nil
		}
	case "approx_count_distinct":
		return &hllState{}, nil
	case "approx_quantile":
		switch argT.Kind {
		case types.KindInteger, types.KindBigInt, types.KindDouble, types.KindDecimal:
			if q := c.Param.F; c.Param.Kind == types.KindDouble && !c.Param.Null && q >= 0 && q <= 1 {
				return &quantileState{q: q, t: c.Type}, nil
			}
			return nil, fmt.Errorf("exec: approx_quantile needs a fraction between 0 and 1, got %v", c.Param)
		}
	case "sum":
		switch argT.Kind {
		case types.KindDouble:
			return &sumDoubleState{}, nil
		case types.KindInteger, types.KindBigInt, types.KindHugeInt, types.KindBoolean:
			return &sumIntState{}, nil
		case types.KindDecimal:
			return &sumIntState{decimal: true, scale: argT.Scale}, nil
		}
	case "avg":
		switch argT.Kind {
		case types.KindDouble:
			return &avgDoubleState{}, nil
		case types.KindInteger, types.KindBigInt, types.KindHugeInt:
			return &avgIntState{}, nil
		case types.KindDecimal:
			return &avgIntState{scale: argT.Scale}, nil
		}
	case "min", "max":
		isMax := c.Func == "max"
		switch c.Type.Kind {
		case types.KindDouble:
			return &minMaxF64{max: isMax}, nil
		case types.KindInteger, types.KindBigInt, types.KindTimestamp, types.KindDate, types.KindBoolean:
			return &minMaxI64{max: isMax, kind: c.Type.Kind}, nil
		}
		return &minMaxState{t: c.Type, max: isMax}, nil
	}
	return nil, fmt.Errorf("exec: aggregate %s(%s) is not supported", c.Func, argT)
}

type countState struct{ n int64 }

func (s *countState) update(v types.Value) error {
	if !v.Null {
		s.n++
	}
	return nil
}
func (s *countState) merge(o aggState) error { s.n += o.(*countState).n; return nil }
func (s *countState) result() types.Value    { return types.Big(s.n) }
func (s *countState) size() int              { return 8 }

// addExact adds an integer, HUGEINT or DECIMAL (unscaled) value to a
// 128-bit sum, failing on overflow rather than wrapping.
func addExact(sum types.Int128, v types.Value) (types.Int128, error) {
	x := types.I128(v.I)
	if v.Kind == types.KindHugeInt || v.Kind == types.KindDecimal {
		x = v.Int128()
	}
	r, of := sum.Add(x)
	if of {
		return sum, ErrOverflow
	}
	return r, nil
}

// sumIntState sums integers (and DECIMAL unscaled values) exactly in 128 bits.
type sumIntState struct {
	sum     types.Int128
	seen    bool
	decimal bool
	scale   uint8
}

func (s *sumIntState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	r, err := addExact(s.sum, v)
	if err != nil {
		return err
	}
	s.sum, s.seen = r, true
	return nil
}

func (s *sumIntState) merge(o aggState) error {
	t := o.(*sumIntState)
	if !t.seen {
		return nil
	}
	r, of := s.sum.Add(t.sum)
	if of {
		return ErrOverflow
	}
	s.sum, s.seen = r, true
	return nil
}

func (s *sumIntState) result() types.Value {
	if s.decimal {
		if !s.seen {
			return types.NullOf(types.Decimal(38, s.scale))
		}
		return types.Dec(s.sum, s.scale)
	}
	if !s.seen {
		return types.NullOf(types.HugeInt)
	}
	return types.Huge(s.sum)
}
func (s *sumIntState) size() int { return 24 }

type sumDoubleState struct{ fs fsum }

func (s *sumDoubleState) update(v types.Value) error {
	if !v.Null {
		s.fs.add(v.F)
	}
	return nil
}
func (s *sumDoubleState) merge(o aggState) error {
	s.fs.merge(&o.(*sumDoubleState).fs)
	return nil
}
func (s *sumDoubleState) result() types.Value {
	if !s.fs.seen {
		return types.NullOf(types.Double)
	}
	return types.Float(s.fs.result())
}
func (s *sumDoubleState) size() int { return 32 + s.fs.bytes() }

type avgDoubleState struct {
	fs fsum
	n  int64
}

func (s *avgDoubleState) update(v types.Value) error {
	if !v.Null {
		s.fs.add(v.F)
		s.n++
	}
	return nil
}
func (s *avgDoubleState) merge(o aggState) error {
	t := o.(*avgDoubleState)
	s.fs.merge(&t.fs)
	s.n += t.n
	return nil
}
func (s *avgDoubleState) result() types.Value {
	if s.n == 0 {
		return types.NullOf(types.Double)
	}
	return types.Float(s.fs.avg(s.n))
}
func (s *avgDoubleState) size() int { return 40 + s.fs.bytes() }

// avgIntState averages integers and decimals from an exact 128-bit sum.
type avgIntState struct {
	sum   types.Int128
	n     int64
	scale uint8
}

func (s *avgIntState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	r, err := addExact(s.sum, v)
	if err != nil {
		return err
	}
	s.sum = r
	s.n++
	return nil
}
func (s *avgIntState) merge(o aggState) error {
	t := o.(*avgIntState)
	r, of := s.sum.Add(t.sum)
	if of {
		return ErrOverflow
	}
	s.sum = r
	s.n += t.n
	return nil
}
func (s *avgIntState) result() types.Value {
	if s.n == 0 {
		return types.NullOf(types.Double)
	}
	return types.Float(exactAvg(s.sum, s.n, s.scale))
}

// exactAvg is sum / (n * 10^scale) rounded once to the nearest double (ties
// to even). When the sum and the divisor are both exact doubles (below
// 2^53) one IEEE division is that rounding; otherwise the quotient is
// formed as an exact rational and rounded once. Dividing a rounded sum by
// n, or then by 10^scale, would round two or three times and can miss the
// nearest double by one ulp.
func exactAvg(sum types.Int128, n int64, scale uint8) float64 {
	if sum.IsInt64() && scale <= 15 {
		if i := int64(sum.Lo); i > -1<<53 && i < 1<<53 {
			p := int64(1)
			for range scale {
				p *= 10
			}
			if n < (1<<53)/p {
				return float64(i) / float64(n*p)
			}
		}
	}
	if scale <= 15 {
		p := int64(1)
		for range scale {
			p *= 10
		}
		if n < (1<<53)/p {
			var buf [4]float64
			if q, ok := quoExpansion(int128Expansion(sum, buf[:]), float64(n*p)); ok {
				return q
			}
		}
	}
	// Exact operands: the sum takes 128 bits, n * 10^scale at most 63 + 127.
	num := new(big.Float).SetPrec(128).SetInt64(sum.Hi)
	num.SetMantExp(num, 64)
	num.Add(num, new(big.Float).SetUint64(sum.Lo))
	den := new(big.Float).SetPrec(192).SetInt64(n)
	ten := new(big.Float).SetInt64(10)
	for range scale {
		den.Mul(den, ten)
	}
	return quoRound(num, den)
}
func (s *avgIntState) size() int { return 32 }

// minMaxState keeps the extreme value. Ties between values that compare
// equal but print differently (0.0 and -0.0) are broken by a fixed rule so
// the result never depends on arrival order.
type minMaxState struct {
	v    types.Value
	seen bool
	max  bool
	t    types.Type
}

func (s *minMaxState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	if !s.seen {
		s.v, s.seen = v, true
		if v.Kind == types.KindVarchar {
			s.v.S = strings.Clone(v.S)
		}
		return nil
	}
	c := Compare(v, s.v)
	if c == 0 && v.Kind == types.KindDouble && v.F == 0 {
		// max prefers +0.0, min prefers -0.0.
		if s.max == !math.Signbit(v.F) {
			s.v = v
		}
		return nil
	}
	if (s.max && c > 0) || (!s.max && c < 0) {
		s.v = v
		if v.Kind == types.KindVarchar {
			s.v.S = strings.Clone(v.S)
		}
	}
	return nil
}
func (s *minMaxState) merge(o aggState) error {
	t := o.(*minMaxState)
	if t.seen {
		return s.update(t.v)
	}
	return nil
}
func (s *minMaxState) result() types.Value {
	if !s.seen {
		return types.NullOf(s.t)
	}
	return s.v
}
func (s *minMaxState) size() int { return 56 + len(s.v.S) }

// minMaxF64 is min/max over DOUBLE in 16 bytes. NaN is above every other
// double (DuckDB's order); between 0.0 and -0.0 max keeps 0.0 and min keeps
// -0.0, so the result never depends on arrival order.
type minMaxF64 struct {
	x    float64
	seen bool
	max  bool
}

func (s *minMaxF64) update(v types.Value) error {
	if v.Null {
		return nil
	}
	if !s.seen {
		s.x, s.seen = v.F, true
		return nil
	}
	c := Compare(v, types.Float(s.x))
	switch {
	case c == 0 && v.F == 0:
		if s.max == !math.Signbit(v.F) {
			s.x = v.F
		}
	case (s.max && c > 0) || (!s.max && c < 0):
		s.x = v.F
	}
	return nil
}
func (s *minMaxF64) merge(o aggState) error {
	t := o.(*minMaxF64)
	if t.seen {
		return s.update(types.Float(t.x))
	}
	return nil
}
func (s *minMaxF64) result() types.Value {
	if !s.seen {
		return types.NullOf(types.Double)
	}
	return types.Float(s.x)
}
func (s *minMaxF64) size() int { return 16 }
func (s *minMaxF64) appendState(b []byte) []byte {
	return binary.LittleEndian.AppendUint64(appendBool(b, s.seen), math.Float64bits(s.x))
}
func (s *minMaxF64) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.x = r.f64()
	return r.err
}

// minMaxI64 is min/max over the kinds stored in Value.I (integers,
// timestamps, dates, booleans) in 16 bytes.
type minMaxI64 struct {
	x    int64
	kind types.Kind
	seen bool
	max  bool
}

func (s *minMaxI64) update(v types.Value) error {
	if v.Null {
		return nil
	}
	if !s.seen || (s.max && v.I > s.x) || (!s.max && v.I < s.x) {
		s.x, s.seen = v.I, true
	}
	return nil
}
func (s *minMaxI64) merge(o aggState) error {
	t := o.(*minMaxI64)
	if t.seen {
		return s.update(types.Value{Kind: s.kind, I: t.x})
	}
	return nil
}
func (s *minMaxI64) result() types.Value {
	if !s.seen {
		return types.NullOf(types.Type{Kind: s.kind})
	}
	return types.Value{Kind: s.kind, I: s.x}
}
func (s *minMaxI64) size() int { return 16 }
func (s *minMaxI64) appendState(b []byte) []byte {
	return binary.AppendVarint(appendBool(b, s.seen), s.x)
}
func (s *minMaxI64) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.x = r.varint()
	return r.err
}

// Compare orders two non-NULL values of the same kind the way DuckDB does:
// numbers numerically (NaN above every other double), strings bytewise,
// times chronologically, false before true.
func Compare(a, b types.Value) int {
	switch a.Kind {
	case types.KindDouble:
		x, y := a.F, b.F
		xn, yn := math.IsNaN(x), math.IsNaN(y)
		switch {
		case xn && yn:
			return 0
		case xn:
			return 1
		case yn:
			return -1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case types.KindVarchar:
		return strings.Compare(a.S, b.S)
	case types.KindHugeInt, types.KindDecimal:
		return a.Int128().Cmp(b.Int128())
	case types.KindInterval:
		am, ad, au := a.IntervalParts()
		bm, bd, bu := b.IntervalParts()
		x := int64(am)*30*types.MicrosPerDay + int64(ad)*types.MicrosPerDay + au
		y := int64(bm)*30*types.MicrosPerDay + int64(bd)*types.MicrosPerDay + bu
		return cmpInt(x, y)
	}
	return cmpInt(a.I, b.I)
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func appendBool(b []byte, x bool) []byte {
	if x {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendI128(b []byte, x types.Int128) []byte {
	b = binary.AppendVarint(b, x.Hi)
	return binary.AppendUvarint(b, x.Lo)
}

func (r *reader) i128() types.Int128 { return types.Int128{Hi: r.varint(), Lo: r.uvarint()} }

func (s *countState) appendState(b []byte) []byte { return binary.AppendVarint(b, s.n) }
func (s *countState) readState(r *reader) error   { s.n = r.varint(); return r.err }

func (s *sumIntState) appendState(b []byte) []byte { return appendBool(appendI128(b, s.sum), s.seen) }
func (s *sumIntState) readState(r *reader) error {
	s.sum = r.i128()
	s.seen = r.byte1() == 1
	return r.err
}

func (s *sumDoubleState) appendState(b []byte) []byte { return s.fs.appendState(b) }
func (s *sumDoubleState) readState(r *reader) error {
	s.fs.readState(r)
	return r.err
}

func (s *avgDoubleState) appendState(b []byte) []byte {
	return binary.AppendVarint(s.fs.appendState(b), s.n)
}
func (s *avgDoubleState) readState(r *reader) error {
	s.fs.readState(r)
	s.n = r.varint()
	return r.err
}

func (s *avgIntState) appendState(b []byte) []byte {
	return binary.AppendVarint(appendI128(b, s.sum), s.n)
}
func (s *avgIntState) readState(r *reader) error {
	s.sum = r.i128()
	s.n = r.varint()
	return r.err
}

func (s *minMaxState) appendState(b []byte) []byte { return appendValue(appendBool(b, s.seen), s.v) }
func (s *minMaxState) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.v = r.value()
	return r.err
}

// AggCost is the estimated state of one aggregate call per (group, window).
type AggCost struct {
	Name  string
	Bytes int  // for an empty state
	Grows bool // whether the state grows with the input (sets, sketches, exact sums' partials)
}

// StateCost estimates what one live (group, window) costs for q: a fixed
// overhead (the group, its index slot, the value hash of a query that
// publishes before its finals, and for sessions the per-key structures),
// and each aggregate's state (its words, and for a boxed
// aggregate the box). The key bytes come on top. explain prints it, and
// the state-bytes gauge adds it up; a test holds it to the measured heap.
func StateCost(q *plan.Query) (overhead int, aggs []AggCost) {
	if q.Window != nil && q.Window.Kind == plan.Session {
		// A session is allocated alone (the group, and its words with the
		// session end after them), with a heap entry, a slot in its key's
		// session list, and per key a sessionGroup, its key string and a
		// map entry.
		overhead = int(unsafe.Sizeof(group{})) + 8 + 16 + 8 + 48 + 16 + 40
	} else {
		overhead = bytesPerGroup
	}
	var arena aggArena
	stride := 0
	for i := range q.Aggs {
		c := &q.Aggs[i]
		k, grows, err := newKernel(c, &arena)
		if err != nil {
			aggs = append(aggs, AggCost{Name: c.Name})
			continue
		}
		stride += k.nwords()
		n := 8 * k.nwords()
		if b, ok := k.(boxK); ok {
			n += boxBytes(b.fresh())
		}
		aggs = append(aggs, AggCost{Name: c.Name, Bytes: n, Grows: grows})
	}
	if keepsHashWord(q, stride) {
		overhead += 8 // the value hash word
	}
	return overhead, aggs
}

// sizeClass rounds n up the way the Go allocator does for small objects,
// closely enough for an estimate.
func sizeClass(n int) int {
	switch {
	case n <= 8:
		return 8
	case n <= 16:
		return 16
	case n <= 128:
		return (n + 15) &^ 15
	}
	return (n + 63) &^ 63
}
