package plan

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	"github.com/ubiksql/ubik/internal/types"
)

// ---- type rules (DuckDB) ----

// intRank orders the integer types for promotion.
func intRank(k types.Kind) int {
	switch k {
	case types.KindInteger:
		return 1
	case types.KindBigInt:
		return 2
	case types.KindHugeInt:
		return 3
	}
	return 0
}

func isInt(t types.Type) bool { return intRank(t.Kind) > 0 }

// decimalOfInt is the DECIMAL an integer type converts to in mixed
// arithmetic: INTEGER -> DECIMAL(10,0), BIGINT -> DECIMAL(19,0),
// HUGEINT -> DECIMAL(38,0).
func decimalOfInt(t types.Type) types.Type {
	switch t.Kind {
	case types.KindInteger:
		return types.Decimal(10, 0)
	case types.KindBigInt:
		return types.Decimal(19, 0)
	case types.KindHugeInt:
		return types.Decimal(38, 0)
	case types.KindBoolean:
		return types.Decimal(1, 0)
	}
	return t
}

// unifyDecimal is the DECIMAL holding both a and b: the larger scale and the
// larger number of integer digits, capped at 38.
func unifyDecimal(a, b types.Type) types.Type {
	scale := max(a.Scale, b.Scale)
	intd := max(int(a.Width)-int(a.Scale), int(b.Width)-int(b.Scale))
	w := intd + int(scale)
	if w > 38 {
		w = 38
	}
	return types.Decimal(uint8(w), scale)
}

// commonNumeric is the type two numeric operands are compared or combined in.
func commonNumeric(a, b types.Type) types.Type {
	switch {
	case a.Kind == types.KindDouble || b.Kind == types.KindDouble:
		return types.Double
	case a.Kind == types.KindDecimal || b.Kind == types.KindDecimal:
		return unifyDecimal(decimalOfInt(a), decimalOfInt(b))
	case intRank(a.Kind) >= intRank(b.Kind):
		return a
	}
	return b
}

// commonType is the type both a and b convert to implicitly (comparison,
// IN, CASE, COALESCE), or ok=false.
func commonType(a, b types.Type) (types.Type, bool) {
	switch {
	case a == b:
		return a, true
	case a.Kind == types.KindNull:
		return b, true
	case b.Kind == types.KindNull:
		return a, true
	case a.Kind == b.Kind && a.Kind == types.KindDecimal:
		return unifyDecimal(a, b), true
	case a.IsNumeric() && b.IsNumeric():
		return commonNumeric(a, b), true
	case a.Kind == types.KindTimestamp && b.Kind == types.KindDate,
		a.Kind == types.KindDate && b.Kind == types.KindTimestamp:
		return types.Timestamp, true
	}
	return types.Type{}, false
}

// ---- arithmetic kernels ----

func overflow(op string, t types.Type, a, b types.Value) error {
	return rangeErr("Overflow in %s of %s (%s %s %s)!", opName(op), physName(t), ValueText(a), op, ValueText(b))
}

func opName(op string) string {
	switch op {
	case "+":
		return "addition"
	case "-":
		return "subtraction"
	case "*":
		return "multiplication"
	case "//":
		return "division"
	}
	return "operation " + op
}

func addInt(e *binExpr, a, b types.Value) (types.Value, error) {
	r := a.I + b.I
	if e.t.Kind == types.KindInteger {
		if r < math.MinInt32 || r > math.MaxInt32 {
			return types.Value{}, overflow("+", e.t, a, b)
		}
	} else if (a.I >= 0) == (b.I >= 0) && (r >= 0) != (a.I >= 0) {
		return types.Value{}, overflow("+", e.t, a, b)
	}
	return types.Value{Kind: e.t.Kind, I: r}, nil
}

func subInt(e *binExpr, a, b types.Value) (types.Value, error) {
	r := a.I - b.I
	if e.t.Kind == types.KindInteger {
		if r < math.MinInt32 || r > math.MaxInt32 {
			return types.Value{}, overflow("-", e.t, a, b)
		}
	} else if (a.I >= 0) != (b.I >= 0) && (r >= 0) != (a.I >= 0) {
		return types.Value{}, overflow("-", e.t, a, b)
	}
	return types.Value{Kind: e.t.Kind, I: r}, nil
}

