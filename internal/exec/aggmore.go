package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"github.com/axiomhq/hyperloglog"

	"github.com/ubiksql/ubik/internal/types"
)

// The wider aggregates. Every state is mergeable (sessions merge) and
// serializable (checkpoints), and every final value is independent of the
// order rows arrived in, of batching and of merges: ties are broken on the
// values themselves, sums are exact, and the sketches' states are functions
// of the multiset of inputs. Results for NULL inputs and the empty group:
//
//	count(DISTINCT x)        NULLs ignored; empty -> 0
//	min_by/max_by(arg, val)  rows with a NULL arg or val ignored; empty -> NULL
//	first/last(x)            x at the smallest/largest event time, NULL x included; empty -> NULL
//	var_samp, stddev_samp    NULLs ignored; fewer than 2 values -> NULL
//	var_pop, stddev_pop      NULLs ignored; empty -> NULL, one value -> 0
//	bool_and, bool_or        NULLs ignored; empty -> NULL
//	approx_count_distinct    NULLs ignored; empty -> 0
//	approx_quantile          NULLs ignored; empty -> NULL

// argsUpdater is implemented by states whose calls take several arguments
// (min_by/max_by, first/last with the hidden event time).
type argsUpdater interface {
	updateArgs(args []types.Value) error
}

// updateState folds one row's evaluated arguments into s.
func updateState(s aggState, args []types.Value) error {
	if u, ok := s.(argsUpdater); ok {
		return u.updateArgs(args)
	}
	if len(args) == 0 {
		return s.update(types.Value{Kind: types.KindBoolean, I: 1}) // count(*): every row counts
	}
	return s.update(args[0])
}

// totalCmp orders values for tie-breaking: Compare, then -0.0 before +0.0,
// and NULL after every value (NULLS LAST).
func totalCmp(a, b types.Value) int {
	switch {
	case a.Null && b.Null:
		return 0
	case a.Null:
		return 1
	case b.Null:
		return -1
	}
	if c := Compare(a, b); c != 0 {
		return c
	}
	if a.Kind == types.KindDouble && a.F == 0 && b.F == 0 {
		sa, sb := math.Signbit(a.F), math.Signbit(b.F)
		switch {
		case sa && !sb:
			return -1
		case !sa && sb:
			return 1
		}
	}
	return 0
}

func ownValue(v types.Value) types.Value {
	if v.Kind == types.KindVarchar && !v.Null {
		v.S = strings.Clone(v.S)
	}
	return v
}

// ---- DISTINCT ----

// distinctState feeds each distinct value once to an inner state. It keeps
// the set of values (memory grows with the number of distinct values) and
// serializes it sorted, so a checkpoint's bytes depend only on the set. The
// inner state is rebuilt from the set on restore.
type distinctState struct {
	inner aggState
	t     types.Type // the argument's type, to decode set members
	set   keySet     // appendDistinctCell of each distinct value
	kb    []byte
}

func (s *distinctState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	// One spelling per class, so that (say) sum(DISTINCT x) over 0.0 and
	// -0.0 does not depend on which arrived first.
	if v.Kind == types.KindDouble {
		if v.F == 0 {
			v.F = 0
		} else if math.IsNaN(v.F) {
			v.F = math.NaN()
		}
	}
	s.kb = appendDistinctCell(s.kb[:0], v)
	if s.set.has(s.kb) {
		return nil
	}
	// The inner state first: a value it refuses (an overflowing sum) must
	// not join the set.
	if err := s.inner.update(v); err != nil {
		return err
	}
	s.set.add(s.kb)
	return nil
}

// member decodes a set member back into its value (strings alias k).
func (s *distinctState) member(k string) types.Value {
	var one [1]types.Value
	return decodeKeyBytes(k, []types.Type{s.t}, one[:0])[0]
}

func (s *distinctState) merge(o aggState) error {
	t := o.(*distinctState)
	for _, k := range t.set.sorted() {
		if err := s.update(t.member(k)); err != nil {
			return err
		}
	}
	return nil
}

func (s *distinctState) result() types.Value { return s.inner.result() }
func (s *distinctState) size() int {
	return 64 + s.set.bytes() + cap(s.kb) + s.inner.size()
}

