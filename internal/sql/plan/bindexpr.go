package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// scope says what names an expression may use.
type scope struct {
	clause string // "WHERE", "GROUP BY", "SELECT", "HAVING", ... for messages
	q      *queryBinder
	post   bool // over the post-aggregation row (SELECT, HAVING)
	inAgg  bool // inside an aggregate's arguments
}

// errAt builds a positioned error.
func (b *binder) errAt(pos int, format string, args ...any) error {
	return parser.Errorf(b.sql, pos, format, args...)
}

// isStringLit reports whether e is an untyped string literal, which converts
// implicitly to the type it is compared or combined with.
func isStringLit(e Expr) bool {
	c, ok := e.(*Const)
	return ok && c.strLit
}

func isNullConst(e Expr) bool {
	c, ok := e.(*Const)
	return ok && c.T.Kind == types.KindNull
}

// coerce converts e to t implicitly. A constant operand is converted now, so
// a bad literal ('abc' compared with a TIMESTAMP) fails at compile time.
func coerce(e Expr, t types.Type) (Expr, error) {
	from := e.Type()
	if from == t {
		return e, nil
	}
	fn, ok := castFunc(from, t)
	if !ok {
		return nil, fmt.Errorf("cannot convert %s to %s", from, t)
	}
	ce := &castExpr{x: e, to: t, fn: fn}
	if _, ok := e.(*Const); ok {
		v, err := ce.Eval(nil)
		if err != nil {
			var ee *EvalError
			if errors.As(err, &ee) {
				return nil, fmt.Errorf("%s", strings.TrimPrefix(ee.Msg, "Conversion Error: "))
			}
			return nil, err
		}
		return &Const{V: v, T: t, Text: constText(v, t)}, nil
	}
	return ce, nil
}

// fold evaluates an expression whose operands are all constants. A failure
// leaves the expression unfolded, so that the error surfaces only if the
// expression is evaluated (CASE WHEN false THEN 1/0 ...).
func fold(e Expr, operands ...Expr) Expr {
	for _, o := range operands {
		if _, ok := o.(*Const); !ok {
			return e
		}
	}
	v, err := e.Eval(nil)
	if err != nil {
		return e
	}
	return &Const{V: v, T: e.Type(), Text: constText(v, e.Type())}
}