func mulInt(e *binExpr, a, b types.Value) (types.Value, error) {
	if e.t.Kind == types.KindInteger {
		r := a.I * b.I // both fit in int32, so the product fits in int64
		if r < math.MinInt32 || r > math.MaxInt32 {
			return types.Value{}, overflow("*", e.t, a, b)
		}
		return types.Value{Kind: e.t.Kind, I: r}, nil
	}
	hi, lo := bits.Mul64(uint64(absI64(a.I)), uint64(absI64(b.I)))
	neg := (a.I < 0) != (b.I < 0)
	if hi != 0 || (!neg && lo > math.MaxInt64) || (neg && lo > 1<<63) {
		return types.Value{}, overflow("*", e.t, a, b)
	}
	r := int64(lo) // wraps to MinInt64 for a magnitude of 2^63
	if neg {
		r = -r
	}
	return types.Value{Kind: e.t.Kind, I: r}, nil
}

func absI64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func addHuge(e *binExpr, a, b types.Value) (types.Value, error) {
	r, of := i128Of(a).Add(i128Of(b))
	if of {
		return types.Value{}, overflow("+", e.t, a, b)
	}
	return types.Huge(r), nil
}

func subHuge(e *binExpr, a, b types.Value) (types.Value, error) {
	r, of := i128Of(a).Sub(i128Of(b))
	if of {
		return types.Value{}, overflow("-", e.t, a, b)
	}
	return types.Huge(r), nil
}

func mulHuge(e *binExpr, a, b types.Value) (types.Value, error) {
	r, ok := mulI128(i128Of(a), i128Of(b))
	if !ok {
		return types.Value{}, overflow("*", e.t, a, b)
	}
	return types.Huge(r), nil
}

// Decimal kernels: the operands were rescaled at bind time (add, sub) or
// carry scales that add up (mul); the result must fit e.t.Width digits.
func decResult(e *binExpr, op string, r types.Int128, ok bool, a, b types.Value) (types.Value, error) {
	if !ok || !absLess(r, pow10i128[e.t.Width]) {
		return types.Value{}, rangeErr("Overflow in %s of DECIMAL(%d,%d) (%s %s %s)!", opName(op), e.t.Width, e.t.Scale, ValueText(a), op, ValueText(b))
	}
	return types.Dec(r, e.t.Scale), nil
}

func addDec(e *binExpr, a, b types.Value) (types.Value, error) {
	r, of := i128Of(a).Add(i128Of(b))
	return decResult(e, "+", r, !of, a, b)
}

func subDec(e *binExpr, a, b types.Value) (types.Value, error) {
	r, of := i128Of(a).Sub(i128Of(b))
	return decResult(e, "-", r, !of, a, b)
}

func mulDec(e *binExpr, a, b types.Value) (types.Value, error) {
	r, ok := mulI128(i128Of(a), i128Of(b))
	return decResult(e, "*", r, ok, a, b)
}

func addF(_ *binExpr, a, b types.Value) (types.Value, error) { return types.Float(a.F + b.F), nil }
func subF(_ *binExpr, a, b types.Value) (types.Value, error) { return types.Float(a.F - b.F), nil }
func mulF(_ *binExpr, a, b types.Value) (types.Value, error) { return types.Float(a.F * b.F), nil }

// divF is "/": both operands are DOUBLE; division by zero is NULL.
func divF(e *binExpr, a, b types.Value) (types.Value, error) {
	if b.F == 0 {
		return types.NullOf(types.Double), nil
	}
	return types.Float(a.F / b.F), nil
}

func modF(e *binExpr, a, b types.Value) (types.Value, error) {
	if b.F == 0 {
		return types.NullOf(types.Double), nil
	}
	return types.Float(math.Mod(a.F, b.F)), nil
}