func (s *distinctState) appendState(b []byte) []byte {
	keys := s.set.sorted()
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendValue(b, s.member(k))
	}
	return b
}

func (s *distinctState) readState(r *reader) error {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("distinct set")
		return r.err
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		if err := s.update(r.value()); err != nil {
			return fmt.Errorf("%w: distinct set: %v", ErrBadState, err)
		}
	}
	return r.err
}

// ---- min_by / max_by ----

// byState is min_by(arg, val) / max_by(arg, val): arg at the row with the
// smallest / largest val. Rows with a NULL arg or val are skipped (DuckDB's
// arg_min/arg_max; arg_min_null is not provided). Ties on val go to the
// smallest arg for min_by and the largest for max_by, so the result never
// depends on arrival order (DuckDB keeps the first row it saw).
type byState struct {
	arg, val types.Value
	seen     bool
	max      bool
	t        types.Type
}

func (s *byState) update(types.Value) error {
	return errors.New("exec: min_by/max_by takes two arguments")
}

func (s *byState) updateArgs(a []types.Value) error {
	if a[0].Null || a[1].Null {
		return nil
	}
	s.offer(a[0], a[1])
	return nil
}

func (s *byState) offer(arg, val types.Value) {
	if s.seen {
		c := totalCmp(val, s.val)
		if c == 0 {
			c = totalCmp(arg, s.arg)
		}
		if s.max && c <= 0 || !s.max && c >= 0 {
			return
		}
	}
	s.arg, s.val, s.seen = ownValue(arg), ownValue(val), true
}

func (s *byState) merge(o aggState) error {
	if t := o.(*byState); t.seen {
		s.offer(t.arg, t.val)
	}
	return nil
}

func (s *byState) result() types.Value {
	if !s.seen {
		return types.NullOf(s.t)
	}
	return s.arg
}
func (s *byState) size() int { return 120 + len(s.arg.S) + len(s.val.S) }
func (s *byState) appendState(b []byte) []byte {
	return appendValue(appendValue(appendBool(b, s.seen), s.arg), s.val)
}
func (s *byState) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.arg, s.val = r.value(), r.value()
	return r.err
}

// ---- first / last by event time ----

// firstLastState is first(x) / last(x): x at the smallest / largest event
// time. Streams arrive out of order, so DuckDB's arrival-order first would
// not be reproducible; ubik orders rows by (event time, x) with NULL x last
// and -0.0 before 0.0, and first/last are the two ends of that order.
type firstLastState struct {
	v    types.Value
	ts   int64
	seen bool
	last bool
	t    types.Type
}

func (s *firstLastState) update(types.Value) error {
	return errors.New("exec: first/last needs the event time argument")
}

func (s *firstLastState) updateArgs(a []types.Value) error {
	if a[1].Null {
		return nil // no event time: the row has no place in the order
	}
	s.offer(a[0], a[1].I)
	return nil
}

func (s *firstLastState) offer(v types.Value, ts int64) {
	if s.seen {
		c := cmpInt(ts, s.ts)
		if c == 0 {
			c = totalCmp(v, s.v)
		}
		if s.last && c <= 0 || !s.last && c >= 0 {
			return
		}
	}
	s.v, s.ts, s.seen = ownValue(v), ts, true
}

func (s *firstLastState) merge(o aggState) error {
	if t := o.(*firstLastState); t.seen {
		s.offer(t.v, t.ts)
	}
	return nil
}

func (s *firstLastState) result() types.Value {
	if !s.seen || s.v.Null {
		return types.NullOf(s.t)
	}
	return s.v
}
func (s *firstLastState) size() int { return 80 + len(s.v.S) }
func (s *firstLastState) appendState(b []byte) []byte {
	return binary.AppendVarint(appendValue(appendBool(b, s.seen), s.v), s.ts)
}
func (s *firstLastState) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.v = r.value()
	s.ts = r.varint()
	return r.err
}

// ---- variance and standard deviation ----

