package plan

import (
	"math"
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/types"
)

// Compiled expressions. Each is a small struct whose types were fixed at bind
// time, so Eval does no type dispatch beyond a switch on a precomputed kind,
// no map lookups and no reflection; numeric, boolean and timestamp
// operations do not allocate.

// Const is a literal (or a folded constant).
type Const struct {
	V    types.Value
	T    types.Type
	Text string
	// strLit marks an untyped string literal, which converts implicitly to
	// the type of the operand it meets.
	strLit bool
}

func (e *Const) Type() types.Type                        { return e.T }
func (e *Const) Eval([]types.Value) (types.Value, error) { return e.V, nil }
func (e *Const) String() string                          { return e.Text }

// ColRef reads one cell of the row (a source column, or a slot of the
// post-aggregation row).
type ColRef struct {
	Index int
	T     types.Type
	Name  string
	// post marks a reference into the post-aggregation row; String then
	// shows the slot ("sum(amount)#2").
	post bool
}

func (e *ColRef) Type() types.Type { return e.T }
func (e *ColRef) Eval(row []types.Value) (types.Value, error) {
	return row[e.Index], nil
}
func (e *ColRef) String() string {
	if e.post {
		return e.Name + "#" + strconv.Itoa(e.Index)
	}
	return e.Name
}

// castExpr converts its operand.
type castExpr struct {
	x      Expr
	to     types.Type
	try    bool
	fn     castFn
	name   string // "CAST" or "TRY_CAST"; "" for an implicit cast
	toText string // the target type as written when it says more than to does (TIMESTAMP(3))
}

func (e *castExpr) Type() types.Type { return e.to }
func (e *castExpr) Eval(row []types.Value) (types.Value, error) {
	v, err := e.x.Eval(row)
	if err != nil {
		return v, err
	}
	if v.Null {
		return types.NullOf(e.to), nil
	}
	r, err := e.fn(v)
	if err != nil {
		if e.try {
			return types.NullOf(e.to), nil
		}
		return r, err
	}
	return r, nil
}
func (e *castExpr) String() string {
	n := e.name
	if n == "" {
		n = "CAST"
	}
	to := e.toText
	if to == "" {
		to = e.to.String()
	}
	return n + "(" + e.x.String() + " AS " + to + ")"
}

// binFn computes a binary operation over two non-NULL values.
type binFn func(e *binExpr, a, b types.Value) (types.Value, error)

// binExpr is an arithmetic or string operation: NULL in, NULL out.
type binExpr struct {
	op   string
	l, r Expr
	t    types.Type
	fn   binFn
}

func (e *binExpr) Type() types.Type { return e.t }
func (e *binExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.l.Eval(row)
	if err != nil {
		return a, err
	}
	b, err := e.r.Eval(row)
	if err != nil {
		return b, err
	}
	if a.Null || b.Null {
		return types.NullOf(e.t), nil
	}
	return e.fn(e, a, b)
}
func (e *binExpr) String() string { return "(" + e.l.String() + " " + e.op + " " + e.r.String() + ")" }

// unFn computes a unary operation over a non-NULL value.
type unFn func(e *unExpr, a types.Value) (types.Value, error)

type unExpr struct {
	op string
	x  Expr
	t  types.Type
	fn unFn
}

func (e *unExpr) Type() types.Type { return e.t }
func (e *unExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.x.Eval(row)
	if err != nil || a.Null {
		if a.Null {
			return types.NullOf(e.t), err
		}
		return a, err
	}
	return e.fn(e, a)
}
func (e *unExpr) String() string {
	s := e.x.String()
	if strings.HasPrefix(s, "-") {
		return e.op + " " + s
	}
	return e.op + s
}

// cmpKind selects how two values of one (already unified) type compare.
type cmpKind uint8

const (
	cmpInt    cmpKind = iota // BOOLEAN, INTEGER, BIGINT, TIMESTAMP, DATE: I
	cmpI128                  // HUGEINT, DECIMAL of equal scale
	cmpFloat                 // DOUBLE, NaN greatest and equal to itself (DuckDB)
	cmpString                // VARCHAR, bytewise
	cmpInterval
)

func cmpKindOf(t types.Type) cmpKind {
	switch t.Kind {
	case types.KindHugeInt, types.KindDecimal:
		return cmpI128
	case types.KindDouble:
		return cmpFloat
	case types.KindVarchar:
		return cmpString
	case types.KindInterval:
		return cmpInterval
	}
	return cmpInt
}

// intervalKey normalizes an interval for ordering the way DuckDB does:
// 30-day months, 24-hour days.
func intervalKey(v types.Value) (int64, int64) {
	m, d, us := v.IntervalParts()
	total := us + int64(d)*usPerDay
	days := floorDiv(total, usPerDay)
	rem := total - days*usPerDay
	return int64(m)*30 + days, rem
}