// intDivInt is "//" on INTEGER/BIGINT: truncating division; by zero is NULL.
func intDivInt(e *binExpr, a, b types.Value) (types.Value, error) {
	if b.I == 0 {
		return types.NullOf(e.t), nil
	}
	lo, _ := intRange(e.t.Kind)
	if a.I == lo && b.I == -1 {
		return types.Value{}, overflow("//", e.t, a, b)
	}
	return types.Value{Kind: e.t.Kind, I: a.I / b.I}, nil
}

func modInt(e *binExpr, a, b types.Value) (types.Value, error) {
	if b.I == 0 {
		return types.NullOf(e.t), nil
	}
	if b.I == -1 {
		return types.Value{Kind: e.t.Kind}, nil
	}
	return types.Value{Kind: e.t.Kind, I: a.I % b.I}, nil
}

// HUGEINT division and modulo go through math/big (rare and not hot).
func intDivHuge(e *binExpr, a, b types.Value) (types.Value, error) {
	if i128Of(b).Sign() == 0 {
		return types.NullOf(e.t), nil
	}
	q := new(big.Int).Quo(i128Of(a).Big(), i128Of(b).Big())
	r, ok := types.Int128FromBig(q)
	if !ok {
		return types.Value{}, overflow("//", e.t, a, b)
	}
	return types.Huge(r), nil
}

func modHuge(e *binExpr, a, b types.Value) (types.Value, error) {
	if i128Of(b).Sign() == 0 {
		return types.NullOf(e.t), nil
	}
	m := new(big.Int).Rem(i128Of(a).Big(), i128Of(b).Big())
	r, _ := types.Int128FromBig(m)
	return types.Huge(r), nil
}

// ---- temporal kernels ----

func tsPlusInterval(e *binExpr, a, b types.Value) (types.Value, error) {
	m, d, us := b.IntervalParts()
	r, ok := addInterval(a.I, m, d, us)
	if !ok {
		return types.Value{}, rangeErr("timestamp out of range (%s + %s)", ValueText(a), ValueText(b))
	}
	return types.TS(r), nil
}

func intervalPlusTs(e *binExpr, a, b types.Value) (types.Value, error) {
	return tsPlusInterval(e, b, a)
}

func tsMinusInterval(e *binExpr, a, b types.Value) (types.Value, error) {
	m, d, us := b.IntervalParts()
	if us == math.MinInt64 {
		return types.Value{}, rangeErr("interval out of range")
	}
	r, ok := addInterval(a.I, -m, -d, -us)
	if !ok {
		return types.Value{}, rangeErr("timestamp out of range (%s - %s)", ValueText(a), ValueText(b))
	}
	return types.TS(r), nil
}

// tsMinusTs is TIMESTAMP - TIMESTAMP: an interval of whole days and the
// remaining microseconds, as DuckDB returns it.
func tsMinusTs(e *binExpr, a, b types.Value) (types.Value, error) {
	d := a.I - b.I
	if (a.I >= 0) != (b.I >= 0) && (d >= 0) != (a.I >= 0) {
		return types.Value{}, overflow("-", types.Timestamp, a, b)
	}
	days := d / usPerDay
	return types.Interv(0, int32(days), d-days*usPerDay), nil
}

func dateMinusDate(e *binExpr, a, b types.Value) (types.Value, error) {
	return types.Big(a.I - b.I), nil
}

func datePlusInt(e *binExpr, a, b types.Value) (types.Value, error) {
	r := a.I + b.I
	if r < minDateDays || r > maxDateDays {
		return types.Value{}, rangeErr("date out of range (%s + %d)", ValueText(a), b.I)
	}
	return types.DateDays(r), nil
}

func intPlusDate(e *binExpr, a, b types.Value) (types.Value, error) { return datePlusInt(e, b, a) }

func dateMinusInt(e *binExpr, a, b types.Value) (types.Value, error) {
	r := a.I - b.I
	if r < minDateDays || r > maxDateDays {
		return types.Value{}, rangeErr("date out of range (%s - %d)", ValueText(a), b.I)
	}
	return types.DateDays(r), nil
}

func intervalAdd(e *binExpr, a, b types.Value) (types.Value, error) {
	am, ad, au := a.IntervalParts()
	bm, bd, bu := b.IntervalParts()
	m, d, u := int64(am)+int64(bm), int64(ad)+int64(bd), au+bu
	if m != int64(int32(m)) || d != int64(int32(d)) || (au >= 0) == (bu >= 0) && (u >= 0) != (au >= 0) {
		return types.Value{}, rangeErr("interval out of range")
	}
	return types.Interv(int32(m), int32(d), u), nil
}