// varState keeps n, the exact sum of x and the exact sum of x² (each x² is
// split into x*x and its rounding error with an FMA, and both go into the
// exact sum). The result is n*Σx² - (Σx)² over n(n-1) (or n²) computed in
// exact rational arithmetic and rounded once: the correctly rounded
// variance of the inputs as doubles, whatever their order, batching or
// merging. This holds while every |x| is in [2^-480, 2^511] or 0; beyond,
// x*x underflows (tiny values lose bits of x², still deterministically) or
// overflows. A NaN or infinite input, or an overflowing square, makes the
// result NaN (PostgreSQL gives NaN for infinite inputs; DuckDB raises an
// out-of-range error). stddev is the square root, rounded once from 128
// bits.
type varState struct {
	n         int64
	sx, sxx   fsum
	nonFinite bool
	pop, sqrt bool
	decScale  uint8
	isDec     bool
}

func (s *varState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	var x float64
	switch v.Kind {
	case types.KindDouble:
		x = v.F
	case types.KindHugeInt:
		x = v.Int128().Float64()
	case types.KindDecimal:
		x = decimalFloat(v.Int128(), v.Scale)
	default:
		x = float64(v.I)
	}
	s.n++
	hi := x * x
	if math.IsInf(hi, 0) || math.IsNaN(hi) {
		s.nonFinite = true
		return nil
	}
	s.sx.add(x)
	s.sxx.add(hi)
	s.sxx.add(math.FMA(x, x, -hi))
	return nil
}