func (b *binder) bindExpr(e parser.Expr, sc *scope) (Expr, error) {
	b.depth++
	b.chain++
	defer func() { b.depth--; b.chain-- }()
	if b.depth > 2*parser.MaxNesting { // the parser's bound is met first; this is a backstop
		return nil, b.errAt(e.Pos(), "expression nested too deeply (more than %d levels)", parser.MaxNesting)
	}
	if b.chain > MaxChain {
		return nil, b.errAt(e.Pos(), "expression too long: more than %d operators in one expression", MaxChain)
	}
	if sc.post {
		if x, ok, err := sc.q.postLookup(e, sc); ok || err != nil {
			return x, err
		}
	}
	switch n := e.(type) {
	case *parser.ParenExpr:
		return b.bindExpr(n.X, sc)
	case *parser.NumberLit:
		v, t, ok := numberLiteral(n.Text, false)
		if !ok {
			return nil, b.errAt(n.P, "bad number %s", n.Text)
		}
		return &Const{V: v, T: t, Text: n.Text}, nil
	case *parser.StringLit:
		return &Const{V: types.Str(n.Value), T: types.Varchar, Text: parser.Format(n), strLit: true}, nil
	case *parser.BoolLit:
		return &Const{V: types.Bool(n.Value), T: types.Boolean, Text: parser.Format(n)}, nil
	case *parser.NullLit:
		return &Const{V: types.NullOf(types.Null), T: types.Null, Text: "NULL"}, nil
	case *parser.TypedLit:
		if n.Type == "DATE" {
			d, ok := ParseDate(n.Value)
			if !ok {
				return nil, b.errAt(n.P, "bad DATE literal '%s': expected YYYY-MM-DD", n.Value)
			}
			return &Const{V: types.DateDays(d), T: types.Date, Text: parser.Format(n)}, nil
		}
		us, ok := ParseTimestamp(n.Value)
		if !ok {
			return nil, b.errAt(n.P, "bad TIMESTAMP literal '%s': expected YYYY-MM-DD HH:MM:SS[.ffffff] or RFC 3339", n.Value)
		}
		return &Const{V: types.TS(us), T: types.Timestamp, Text: parser.Format(n)}, nil
	case *parser.IntervalLit:
		text := n.Value
		if n.Unit != "" {
			text += " " + n.Unit
		}
		iv, msg := parseInterval(text)
		if msg != "" {
			return nil, b.errAt(n.P, "bad INTERVAL '%s': %s", text, msg)
		}
		return &Const{V: types.Interv(int32(iv.months), int32(iv.days), iv.micros), T: types.Interval, Text: parser.Format(n)}, nil
	case *parser.ColumnRef:
		return sc.q.column(n, sc)
	case *parser.UnaryExpr:
		return b.bindUnary(n, sc)
	case *parser.BinaryExpr:
		return b.bindBinary(n, sc)
	case *parser.FuncCall:
		return b.bindCall(n, sc)
	case *parser.CastExpr:
		x, err := b.bindExpr(n.X, sc)
		if err != nil {
			return nil, err
		}
		t, err := b.typeOf(n.Type)
		if err != nil {
			return nil, err
		}
		if isNullConst(x) {
			return &Const{V: types.NullOf(t), T: t, Text: "NULL"}, nil
		}
		fn, ok := castFunc(x.Type(), t)
		if !ok {
			return nil, b.errAt(n.P, "cannot cast %s to %s", x.Type(), t)
		}
		name := "CAST"
		if n.Try {
			name = "TRY_CAST"
		}
		// A constant that fails to convert stays unfolded: like DuckDB, the
		// error is raised only if the cast is evaluated (it may sit in a
		// CASE branch that is never taken).
		ce := &castExpr{x: x, to: t, try: n.Try, fn: fn, name: name}
		if unit := timeUnit(n.Type); unit > 1 {
			// CAST(x AS TIMESTAMP(p)): the timestamp, rounded to p digits.
			ce.fn = func(v types.Value) (types.Value, error) {
				r, err := fn(v)
				if err != nil {
					return r, err
				}
				us, ok := RoundTimestamp(r.I, unit)
				if !ok {
					return types.Value{}, rangeErr("%s rounded to %s is out of the TIMESTAMP range", ValueText(r), parser.FormatType(n.Type))
				}
				return types.TS(us), nil
			}
			ce.toText = parser.FormatType(n.Type)
		}
		return fold(ce, x), nil
	case *parser.CaseExpr:
		return b.bindCase(n, sc)
	case *parser.InExpr:
		x, err := b.bindExpr(n.X, sc)
		if err != nil {
			return nil, err
		}
		all := []Expr{x}
		for _, it := range n.List {
			v, err := b.bindExpr(it, sc)
			if err != nil {
				return nil, err
			}
			all = append(all, v)
		}
		all, t, err := b.unify(all, n.P, "IN")
		if err != nil {
			return nil, err
		}
		in := &inExpr{x: all[0], list: all[1:], kind: cmpKindOf(t), not: n.Not}
		return fold(in, all...), nil
	case *parser.IsNullExpr:
		x, err := b.bindExpr(n.X, sc)
		if err != nil {
			return nil, err
		}
		return fold(&isNullExpr{x: x, not: n.Not}, x), nil
	case *parser.IsBoolExpr:
		x, err := b.bindExpr(n.X, sc)
		if err != nil {
			return nil, err
		}
		if x, err = b.boolOperand(x, n.X.Pos(), "IS TRUE/FALSE"); err != nil {
			return nil, err
		}
		return fold(&isBoolExpr{x: x, value: n.Value, not: n.Not}, x), nil
	case *parser.IsDistinctExpr:
		l, err := b.bindExpr(n.L, sc)
		if err != nil {
			return nil, err
		}
		r, err := b.bindExpr(n.R, sc)
		if err != nil {
			return nil, err
		}
		both, t, err := b.unify([]Expr{l, r}, n.P, "IS DISTINCT FROM")
		if err != nil {
			return nil, err
		}
		return fold(&distinctExpr{kind: cmpKindOf(t), l: both[0], r: both[1], not: n.Not}, both...), nil
	case *parser.BetweenExpr:
		x, err := b.bindExpr(n.X, sc)
		if err != nil {
			return nil, err
		}
		lo, err := b.bindExpr(n.Lo, sc)
		if err != nil {
			return nil, err
		}
		hi, err := b.bindExpr(n.Hi, sc)
		if err != nil {
			return nil, err
		}
		all, t, err := b.unify([]Expr{x, lo, hi}, n.P, "BETWEEN")
		if err != nil {
			return nil, err
		}
		k := cmpKindOf(t)
		var r Expr = &andExpr{l: &cmpExpr{op: opGe, kind: k, l: all[0], r: all[1]}, r: &cmpExpr{op: opLe, kind: k, l: all[0], r: all[2]}}
		if n.Not {
			r = &notExpr{x: r}
		}
		return fold(r, all...), nil
	case *parser.LikeExpr:
		return b.bindLike(n, sc)
	}
	return nil, b.errAt(e.Pos(), "unsupported expression %T", e)
}