func intervalSub(e *binExpr, a, b types.Value) (types.Value, error) {
	bm, bd, bu := b.IntervalParts()
	if bu == math.MinInt64 || bm == math.MinInt32 || bd == math.MinInt32 {
		return types.Value{}, rangeErr("interval out of range")
	}
	return intervalAdd(e, a, types.Interv(-bm, -bd, -bu))
}

func concatText(e *binExpr, a, b types.Value) (types.Value, error) {
	return types.Str(a.S + b.S), nil
}

// ---- unary minus ----

func negInt(e *unExpr, a types.Value) (types.Value, error) {
	lo, _ := intRange(e.t.Kind)
	if a.I == lo {
		return types.Value{}, rangeErr("Overflow in negation of %s (-(%s))!", physName(e.t), ValueText(a))
	}
	return types.Value{Kind: e.t.Kind, I: -a.I}, nil
}

func negHuge(e *unExpr, a types.Value) (types.Value, error) {
	x := i128Of(a)
	if x.Hi == math.MinInt64 && x.Lo == 0 {
		return types.Value{}, rangeErr("Overflow in negation of %s (-(%s))!", physName(e.t), ValueText(a))
	}
	v := types.Value{Kind: e.t.Kind, Scale: a.Scale}
	n := x.Neg()
	v.Hi, v.I = n.Hi, int64(n.Lo)
	return v, nil
}

func negF(e *unExpr, a types.Value) (types.Value, error) { return types.Float(-a.F), nil }

func negInterval(e *unExpr, a types.Value) (types.Value, error) {
	m, d, us := a.IntervalParts()
	if us == math.MinInt64 || m == math.MinInt32 || d == math.MinInt32 {
		return types.Value{}, rangeErr("interval out of range")
	}
	return types.Interv(-m, -d, -us), nil
}

// ---- binding ----