// decimalFloat is the double nearest to unscaled / 10^scale.
func decimalFloat(u types.Int128, scale uint8) float64 {
	if scale == 0 {
		return u.Float64()
	}
	// Both operands exact doubles: one correctly rounded division.
	if u.IsInt64() && scale <= 22 {
		if i := int64(u.Lo); i > -1<<53 && i < 1<<53 {
			return float64(i) / math.Pow10(int(scale))
		}
	}
	r := new(big.Rat).SetFrac(u.Big(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	f, _ := r.Float64()
	return f
}

func (s *varState) merge(o aggState) error {
	t := o.(*varState)
	s.n += t.n
	s.nonFinite = s.nonFinite || t.nonFinite
	s.sx.merge(&t.sx)
	s.sxx.merge(&t.sxx)
	return nil
}

func (s *varState) result() types.Value {
	switch {
	case s.n == 0, s.n == 1 && !s.pop:
		return types.NullOf(types.Double)
	case s.nonFinite:
		return types.Float(math.NaN())
	case s.n == 1:
		return types.Float(0)
	}
	n := new(big.Rat).SetInt64(s.n)
	sx, sxx := s.sx.rat(), s.sxx.rat()
	num := new(big.Rat).Mul(n, sxx)
	num.Sub(num, new(big.Rat).Mul(sx, sx))
	if num.Sign() < 0 {
		num.SetInt64(0) // cannot happen with exact sums; guards underflowed squares
	}
	den := new(big.Rat).SetInt64(s.n)
	if s.pop {
		den.Mul(den, n)
	} else {
		den.Mul(den, new(big.Rat).SetInt64(s.n-1))
	}
	v := num.Quo(num, den)
	if s.sqrt {
		f := new(big.Float).SetPrec(128).SetRat(v)
		f.Sqrt(f)
		r, _ := f.Float64()
		return types.Float(r)
	}
	r, _ := v.Float64()
	return types.Float(r)
}

func (s *varState) size() int { return s.sx.bytes() + s.sxx.bytes() + 24 }
func (s *varState) appendState(b []byte) []byte {
	b = binary.AppendVarint(b, s.n)
	b = appendBool(b, s.nonFinite)
	return s.sxx.appendState(s.sx.appendState(b))
}
func (s *varState) readState(r *reader) error {
	s.n = r.varint()
	s.nonFinite = r.byte1() == 1
	s.sx.readState(r)
	s.sxx.readState(r)
	return r.err
}

// rat is the exact value of the sum (finite inputs only).
func (s *fsum) rat() *big.Rat {
	if s.ext != nil && s.ext.wide != nil {
		r, _ := s.ext.wide.Rat(nil)
		return r
	}
	r := new(big.Rat)
	for _, p := range s.partials() {
		r.Add(r, new(big.Rat).SetFloat64(p))
	}
	return r
}

// ---- bool_and / bool_or ----

type boolState struct {
	v, seen bool
	or      bool
}

func (s *boolState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	b := v.I != 0
	if !s.seen {
		s.v, s.seen = b, true
	} else if s.or {
		s.v = s.v || b
	} else {
		s.v = s.v && b
	}
	return nil
}
func (s *boolState) merge(o aggState) error {
	if t := o.(*boolState); t.seen {
		return s.update(types.Bool(t.v))
	}
	return nil
}
func (s *boolState) result() types.Value {
	if !s.seen {
		return types.NullOf(types.Boolean)
	}
	return types.Bool(s.v)
}
func (s *boolState) size() int                   { return 8 }
func (s *boolState) appendState(b []byte) []byte { return appendBool(appendBool(b, s.seen), s.v) }
func (s *boolState) readState(r *reader) error {
	s.seen = r.byte1() == 1
	s.v = r.byte1() == 1
	return r.err
}

// ---- approx_count_distinct ----

// hllState is a HyperLogLog++ sketch (github.com/axiomhq/hyperloglog,
// 14-bit precision: 16384 registers, standard error 0.81%; sparse, and so
// exact-ish and small, for small counts). Its registers are maxima over the
// hashed inputs and its sparse list is a set, so the estimate does not
// depend on order or merges. Values are hashed in their canonical binary
// form (one 0.0, one NaN).
type hllState struct {
	sk *hyperloglog.Sketch // nil until the first value
	kb []byte
	// n counts insertions and est is the sketch's estimated memory,
	// refreshed at n = 1, 2, 4, ... 1024 and then every 1024 insertions
	// (the library reports no size; its encoding's length is a proxy).
	n, est int
}

func (s *hllState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	if s.sk == nil {
		s.sk = hyperloglog.New14()
	}
	s.kb = appendDistinctCell(s.kb[:0], v)
	s.sk.Insert(s.kb)
	s.n++
	if (s.n <= 1024 && s.n&(s.n-1) == 0) || s.n%1024 == 0 {
		s.sizeSketch()
	}
	return nil
}

// sizeSketch re-estimates the sketch's memory from its encoding's length m:
// measured on axiomhq/hyperloglog v0.3, a small sparse sketch (a Go set of
// pending hashes and a compressed list) costs about 78 + 2.6m bytes, a
// large or dense one about 1305 + 1.05m.
func (s *hllState) sizeSketch() {
	enc, err := s.sk.MarshalBinary()
	if err != nil {
		return
	}
	if m := len(enc); m < 790 {
		s.est = 78 + m*26/10
	} else {
		s.est = 1305 + m*105/100
	}
}

func (s *hllState) merge(o aggState) error {
	t := o.(*hllState)
	if t.sk == nil {
		return nil
	}
	if s.sk == nil {
		s.sk = t.sk.Clone()
	} else if err := s.sk.Merge(t.sk); err != nil {
		return err
	}
	s.n += t.n
	s.sizeSketch()
	return nil
}

func (s *hllState) result() types.Value {
	if s.sk == nil {
		return types.Big(0)
	}
	return types.Big(int64(s.sk.Estimate()))
}

func (s *hllState) size() int { return 64 + cap(s.kb) + s.est }

func (s *hllState) appendState(b []byte) []byte {
	if s.sk == nil {
		return append(b, 0)
	}
	// Estimate compacts the sparse buffer into the sorted sparse list, so
	// the encoding depends only on the inserted set.
	s.sk.Estimate()
	enc, err := s.sk.MarshalBinary()
	if err != nil {
		// A New14 sketch always has a valid precision.
		panic(fmt.Sprintf("exec: hyperloglog marshal: %v", err))
	}
	b = binary.AppendUvarint(b, uint64(len(enc)))
	return append(b, enc...)
}

func (s *hllState) readState(r *reader) error {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return r.err
	}
	data := r.bytes(int(n))
	if r.err != nil {
		return r.err
	}
	s.sk = hyperloglog.New14()
	if err := s.sk.UnmarshalBinary(data); err != nil {
		return fmt.Errorf("%w: hyperloglog: %v", ErrBadState, err)
	}
	s.sizeSketch()
	return nil
}

// ---- approx_quantile ----

// quantileAccuracy is the DDSketch relative accuracy: the returned value is
// within 1% (relative) of a value of the right rank, while the sketch spans
// fewer than quantileBins bins per sign (values within a factor of about
// e^80 of the largest magnitude); below that the lowest bins collapse.
const (
	quantileAccuracy = 0.01
	quantileBins     = 4096
)

// quantileState is approx_quantile(x, q) on a DDSketch
// (github.com/DataDog/sketches-go). Bin counts add, so the sketch and its
// answer depend only on the multiset of inputs. DuckDB uses a t-digest,
// whose answer depends on insertion order. NaN and ±Infinity are counted
// beside the sketch and take their places in the order (-Inf first, +Inf
// then NaN last, as DuckDB orders doubles).
type quantileState struct {
	sk              *ddsketch.DDSketch
	ninf, pinf, nan int64
	// below, above count finite values beyond the sketch's trackable range
	// (magnitude above ~1.7e308); they answer as the exact extremes.
	below, above int64
	// lo, hi are the exact extremes of the sketched values: the answer is
	// clamped to them, so a group of equal values answers exactly and the
	// error never exceeds the sketch's.
	lo, hi float64
	q      float64
	t      types.Type
}

func newQuantileSketch() *ddsketch.DDSketch {
	m, err := mapping.NewLogarithmicMapping(quantileAccuracy)
	if err != nil {
		panic(fmt.Sprintf("exec: ddsketch mapping: %v", err)) // a constant, valid accuracy
	}
	return ddsketch.NewDDSketch(m, store.NewCollapsingLowestDenseStore(quantileBins), store.NewCollapsingLowestDenseStore(quantileBins))
}

func (s *quantileState) update(v types.Value) error {
	if v.Null {
		return nil
	}
	var x float64
	switch v.Kind {
	case types.KindDouble:
		x = v.F
	case types.KindDecimal:
		x = decimalFloat(v.Int128(), v.Scale)
	default:
		x = float64(v.I)
	}
	switch {
	case math.IsNaN(x):
		s.nan++
		return nil
	case math.IsInf(x, -1):
		s.ninf++
		return nil
	case math.IsInf(x, 1):
		s.pinf++
		return nil
	}
	if s.sk == nil {
		s.sk = newQuantileSketch()
		s.lo, s.hi = x, x
	}
	s.lo, s.hi = min(s.lo, x), max(s.hi, x)
	switch err := s.sk.Add(x); {
	case err == nil:
	case x > 0:
		s.above++
	default:
		s.below++
	}
	return nil
}

func (s *quantileState) merge(o aggState) error {
	t := o.(*quantileState)
	s.ninf += t.ninf
	s.pinf += t.pinf
	s.nan += t.nan
	s.below += t.below
	s.above += t.above
	if t.sk == nil {
		return nil
	}
	if s.sk == nil {
		s.sk = newQuantileSketch()
		s.lo, s.hi = t.lo, t.hi
	}
	s.lo, s.hi = min(s.lo, t.lo), max(s.hi, t.hi)
	return s.sk.MergeWith(t.sk)
}

func (s *quantileState) result() types.Value {
	var sc float64
	if s.sk != nil {
		sc = s.sk.GetCount()
	}
	total := float64(s.ninf+s.below+s.above+s.pinf+s.nan) + sc
	if total == 0 {
		return types.NullOf(s.t)
	}
	// The order: -Inf, untrackably low, the sketch, untrackably high,
	// +Inf, NaN.
	rank := s.q * (total - 1)
	var x float64
	switch {
	case rank < float64(s.ninf):
		x = math.Inf(-1)
	case rank < float64(s.ninf+s.below):
		x = s.lo
	case rank-float64(s.ninf+s.below) < sc:
		q := 0.0
		if sc > 1 {
			q = min(1, (rank-float64(s.ninf+s.below))/(sc-1))
		}
		x, _ = s.sk.GetValueAtQuantile(q)
		x = min(max(x, s.lo), s.hi)
	case rank-float64(s.ninf+s.below)-sc < float64(s.above):
		x = s.hi
	case rank-float64(s.ninf+s.below+s.above)-sc < float64(s.pinf):
		x = math.Inf(1)
	default:
		x = math.NaN()
	}
	return quantileValue(x, s.t)
}

// quantileValue converts the sketch's double to the argument's type:
// integers and decimals round half to even and clamp to the type's range.
func quantileValue(x float64, t types.Type) types.Value {
	switch t.Kind {
	case types.KindDouble:
		return types.Float(x)
	case types.KindInteger, types.KindBigInt:
		lo, hi := float64(math.MinInt64), float64(math.MaxInt64)
		if t.Kind == types.KindInteger {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if math.IsNaN(x) {
			x = hi
		}
		r := math.RoundToEven(x)
		switch {
		case r <= lo:
			return types.Value{Kind: t.Kind, I: int64(lo)}
		case r >= hi:
			if t.Kind == types.KindBigInt {
				return types.Value{Kind: t.Kind, I: math.MaxInt64}
			}
			return types.Value{Kind: t.Kind, I: int64(hi)}
		}
		return types.Value{Kind: t.Kind, I: int64(r)}
	case types.KindDecimal:
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Width)), nil)
		limit.Sub(limit, big.NewInt(1))
		var u *big.Int
		if math.IsInf(x, 0) || math.IsNaN(x) {
			u = new(big.Int).Set(limit)
			if math.IsInf(x, -1) {
				u.Neg(u)
			}
		} else {
			f := new(big.Float).SetPrec(2200).SetFloat64(x)
			f.Mul(f, new(big.Float).SetPrec(2200).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale)), nil)))
			u = roundHalfEven(f)
			if u.CmpAbs(limit) > 0 {
				if u.Sign() < 0 {
					u = new(big.Int).Neg(limit)
				} else {
					u = limit
				}
			}
		}
		v, _ := types.Int128FromBig(u)
		return types.Dec(v, t.Scale)
	}
	return types.NullOf(t)
}