func (b *binder) boolOperand(x Expr, pos int, what string) (Expr, error) {
	switch x.Type().Kind {
	case types.KindBoolean:
		return x, nil
	case types.KindNull:
		return &Const{V: types.NullOf(types.Boolean), T: types.Boolean, Text: "NULL"}, nil
	}
	if isStringLit(x) {
		if c, err := coerce(x, types.Boolean); err == nil {
			return c, nil
		}
	}
	return nil, b.errAt(pos, "%s needs a BOOLEAN operand, got %s", what, x.Type())
}

func (b *binder) bindUnary(n *parser.UnaryExpr, sc *scope) (Expr, error) {
	if n.Op == "-" {
		// Fold a negative numeric literal directly so that -2147483648 is an
		// INTEGER, as in DuckDB.
		inner := n.X
		for {
			p, ok := inner.(*parser.ParenExpr)
			if !ok {
				break
			}
			inner = p.X
		}
		if lit, ok := inner.(*parser.NumberLit); ok {
			v, t, ok := numberLiteral(lit.Text, true)
			if !ok {
				return nil, b.errAt(lit.P, "bad number %s", lit.Text)
			}
			return &Const{V: v, T: t, Text: "-" + lit.Text}, nil
		}
	}
	x, err := b.bindExpr(n.X, sc)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case "NOT":
		x, err := b.boolOperand(x, n.X.Pos(), "NOT")
		if err != nil {
			return nil, err
		}
		return fold(&notExpr{x: x}, x), nil
	case "+":
		if !x.Type().IsNumeric() && x.Type().Kind != types.KindInterval {
			return nil, b.errAt(n.P, "unary plus does not apply to %s", x.Type())
		}
		return x, nil
	}
	r, msg := bindNeg(x)
	if msg != "" {
		return nil, b.errAt(n.P, "%s", msg)
	}
	return fold(r, x), nil
}

// MaxChain bounds how many binary operators one expression may chain
// (a+b+...: generated SQL can be long); beyond nesting, which the parser
// bounds, this keeps evaluation's recursion within reason.
const MaxChain = 10_000

// MaxNesting is the parser's bound on expression nesting.
const MaxNesting = parser.MaxNesting