// bindArith types op over l and r, inserting implicit casts. It returns a
// message (no position) when the operand types do not fit.
func bindArith(op string, l, r Expr) (Expr, string) {
	lt, rt := l.Type(), r.Type()
	// A string literal next to a typed operand takes that operand's type.
	if isStringLit(l) && rt.Kind != types.KindVarchar && rt.Kind != types.KindNull {
		lt = literalTargetFor(op, rt, true)
	}
	if isStringLit(r) && lt.Kind != types.KindVarchar && lt.Kind != types.KindNull {
		rt = literalTargetFor(op, lt, false)
	}
	var err error
	if l, err = coerce(l, lt); err != nil {
		return nil, err.Error()
	}
	if r, err = coerce(r, rt); err != nil {
		return nil, err.Error()
	}
	// NULL literals take the other side's type.
	if lt.Kind == types.KindNull && rt.Kind == types.KindNull {
		lt, rt = types.Integer, types.Integer
	}
	if lt.Kind == types.KindNull {
		lt = rt
		if op != "||" && rt.Kind == types.KindTimestamp && (op == "+" || op == "-") {
			lt = types.Interval
		}
		l, _ = coerce(l, lt)
	}
	if rt.Kind == types.KindNull {
		rt = lt
		if lt.Kind == types.KindTimestamp && (op == "+" || op == "-") {
			rt = types.Interval
		}
		r, _ = coerce(r, rt)
	}
	mk := func(t types.Type, fn binFn, lc, rc types.Type) (Expr, string) {
		var err error
		if l, err = coerce(l, lc); err != nil {
			return nil, err.Error()
		}
		if r, err = coerce(r, rc); err != nil {
			return nil, err.Error()
		}
		return &binExpr{op: op, l: l, r: r, t: t, fn: fn}, ""
	}
	if op == "||" {
		return mk(types.Varchar, concatText, types.Varchar, types.Varchar)
	}
	lk, rk := lt.Kind, rt.Kind
	if lt.IsNumeric() && rt.IsNumeric() {
		ct := commonNumeric(lt, rt)
		switch op {
		case "/":
			return mk(types.Double, divF, types.Double, types.Double)
		case "%":
			switch {
			case ct.Kind == types.KindHugeInt:
				return mk(ct, modHuge, ct, ct)
			case isInt(ct):
				return mk(ct, modInt, ct, ct)
			}
			return mk(types.Double, modF, types.Double, types.Double)
		case "//":
			switch {
			case ct.Kind == types.KindHugeInt:
				return mk(ct, intDivHuge, ct, ct)
			case isInt(ct):
				return mk(ct, intDivInt, ct, ct)
			}
			return nil, fmt.Sprintf("operator // (integer division) needs integer operands, got %s and %s; use / for a DOUBLE result", lt, rt)
		}
		switch ct.Kind {
		case types.KindDouble:
			return mk(ct, pick(op, addF, subF, mulF), ct, ct)
		case types.KindInteger, types.KindBigInt:
			return mk(ct, pick(op, addInt, subInt, mulInt), ct, ct)
		case types.KindHugeInt:
			return mk(ct, pick(op, addHuge, subHuge, mulHuge), ct, ct)
		case types.KindDecimal:
			ld, rd := decimalOfInt(lt), decimalOfInt(rt)
			if op == "*" {
				scale := int(ld.Scale) + int(rd.Scale)
				if scale > 38 {
					return nil, fmt.Sprintf("multiplying %s by %s needs scale %d, more than 38", lt, rt, scale)
				}
				w := min(int(ld.Width)+int(rd.Width), 38)
				return mk(types.Decimal(uint8(w), uint8(scale)), mulDec, ld, rd)
			}
			scale := max(ld.Scale, rd.Scale)
			intd := max(int(ld.Width)-int(ld.Scale), int(rd.Width)-int(rd.Scale))
			w := min(intd+int(scale)+1, 38)
			// Rescale each operand to the result scale (its width grows by
			// the added digits; the values then add as plain integers).
			lc := types.Decimal(uint8(min(int(ld.Width)+int(scale-ld.Scale), 38)), scale)
			rc := types.Decimal(uint8(min(int(rd.Width)+int(scale-rd.Scale), 38)), scale)
			return mk(types.Decimal(uint8(w), scale), pick(op, addDec, subDec, nil), lc, rc)
		}
	}
	switch {
	case lk == types.KindTimestamp && rk == types.KindInterval && op == "+":
		return mk(types.Timestamp, tsPlusInterval, lt, rt)
	case lk == types.KindInterval && rk == types.KindTimestamp && op == "+":
		return mk(types.Timestamp, intervalPlusTs, lt, rt)
	case lk == types.KindTimestamp && rk == types.KindInterval && op == "-":
		return mk(types.Timestamp, tsMinusInterval, lt, rt)
	case lk == types.KindDate && rk == types.KindInterval && op == "+":
		return mk(types.Timestamp, tsPlusInterval, types.Timestamp, rt)
	case lk == types.KindInterval && rk == types.KindDate && op == "+":
		return mk(types.Timestamp, intervalPlusTs, lt, types.Timestamp)
	case lk == types.KindDate && rk == types.KindInterval && op == "-":
		return mk(types.Timestamp, tsMinusInterval, types.Timestamp, rt)
	case (lk == types.KindTimestamp || lk == types.KindDate) && (rk == types.KindTimestamp || rk == types.KindDate) && op == "-":
		if lk == types.KindDate && rk == types.KindDate {
			return mk(types.BigInt, dateMinusDate, lt, rt)
		}
		return mk(types.Interval, tsMinusTs, types.Timestamp, types.Timestamp)
	case lk == types.KindDate && (rk == types.KindInteger || rk == types.KindBigInt) && op == "+":
		return mk(types.Date, datePlusInt, lt, types.BigInt)
	case (lk == types.KindInteger || lk == types.KindBigInt) && rk == types.KindDate && op == "+":
		return mk(types.Date, intPlusDate, types.BigInt, rt)
	case lk == types.KindDate && (rk == types.KindInteger || rk == types.KindBigInt) && op == "-":
		return mk(types.Date, dateMinusInt, lt, types.BigInt)
	case lk == types.KindInterval && rk == types.KindInterval && op == "+":
		return mk(types.Interval, intervalAdd, lt, rt)
	case lk == types.KindInterval && rk == types.KindInterval && op == "-":
		return mk(types.Interval, intervalSub, lt, rt)
	}
	return nil, fmt.Sprintf("operator %s does not apply to %s and %s", op, lt, rt)
}