func roundHalfEven(f *big.Float) *big.Int {
	i, _ := f.Int(nil) // truncates toward zero
	frac := new(big.Float).Sub(f, new(big.Float).SetInt(i))
	half := big.NewFloat(0.5)
	c := new(big.Float).Abs(frac).Cmp(half)
	if c > 0 || c == 0 && i.Bit(0) == 1 {
		if f.Sign() < 0 {
			i.Sub(i, big.NewInt(1))
		} else {
			i.Add(i, big.NewInt(1))
		}
	}
	return i
}

// size: measured on sketches-go v1.4.8, a sketch costs about 260 bytes
// plus its dense stores, whose bins (8 bytes each) cover the index range
// plus 63, in a slice grown by doubling from 64.
func (s *quantileState) size() int {
	n := 96
	if s.sk != nil {
		n += 260 + storeBytes(s.sk.GetPositiveValueStore()) + storeBytes(s.sk.GetNegativeValueStore())
	}
	return n
}

func storeBytes(st store.Store) int {
	if st.IsEmpty() {
		return 0
	}
	lo, _ := st.MinIndex()
	hi, _ := st.MaxIndex()
	c := 64
	for c < min(hi-lo+1+63, quantileBins) {
		c *= 2
	}
	return 8 * c
}

func (s *quantileState) appendState(b []byte) []byte {
	b = binary.AppendVarint(b, s.ninf)
	b = binary.AppendVarint(b, s.pinf)
	b = binary.AppendVarint(b, s.nan)
	b = binary.AppendVarint(b, s.below)
	b = binary.AppendVarint(b, s.above)
	if s.sk == nil {
		return append(b, 0)
	}
	var enc []byte
	s.sk.Encode(&enc, true)
	// 1 + len: an empty sketch (only untrackable values) encodes to no
	// bytes but still carries lo and hi.
	b = binary.AppendUvarint(b, uint64(len(enc))+1)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.lo))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.hi))
	return append(b, enc...)
}

func (s *quantileState) readState(r *reader) error {
	s.ninf, s.pinf, s.nan = r.varint(), r.varint(), r.varint()
	s.below, s.above = r.varint(), r.varint()
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return r.err
	}
	s.lo, s.hi = r.f64(), r.f64()
	data := r.bytes(int(n - 1))
	if r.err != nil {
		return r.err
	}
	s.sk = newQuantileSketch()
	if err := s.sk.DecodeAndMergeWith(data); err != nil {
		return fmt.Errorf("%w: ddsketch: %v", ErrBadState, err)
	}
	return nil
}