func (b *binder) bindBinary(n *parser.BinaryExpr, sc *scope) (Expr, error) {
	// The left operand of a chain (a+b+c is (a+b)+c) is length, not
	// nesting: it does not count as a level.
	b.depth--
	l, err := b.bindExpr(n.L, sc)
	b.depth++
	if err != nil {
		return nil, err
	}
	r, err := b.bindExpr(n.R, sc)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case "AND", "OR":
		if l, err = b.boolOperand(l, n.L.Pos(), n.Op); err != nil {
			return nil, err
		}
		if r, err = b.boolOperand(r, n.R.Pos(), n.Op); err != nil {
			return nil, err
		}
		if n.Op == "AND" {
			return fold(&andExpr{l: l, r: r}, l, r), nil
		}
		return fold(&orExpr{l: l, r: r}, l, r), nil
	case "=", "<>", "<", "<=", ">", ">=":
		both, t, err := b.unify([]Expr{l, r}, n.P, "comparison "+n.Op)
		if err != nil {
			return nil, err
		}
		var op cmpOp
		for i, s := range cmpOpText {
			if s == n.Op {
				op = cmpOp(i)
			}
		}
		return fold(&cmpExpr{op: op, kind: cmpKindOf(t), l: both[0], r: both[1]}, both...), nil
	}
	if n.Op == "->" || n.Op == "->>" {
		// -> and ->> bind as || does and group left to right (PostgreSQL;
		// DuckDB binds them looser still), so in a || meta->'v' the access
		// applies to the concatenated text, which is never what was meant
		// and would fail on every event. Parentheses say it was meant.
		if c, ok := n.L.(*parser.BinaryExpr); ok && c.Op == "||" {
			return nil, b.errAt(n.P, "%s applies to the whole concatenation %s on its left, not to %s: -> and ->> bind as loosely as || and group left to right (as in PostgreSQL; DuckDB binds them looser still); write ... || (%s%s%s ...) to read from %s, or parenthesize the concatenation if it is meant",
				n.Op, parser.Format(c), parser.Format(c.R), parser.Format(c.R), n.Op, parser.Format(n.R), parser.Format(c.R))
		}
		x, msg := bindJSONAccess(l, r, n.Op == "->>", "")
		if msg != "" {
			return nil, b.errAt(n.P, "%s", msg)
		}
		return fold(x, l, r), nil
	}
	x, msg := bindArith(n.Op, l, r)
	if msg != "" {
		return nil, b.errAt(n.P, "%s", msg)
	}
	return fold(x, l, r), nil
}

// unify converts exprs to one common type (comparison, IN, CASE results,
// COALESCE). Untyped string literals take the type of the typed operands.
func (b *binder) unify(exprs []Expr, pos int, what string) ([]Expr, types.Type, error) {
	t := types.Null
	// First the typed, non-literal operands decide...
	for _, e := range exprs {
		if isStringLit(e) {
			continue
		}
		ct, ok := commonType(t, e.Type())
		if !ok {
			return nil, t, b.errAt(pos, "%s: cannot combine %s and %s; add a CAST", what, t, e.Type())
		}
		t = ct
	}
	// ...then string literals follow (or everything is VARCHAR).
	if t.Kind == types.KindNull {
		for _, e := range exprs {
			if isStringLit(e) {
				t = types.Varchar
			}
		}
	}
	// All NULL: the result keeps the NULL type, which converts to anything
	// later (DuckDB's SQLNULL).
	out := make([]Expr, len(exprs))
	for i, e := range exprs {
		c, err := coerce(e, t)
		if err != nil {
			return nil, t, b.errAt(pos, "%s: %v", what, err)
		}
		out[i] = c
	}
	return out, t, nil
}

func (b *binder) bindCase(n *parser.CaseExpr, sc *scope) (Expr, error) {
	var operand Expr
	var err error
	if n.Operand != nil {
		if operand, err = b.bindExpr(n.Operand, sc); err != nil {
			return nil, err
		}
	}
	ce := &caseExpr{}
	results := make([]Expr, 0, len(n.Whens)+1)
	var ops []Expr
	for _, w := range n.Whens {
		c, err := b.bindExpr(w.Cond, sc)
		if err != nil {
			return nil, err
		}
		if operand != nil {
			both, t, err := b.unify([]Expr{operand, c}, w.Cond.Pos(), "CASE ... WHEN")
			if err != nil {
				return nil, err
			}
			c = &cmpExpr{op: opEq, kind: cmpKindOf(t), l: both[0], r: both[1]}
		} else if c, err = b.boolOperand(c, w.Cond.Pos(), "WHEN"); err != nil {
			return nil, err
		}
		ce.conds = append(ce.conds, c)
		r, err := b.bindExpr(w.Result, sc)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		ops = append(ops, c, r)
	}
	if n.Else != nil {
		e, err := b.bindExpr(n.Else, sc)
		if err != nil {
			return nil, err
		}
		results = append(results, e)
	} else {
		results = append(results, &Const{V: types.NullOf(types.Null), T: types.Null, Text: "NULL"})
	}
	results, t, err := b.unify(results, n.P, "CASE results")
	if err != nil {
		return nil, err
	}
	ce.results = results[:len(results)-1]
	ce.els = results[len(results)-1]
	ce.t = t
	ops = append(ops, ce.els)
	if operand != nil {
		ops = append(ops, operand)
	}
	return fold(ce, append(ops, ce.results...)...), nil
}