func pick(op string, add, sub, mul binFn) binFn {
	switch op {
	case "+":
		return add
	case "-":
		return sub
	}
	return mul
}

// literalTargetFor is the type a string literal takes next to an operand of
// type other in op: the other's type, except that a literal next to a
// TIMESTAMP in +/- is an INTERVAL (ts - '5 minutes').
func literalTargetFor(op string, other types.Type, litLeft bool) types.Type {
	if op == "||" {
		return types.Varchar
	}
	if (op == "+" || op == "-") && (other.Kind == types.KindTimestamp || other.Kind == types.KindDate) {
		if op == "-" && !litLeft {
			return types.Interval // ts - '5 minutes'
		}
		if op == "+" {
			return types.Interval
		}
	}
	return other
}

func bindNeg(x Expr) (Expr, string) {
	t := x.Type()
	switch t.Kind {
	case types.KindInteger, types.KindBigInt:
		return &unExpr{op: "-", x: x, t: t, fn: negInt}, ""
	case types.KindHugeInt, types.KindDecimal:
		return &unExpr{op: "-", x: x, t: t, fn: negHuge}, ""
	case types.KindDouble:
		return &unExpr{op: "-", x: x, t: t, fn: negF}, ""
	case types.KindInterval:
		return &unExpr{op: "-", x: x, t: t, fn: negInterval}, ""
	case types.KindNull:
		return &Const{V: types.NullOf(types.Integer), T: types.Integer, Text: "NULL"}, ""
	}
	return nil, "unary minus does not apply to " + t.String()
}

// numberLiteral types a numeric literal as DuckDB does: an integer is
// INTEGER if it fits 32 bits, else BIGINT, else HUGEINT, else DOUBLE; a
// literal with a point is DECIMAL(digits, fraction digits) (1.5 is
// DECIMAL(2,1)), or DOUBLE beyond 38 digits; a literal with an exponent is
// DOUBLE.
func numberLiteral(text string, neg bool) (types.Value, types.Type, bool) {
	sign := ""
	if neg {
		sign = "-"
	}
	hasExp := false
	point := -1
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case 'e', 'E':
			hasExp = true
		case '.':
			point = i
		}
	}
	if hasExp {
		f, err := strconv.ParseFloat(sign+text, 64)
		if err != nil && !isRangeErr(err) {
			return types.Value{}, types.Type{}, false
		}
		return types.Float(f), types.Double, true
	}
	if point < 0 {
		if n, err := strconv.ParseInt(sign+text, 10, 64); err == nil {
			if n >= math.MinInt32 && n <= math.MaxInt32 {
				return types.Int(int32(n)), types.Integer, true
			}
			return types.Big(n), types.BigInt, true
		}
		b, ok := new(big.Int).SetString(sign+text, 10)
		if !ok {
			return types.Value{}, types.Type{}, false
		}
		if x, ok := types.Int128FromBig(b); ok {
			return types.Huge(x), types.HugeInt, true
		}
		f, _ := new(big.Float).SetInt(b).Float64()
		return types.Float(f), types.Double, true
	}
	intPart := text[:point]
	frac := text[point+1:]
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	w := len(intPart) + len(frac)
	scale := len(frac)
	if w > 38 {
		f, err := strconv.ParseFloat(sign+text, 64)
		if err != nil && !isRangeErr(err) {
			return types.Value{}, types.Type{}, false
		}
		return types.Float(f), types.Double, true
	}
	if w == 0 {
		w = 1
	}
	t := types.Decimal(uint8(w), uint8(scale))
	x, ok := parseDecimalText(sign+text, t.Width, t.Scale)
	if !ok {
		return types.Value{}, types.Type{}, false
	}
	return types.Dec(x, t.Scale), t, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