func compare(k cmpKind, a, b types.Value) int {
	switch k {
	case cmpInt:
		switch {
		case a.I < b.I:
			return -1
		case a.I > b.I:
			return 1
		}
		return 0
	case cmpI128:
		return i128Of(a).Cmp(i128Of(b))
	case cmpFloat:
		an, bn := math.IsNaN(a.F), math.IsNaN(b.F)
		switch {
		case an && bn:
			return 0
		case an:
			return 1
		case bn:
			return -1
		case a.F < b.F:
			return -1
		case a.F > b.F:
			return 1
		}
		return 0
	case cmpString:
		return strings.Compare(a.S, b.S)
	case cmpInterval:
		ad, ar := intervalKey(a)
		bd, br := intervalKey(b)
		switch {
		case ad < bd:
			return -1
		case ad > bd:
			return 1
		case ar < br:
			return -1
		case ar > br:
			return 1
		}
		return 0
	}
	return 0
}

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpOpText = [...]string{"=", "<>", "<", "<=", ">", ">="}

func (o cmpOp) holds(c int) bool {
	switch o {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

// cmpExpr compares two operands of one type.
type cmpExpr struct {
	op   cmpOp
	kind cmpKind
	l, r Expr
}

func (e *cmpExpr) Type() types.Type { return types.Boolean }
func (e *cmpExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.l.Eval(row)
	if err != nil {
		return a, err
	}
	b, err := e.r.Eval(row)
	if err != nil {
		return b, err
	}
	if a.Null || b.Null {
		return types.NullOf(types.Boolean), nil
	}
	return types.Bool(e.op.holds(compare(e.kind, a, b))), nil
}
func (e *cmpExpr) String() string {
	return "(" + e.l.String() + " " + cmpOpText[e.op] + " " + e.r.String() + ")"
}

// distinctExpr is IS [NOT] DISTINCT FROM: NULL-safe equality.
type distinctExpr struct {
	kind cmpKind
	l, r Expr
	not  bool
}

func (e *distinctExpr) Type() types.Type { return types.Boolean }
func (e *distinctExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.l.Eval(row)
	if err != nil {
		return a, err
	}
	b, err := e.r.Eval(row)
	if err != nil {
		return b, err
	}
	var distinct bool
	switch {
	case a.Null && b.Null:
		distinct = false
	case a.Null || b.Null:
		distinct = true
	default:
		distinct = compare(e.kind, a, b) != 0
	}
	return types.Bool(distinct != e.not), nil
}
func (e *distinctExpr) String() string {
	op := " IS DISTINCT FROM "
	if e.not {
		op = " IS NOT DISTINCT FROM "
	}
	return "(" + e.l.String() + op + e.r.String() + ")"
}

// andExpr and orExpr implement SQL three-valued logic.
type andExpr struct{ l, r Expr }

func (e *andExpr) Type() types.Type { return types.Boolean }
func (e *andExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.l.Eval(row)
	if err != nil {
		return a, err
	}
	if !a.Null && a.I == 0 {
		return types.Bool(false), nil
	}
	b, err := e.r.Eval(row)
	if err != nil {
		return b, err
	}
	if !b.Null && b.I == 0 {
		return types.Bool(false), nil
	}
	if a.Null || b.Null {
		return types.NullOf(types.Boolean), nil
	}
	return types.Bool(true), nil
}
func (e *andExpr) String() string { return "(" + e.l.String() + " AND " + e.r.String() + ")" }

type orExpr struct{ l, r Expr }

func (e *orExpr) Type() types.Type { return types.Boolean }
func (e *orExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.l.Eval(row)
	if err != nil {
		return a, err
	}
	if !a.Null && a.I != 0 {
		return types.Bool(true), nil
	}
	b, err := e.r.Eval(row)
	if err != nil {
		return b, err
	}
	if !b.Null && b.I != 0 {
		return types.Bool(true), nil
	}
	if a.Null || b.Null {
		return types.NullOf(types.Boolean), nil
	}
	return types.Bool(false), nil
}
func (e *orExpr) String() string { return "(" + e.l.String() + " OR " + e.r.String() + ")" }

type notExpr struct{ x Expr }

func (e *notExpr) Type() types.Type { return types.Boolean }
func (e *notExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.x.Eval(row)
	if err != nil || a.Null {
		return types.NullOf(types.Boolean), err
	}
	return types.Bool(a.I == 0), nil
}
func (e *notExpr) String() string { return "(NOT " + e.x.String() + ")" }

type isNullExpr struct {
	x   Expr
	not bool
}

func (e *isNullExpr) Type() types.Type { return types.Boolean }
func (e *isNullExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.x.Eval(row)
	if err != nil {
		return a, err
	}
	return types.Bool(a.Null != e.not), nil
}
func (e *isNullExpr) String() string {
	if e.not {
		return "(" + e.x.String() + " IS NOT NULL)"
	}
	return "(" + e.x.String() + " IS NULL)"
}

// isBoolExpr is X IS [NOT] TRUE|FALSE (never NULL).
type isBoolExpr struct {
	x     Expr
	value bool
	not   bool
}

func (e *isBoolExpr) Type() types.Type { return types.Boolean }
func (e *isBoolExpr) Eval(row []types.Value) (types.Value, error) {
	a, err := e.x.Eval(row)
	if err != nil {
		return a, err
	}
	is := !a.Null && (a.I != 0) == e.value
	return types.Bool(is != e.not), nil
}
func (e *isBoolExpr) String() string {
	s := "(" + e.x.String() + " IS "
	if e.not {
		s += "NOT "
	}
	if e.value {
		return s + "TRUE)"
	}
	return s + "FALSE)"
}

// caseExpr is a searched CASE (a simple CASE compiles to one).
type caseExpr struct {
	conds   []Expr
	results []Expr
	els     Expr // never nil: a NULL constant when absent
	t       types.Type
}

func (e *caseExpr) Type() types.Type { return e.t }
func (e *caseExpr) Eval(row []types.Value) (types.Value, error) {
	for i, c := range e.conds {
		v, err := c.Eval(row)
		if err != nil {
			return v, err
		}
		if !v.Null && v.I != 0 {
			return e.results[i].Eval(row)
		}
	}
	return e.els.Eval(row)
}
func (e *caseExpr) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, c := range e.conds {
		b.WriteString(" WHEN " + c.String() + " THEN " + e.results[i].String())
	}
	b.WriteString(" ELSE " + e.els.String() + " END")
	return b.String()
}

type coalesceExpr struct {
	args []Expr
	t    types.Type
}

func (e *coalesceExpr) Type() types.Type { return e.t }
func (e *coalesceExpr) Eval(row []types.Value) (types.Value, error) {
	for _, a := range e.args {
		v, err := a.Eval(row)
		if err != nil {
			return v, err
		}
		if !v.Null {
			return v, nil
		}
	}
	return types.NullOf(e.t), nil
}
func (e *coalesceExpr) String() string { return "coalesce(" + joinExprs(e.args) + ")" }

// inExpr is X [NOT] IN (list): true on a match; otherwise NULL if X or any
// element is NULL; otherwise false.
type inExpr struct {
	x    Expr
	list []Expr
	kind cmpKind
	not  bool
}

func (e *inExpr) Type() types.Type { return types.Boolean }
func (e *inExpr) Eval(row []types.Value) (types.Value, error) {
	x, err := e.x.Eval(row)
	if err != nil {
		return x, err
	}
	sawNull := x.Null
	for _, it := range e.list {
		v, err := it.Eval(row)
		if err != nil {
			return v, err
		}
		if v.Null {
			sawNull = true
			continue
		}
		if !x.Null && compare(e.kind, x, v) == 0 {
			return types.Bool(!e.not), nil
		}
	}
	if sawNull {
		return types.NullOf(types.Boolean), nil
	}
	return types.Bool(e.not), nil
}
func (e *inExpr) String() string {
	not := ""
	if e.not {
		not = " NOT"
	}
	return "(" + e.x.String() + not + " IN (" + joinExprs(e.list) + "))"
}

// funcExpr is a scalar function call from the registry. One-argument
// functions go through fn1 so that their evaluation does not allocate.
type funcExpr struct {
	name string
	args []Expr
	t    types.Type
	// strict functions return NULL when any argument is NULL, without
	// calling the function.
	strict bool
	fn1    func(e *funcExpr, a types.Value) (types.Value, error)
	fnN    func(e *funcExpr, args []types.Value) (types.Value, error)
	// aux carries a per-call constant (a compiled LIKE pattern, a scale).
	aux any
	// arg1 is the argument fn1 evaluates (the others are constants shown
	// for display, such as date_part's part).
	arg1 int
}

func (e *funcExpr) Type() types.Type { return e.t }
func (e *funcExpr) Eval(row []types.Value) (types.Value, error) {
	if e.fn1 != nil {
		v, err := e.args[e.arg1].Eval(row)
		if err != nil {
			return v, err
		}
		if v.Null && e.strict {
			return types.NullOf(e.t), nil
		}
		return e.fn1(e, v)
	}
	vals := make([]types.Value, len(e.args))
	for i, a := range e.args {
		v, err := a.Eval(row)
		if err != nil {
			return v, err
		}
		if v.Null && e.strict {
			return types.NullOf(e.t), nil
		}
		vals[i] = v
	}
	return e.fnN(e, vals)
}
func (e *funcExpr) String() string { return e.name + "(" + joinExprs(e.args) + ")" }

func joinExprs(es []Expr) string {
	parts := make([]string, len(es))
	for i, a := range es {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

// constText renders a constant value as SQL literal text.
func constText(v types.Value, t types.Type) string {
	if v.Null {
		return "NULL"
	}
	switch t.Kind {
	case types.KindVarchar:
		return "'" + strings.ReplaceAll(v.S, "'", "''") + "'"
	case types.KindTimestamp:
		return "TIMESTAMP '" + ValueText(v) + "'"
	case types.KindDate:
		return "DATE '" + ValueText(v) + "'"
	case types.KindInterval:
		return "INTERVAL '" + ValueText(v) + "'"
	case types.KindDouble:
		s := ValueText(v)
		if _, err := strconv.ParseFloat(s, 64); err != nil || math.IsInf(v.F, 0) || math.IsNaN(v.F) {
			return "'" + s + "'::DOUBLE"
		}
		return s
	}
	return ValueText(v)
}