// typeOf maps a written type name to a type. FLOAT and REAL are 32-bit in
// DuckDB; ubik has one floating type and maps them to DOUBLE. SMALLINT and
// TINYINT map to INTEGER.
func (b *binder) typeOf(tn parser.TypeName) (types.Type, error) {
	noArgs := func(t types.Type) (types.Type, error) {
		if len(tn.Args) > 0 {
			return t, b.errAt(tn.P, "type %s takes no arguments", tn.Name)
		}
		return t, nil
	}
	switch tn.Name {
	case "BOOLEAN", "BOOL", "LOGICAL":
		return noArgs(types.Boolean)
	case "INTEGER", "INT", "INT4", "SIGNED", "SMALLINT", "INT2", "TINYINT", "INT1":
		return noArgs(types.Integer)
	case "BIGINT", "INT8", "LONG":
		return noArgs(types.BigInt)
	case "HUGEINT", "INT128":
		return noArgs(types.HugeInt)
	case "DOUBLE", "FLOAT8", "DOUBLE PRECISION", "FLOAT", "FLOAT4", "REAL":
		return noArgs(types.Double)
	case "DECIMAL", "NUMERIC", "DEC":
		switch len(tn.Args) {
		case 0:
			return types.Decimal(18, 3), nil
		case 1, 2:
			w, s := tn.Args[0], 0
			if len(tn.Args) == 2 {
				s = tn.Args[1]
			}
			if w < 1 || w > 38 {
				return types.Type{}, b.errAt(tn.P, "DECIMAL width must be between 1 and 38, got %d", w)
			}
			if s > w {
				return types.Type{}, b.errAt(tn.P, "DECIMAL scale %d is larger than its width %d", s, w)
			}
			return types.Decimal(uint8(w), uint8(s)), nil
		}
		return types.Type{}, b.errAt(tn.P, "DECIMAL takes at most two arguments (width, scale)")
	case "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "CHARACTER VARYING", "CHARACTER":
		if len(tn.Args) > 1 {
			return types.Type{}, b.errAt(tn.P, "%s takes at most one argument", tn.Name)
		}
		return types.Varchar, nil
	case "TIMESTAMP", "DATETIME":
		switch {
		case len(tn.Args) > 1:
			return types.Type{}, b.errAt(tn.P, "%s takes at most one argument, the precision (fractional-second digits, 0 to 6)", tn.Name)
		case len(tn.Args) == 1 && tn.Args[0] > 6:
			return types.Type{}, b.errAt(tn.P, "%s precision must be between 0 and 6 (fractional-second digits), got %d", tn.Name, tn.Args[0])
		}
		return types.Timestamp, nil
	case "DATE":
		return noArgs(types.Date)
	case "INTERVAL":
		return noArgs(types.Interval)
	case "TIMESTAMPTZ":
		return types.Type{}, b.errAt(tn.P, "TIMESTAMPTZ is not supported: ubik timestamps are UTC; use TIMESTAMP")
	}
	return types.Type{}, b.errAt(tn.P, "unknown type %s (supported: BOOLEAN, INTEGER, BIGINT, HUGEINT, DOUBLE, DECIMAL(p,s), VARCHAR, TIMESTAMP, DATE, INTERVAL)", tn.Name)
}

// timeUnit is the rounding unit in microseconds of a TIMESTAMP(p) type
// name with p < 6 (10^(6-p)), or 0: TIMESTAMP and TIMESTAMP(6) keep
// microseconds. typeOf has checked the arguments.
func timeUnit(tn parser.TypeName) int64 {
	if (tn.Name != "TIMESTAMP" && tn.Name != "DATETIME") || len(tn.Args) != 1 || tn.Args[0] >= 6 {
		return 0
	}
	u := int64(1)
	for range 6 - tn.Args[0] {
		u *= 10
	}
	return u
}

// levenshtein distance, for "did you mean" hints.
func levenshtein(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Suggest returns ` (did you mean "x"?)` for the closest of candidates to
// name, or "" when none is close; hosts use it for names outside SQL.
func Suggest(name string, candidates []string) string { return suggest(name, candidates) }

// suggest returns ` (did you mean "x"?)` for the closest candidate, or "".
func suggest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := levenshtein(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > 2 && bestD*3 > len(name) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
