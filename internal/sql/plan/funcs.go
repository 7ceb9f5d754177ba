package plan

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// scalarFunc is one entry of the scalar function registry. bind receives the
// bound arguments (already checked against minArgs/maxArgs) and returns the
// compiled call or a message.
type scalarFunc struct {
	minArgs, maxArgs int // maxArgs < 0: variadic
	bind             func(b *binder, name string, args []Expr) (Expr, string)
}

// scalarFuncs is the read-only registry of scalar functions, by lower-case
// name (filled once at init, never written after).
var scalarFuncs map[string]scalarFunc

func init() {
	scalarFuncs = map[string]scalarFunc{
		"coalesce":            {1, -1, bindCoalesce},
		"ifnull":              {2, 2, bindCoalesce},
		"nullif":              {2, 2, bindNullif},
		"lower":               {1, 1, textFunc1(duckLower)},
		"lcase":               {1, 1, textFunc1(duckLower)},
		"upper":               {1, 1, textFunc1(duckUpper)},
		"ucase":               {1, 1, textFunc1(duckUpper)},
		"length":              {1, 1, bindLength},
		"abs":                 {1, 1, bindAbs},
		"floor":               {1, 1, roundingFunc("floor", math.Floor)},
		"ceil":                {1, 1, roundingFunc("ceil", math.Ceil)},
		"ceiling":             {1, 1, roundingFunc("ceil", math.Ceil)},
		"round":               {1, 2, bindRound},
		"concat":              {1, -1, bindConcat},
		"make_timestamp":      {1, 1, bindMakeTimestamp},
		"len":                 {1, 1, bindLength},
		"substring":           {2, 3, bindSubstring},
		"substr":              {2, 3, bindSubstring},
		"trim":                {1, 2, bindTrim},
		"ltrim":               {1, 2, bindTrim},
		"rtrim":               {1, 2, bindTrim},
		"replace":             {3, 3, bindReplace},
		"date_part":           {2, 2, bindDatePart},
		"datepart":            {2, 2, bindDatePart},
		"date_trunc":          {2, 2, bindDateTrunc},
		"datetrunc":           {2, 2, bindDateTrunc},
		"time_bucket":         {2, 3, bindTimeBucket},
		"epoch_ms":            {1, 1, bindEpochMs},
		"epoch_us":            {1, 1, bindEpochUs},
		"epoch":               {1, 1, bindEpoch},
		"to_timestamp":        {1, 1, bindToTimestamp},
		"to_timestamp_ltz":    {2, 2, nil}, // bindToTimestampLTZ: its errors point at an argument
		"strftime":            {2, 2, bindStrftime},
		"json_extract":        {2, 2, bindJSONExtract},
		"json_extract_string": {2, 2, bindJSONExtract},
	}
	for name := range aggCanonical {
		aggFuncs[name] = true
	}
	for name := range datePartFuncs {
		scalarFuncs[name] = scalarFunc{1, 1, bindDatePartShort}
	}
}

// Aggregate, window and metadata function names (not in the scalar
// registry: the query binder resolves them).
var aggFuncs = map[string]bool{}

// aggCanonical maps every aggregate name and alias (DuckDB's) to the
// canonical AggCall.Func.
var aggCanonical = map[string]string{
	"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "avg", "mean": "avg",
	"min_by": "min_by", "arg_min": "min_by", "argmin": "min_by",
	"max_by": "max_by", "arg_max": "max_by", "argmax": "max_by",
	"first": "first", "arbitrary": "first", "last": "last",
	"var_samp": "var_samp", "variance": "var_samp", "var_pop": "var_pop",
	"stddev_samp": "stddev_samp", "stddev": "stddev_samp", "stddev_pop": "stddev_pop",
	"bool_and": "bool_and", "bool_or": "bool_or",
	"approx_count_distinct": "approx_count_distinct", "approx_quantile": "approx_quantile",
}

// distinctOK lists the aggregates that accept DISTINCT (those where it
// changes nothing, like min, included as DuckDB does).
var distinctOK = map[string]bool{
	"count": true, "sum": true, "avg": true, "min": true, "max": true, "var_samp": true, "var_pop": true,
	"stddev_samp": true, "stddev_pop": true, "bool_and": true, "bool_or": true, "approx_count_distinct": true,
}

var windowGroupFuncs = map[string]WindowKind{"tumble": Tumble, "hop": Hop, "session": Session}

var windowBoundFuncs = map[string]struct {
	kind WindowKind
	end  bool
}{
	"tumble_start": {Tumble, false}, "tumble_end": {Tumble, true},
	"hop_start": {Hop, false}, "hop_end": {Hop, true},
	"session_start": {Session, false}, "session_end": {Session, true},
}

func (b *binder) bindCall(n *parser.FuncCall, sc *scope) (Expr, error) {
	name := strings.ToLower(n.Name.Name)
	if n.Filter != nil && !aggFuncs[name] {
		return nil, b.errAt(n.Filter.Pos(), "FILTER (WHERE ...) applies to aggregate functions, and %s is not one", name)
	}
	switch {
	case aggFuncs[name]:
		switch {
		case sc.inAgg:
			return nil, b.errAt(n.Name.P, "aggregate calls cannot be nested: %s inside another aggregate", parser.Format(n))
		case !sc.post:
			hint := ""
			if sc.clause == "WHERE" {
				hint = " (filter groups with HAVING)"
			}
			return nil, b.errAt(n.Name.P, "aggregate functions are not allowed in %s%s", sc.clause, hint)
		}
		return sc.q.aggregate(n, sc)
	case windowGroupFuncs[name] != 0:
		return nil, b.errAt(n.Name.P, "%s(...) is a group window: it can only appear as a GROUP BY term", strings.ToUpper(name))
	case windowBoundFuncs[name].kind != 0:
		return sc.q.windowBound(n, sc)
	case name == "is_final" || name == "revision":
		if len(n.Args) > 0 || n.Star || n.Distinct {
			return nil, b.errAt(n.Name.P, "%s() takes no arguments", name)
		}
		if !sc.post || sc.inAgg {
			return nil, b.errAt(n.Name.P, "%s() describes an emitted row: use it in SELECT or HAVING", name)
		}
		return sc.q.metaRef(name), nil
	}
	f, ok := scalarFuncs[name]
	if !ok {
		names := make([]string, 0, len(scalarFuncs)+len(aggFuncs))
		for k := range scalarFuncs {
			names = append(names, k)
		}
		for k := range aggFuncs {
			names = append(names, k)
		}
		return nil, b.errAt(n.Name.P, "unknown function %s%s", n.Name.Name, suggest(name, names))
	}
	if n.Star || n.Distinct {
		return nil, b.errAt(n.Name.P, "%s is not an aggregate: * and DISTINCT do not apply", name)
	}
	if len(n.Args) < f.minArgs || f.maxArgs >= 0 && len(n.Args) > f.maxArgs {
		want := ""
		switch {
		case f.minArgs == f.maxArgs:
			want = plural(f.minArgs, "argument")
		case f.maxArgs < 0:
			want = "at least " + plural(f.minArgs, "argument")
		default:
			want = plural(f.minArgs, "") + "to " + plural(f.maxArgs, "arguments")
		}
		return nil, b.errAt(n.Name.P, "%s takes %s, got %d", name, strings.TrimSpace(want), len(n.Args))
	}
	args := make([]Expr, len(n.Args))
	for i, a := range n.Args {
		x, err := b.bindExpr(a, sc)
		if err != nil {
			return nil, err
		}
		args[i] = x
	}
	if name == "to_timestamp_ltz" {
		return b.bindToTimestampLTZ(n, args)
	}
	x, msg := f.bind(b, name, args)
	if msg != "" {
		return nil, b.errAt(n.Name.P, "%s", msg)
	}
	return fold(x, args...), nil
}

func plural(n int, what string) string {
	switch {
	case what == "":
		return itoa(n) + " "
	case n == 1:
		return "1 " + strings.TrimSuffix(what, "s")
	}
	return itoa(n) + " " + strings.TrimSuffix(what, "s") + "s"
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func bindCoalesce(b *binder, name string, args []Expr) (Expr, string) {
	all, t, err := b.unify(args, 0, name)
	if err != nil {
		return nil, err.(*parser.Error).Msg
	}
	return &coalesceExpr{args: all, t: t}, ""
}

// nullif(a, b) is CASE WHEN a = b THEN NULL ELSE a END: the comparison is
// in the common type, the result keeps a's type (DuckDB, PostgreSQL).
func bindNullif(b *binder, name string, args []Expr) (Expr, string) {
	all, t, err := b.unify(args, 0, name)
	if err != nil {
		return nil, err.(*parser.Error).Msg
	}
	rt := args[0].Type()
	if isStringLit(args[0]) || rt.Kind == types.KindNull {
		rt = t
	}
	a, err := coerce(args[0], rt)
	if err != nil {
		return nil, err.Error()
	}
	return &caseExpr{
		conds:   []Expr{&cmpExpr{op: opEq, kind: cmpKindOf(t), l: all[0], r: all[1]}},
		results: []Expr{&Const{V: types.NullOf(rt), T: rt, Text: "NULL"}},
		els:     a,
		t:       rt,
	}, ""
}

func textArg(x Expr, name string) (Expr, string) {
	if x.Type().Kind == types.KindNull {
		return &Const{V: types.NullOf(types.Varchar), T: types.Varchar, Text: "NULL"}, ""
	}
	if x.Type().Kind != types.KindVarchar {
		return nil, name + " needs a VARCHAR argument, got " + x.Type().String()
	}
	return x, ""
}

func textFunc1(f func(string) string) func(b *binder, name string, args []Expr) (Expr, string) {
	return func(b *binder, name string, args []Expr) (Expr, string) {
		x, msg := textArg(args[0], name)
		if msg != "" {
			return nil, msg
		}
		return &funcExpr{name: name, args: []Expr{x}, t: types.Varchar, strict: true,
			fn1: func(_ *funcExpr, a types.Value) (types.Value, error) { return types.Str(f(a.S)), nil }}, ""
	}
}

// length counts characters (code points), as DuckDB does.
func bindLength(b *binder, name string, args []Expr) (Expr, string) {
	x, msg := textArg(args[0], name)
	if msg != "" {
		return nil, msg
	}
	return &funcExpr{name: name, args: []Expr{x}, t: types.BigInt, strict: true,
		fn1: func(_ *funcExpr, a types.Value) (types.Value, error) {
			return types.Big(int64(utf8.RuneCountInString(a.S))), nil
		}}, ""
}

func bindAbs(b *binder, name string, args []Expr) (Expr, string) {
	x := args[0]
	t := x.Type()
	if t.Kind == types.KindNull {
		t = types.Integer
		x, _ = coerce(x, t)
	}
	var fn func(*funcExpr, types.Value) (types.Value, error)
	switch t.Kind {
	case types.KindInteger, types.KindBigInt:
		fn = func(e *funcExpr, a types.Value) (types.Value, error) {
			if a.I >= 0 {
				return a, nil
			}
			lo, _ := intRange(e.t.Kind)
			if a.I == lo {
				return types.Value{}, rangeErr("Overflow on abs(%d)", a.I)
			}
			return types.Value{Kind: a.Kind, I: -a.I}, nil
		}
	case types.KindHugeInt, types.KindDecimal:
		fn = func(e *funcExpr, a types.Value) (types.Value, error) {
			if a.Hi >= 0 {
				return a, nil
			}
			return negHuge(&unExpr{t: e.t}, a)
		}
	case types.KindDouble:
		fn = func(_ *funcExpr, a types.Value) (types.Value, error) { return types.Float(math.Abs(a.F)), nil }
	default:
		return nil, "abs needs a numeric argument, got " + t.String()
	}
	return &funcExpr{name: name, args: []Expr{x}, t: t, strict: true, fn1: fn}, ""
}

// roundingFunc is floor/ceil: DOUBLE stays DOUBLE, integers are returned
// as they are, DECIMAL(p,s) becomes DECIMAL(p,0) (DuckDB).
func roundingFunc(fname string, f func(float64) float64) func(b *binder, name string, args []Expr) (Expr, string) {
	return func(b *binder, name string, args []Expr) (Expr, string) {
		x := args[0]
		t := x.Type()
		switch t.Kind {
		case types.KindNull:
			return &Const{V: types.NullOf(types.Double), T: types.Double, Text: "NULL"}, ""
		case types.KindInteger, types.KindBigInt, types.KindHugeInt:
			return x, ""
		case types.KindDouble:
			return &funcExpr{name: fname, args: []Expr{x}, t: t, strict: true,
				fn1: func(_ *funcExpr, a types.Value) (types.Value, error) { return types.Float(f(a.F)), nil }}, ""
		case types.KindDecimal:
			rt := types.Decimal(t.Width, 0)
			up := fname == "ceil"
			return &funcExpr{name: fname, args: []Expr{x}, t: rt, strict: true,
				fn1: func(_ *funcExpr, a types.Value) (types.Value, error) {
					return types.Dec(decFloorCeil(i128Of(a), a.Scale, up), 0), nil
				}}, ""
		}
		return nil, fname + " needs a numeric argument, got " + t.String()
	}
}

func decFloorCeil(x types.Int128, scale uint8, up bool) types.Int128 {
	if scale == 0 {
		return x
	}
	m, neg := absI128(x)
	var q u128
	var r uint64
	if scale <= 19 {
		q, r = divModU64(m, pow10u64[scale])
	} else {
		t := scaleDownRound(x, int(scale)) // rare path; fix up by comparison below
		back, _ := scaleUp(t, int(scale))
		c := back.Cmp(x)
		one := types.I128(1)
		if up && c < 0 {
			t, _ = t.Add(one)
		} else if !up && c > 0 {
			t, _ = t.Sub(one)
		}
		return t
	}
	// truncation toward zero, then adjust toward -inf (floor) or +inf (ceil)
	res, _ := fromMag(q, neg)
	if r != 0 {
		if neg && !up {
			res, _ = res.Sub(types.I128(1))
		} else if !neg && up {
			res, _ = res.Add(types.I128(1))
		}
	}
	return res
}

// round(x[, digits]): half away from zero for DECIMAL (result keeps the
// type), DOUBLE rounds half away from zero too (C round), integers unchanged.
func bindRound(b *binder, name string, args []Expr) (Expr, string) {
	x := args[0]
	digits := int64(0)
	if len(args) == 2 {
		c, ok := args[1].(*Const)
		if !ok || !isInt(c.T) || c.V.Null {
			return nil, "round's second argument must be an integer constant"
		}
		digits = c.V.I
		if digits < -38 || digits > 38 {
			return nil, "round's second argument must be between -38 and 38"
		}
	}
	t := x.Type()
	switch t.Kind {
	case types.KindNull:
		return &Const{V: types.NullOf(types.Double), T: types.Double, Text: "NULL"}, ""
	case types.KindInteger, types.KindBigInt, types.KindHugeInt:
		if digits >= 0 {
			return x, ""
		}
		// round to tens, hundreds, ... through DECIMAL arithmetic
		dt := decimalOfInt(t)
		cx, _ := coerce(x, dt)
		k := int(-digits)
		return &funcExpr{name: "round", args: roundArgs(cx, args), t: t, strict: true,
			fn1: func(e *funcExpr, a types.Value) (types.Value, error) {
				r := scaleDownRound(i128Of(a), k)
				r, ok := scaleUp(r, k)
				if !ok || (e.t.Kind != types.KindHugeInt && !r.IsInt64()) {
					return types.Value{}, rangeErr("Overflow in round")
				}
				if e.t.Kind == types.KindHugeInt {
					return types.Huge(r), nil
				}
				lo, hi := intRange(e.t.Kind)
				if int64(r.Lo) < lo || int64(r.Lo) > hi {
					return types.Value{}, rangeErr("Overflow in round")
				}
				return types.Value{Kind: e.t.Kind, I: int64(r.Lo)}, nil
			}}, ""
	case types.KindDouble:
		p := math.Pow10(int(digits))
		return &funcExpr{name: "round", args: roundArgs(x, args), t: t, strict: true,
			fn1: func(_ *funcExpr, a types.Value) (types.Value, error) {
				if digits == 0 {
					return types.Float(math.Round(a.F)), nil
				}
				r := math.Round(a.F*p) / p
				if math.IsInf(r, 0) || math.IsNaN(r) {
					return a, nil
				}
				return types.Float(r), nil
			}}, ""
	case types.KindDecimal:
		// DuckDB: round(DECIMAL(p,s), d) is DECIMAL(p, d) for 0 <= d < s.
		if digits >= int64(t.Scale) {
			return x, ""
		}
		ns := uint8(0)
		if digits > 0 {
			ns = uint8(digits)
		}
		k := int(t.Scale) - int(digits)
		rt := types.Decimal(t.Width, ns)
		return &funcExpr{name: "round", args: roundArgs(x, args), t: rt, strict: true,
			fn1: func(e *funcExpr, a types.Value) (types.Value, error) {
				r := scaleDownRound(i128Of(a), k)
				if digits < 0 {
					r, _ = scaleUp(r, int(-digits))
				}
				return types.Dec(r, e.t.Scale), nil
			}}, ""
	}
	return nil, "round needs a numeric argument, got " + t.String()
}

// make_timestamp(micros) is the TIMESTAMP micros microseconds after the
// epoch (DuckDB's one-argument form).
func bindMakeTimestamp(b *binder, name string, args []Expr) (Expr, string) {
	x := args[0]
	if !isInt(x.Type()) && x.Type().Kind != types.KindNull {
		return nil, name + " needs a BIGINT (microseconds since the epoch), got " + x.Type().String()
	}
	x, err := coerce(x, types.BigInt)
	if err != nil {
		return nil, err.Error()
	}
	return &funcExpr{name: name, args: []Expr{x}, t: types.Timestamp, strict: true,
		fn1: func(_ *funcExpr, a types.Value) (types.Value, error) {
			if a.I < minDateDays*usPerDay || a.I > maxDateDays*usPerDay {
				return types.Value{}, rangeErr("timestamp out of range: %d", a.I)
			}
			return types.TS(a.I), nil
		}}, ""
}

// roundArgs keeps the digits argument for display; fn1 evaluates only the
// first argument.
func roundArgs(x Expr, args []Expr) []Expr {
	if len(args) == 2 {
		return []Expr{x, args[1]}
	}
	return []Expr{x}
}

// concat skips NULL arguments (DuckDB), unlike ||.
func bindConcat(b *binder, name string, args []Expr) (Expr, string) {
	cs := make([]Expr, len(args))
	for i, a := range args {
		c, err := coerce(a, types.Varchar)
		if err != nil {
			return nil, err.Error()
		}
		cs[i] = c
	}
	return &funcExpr{name: name, args: cs, t: types.Varchar,
		fnN: func(_ *funcExpr, vals []types.Value) (types.Value, error) {
			var sb strings.Builder
			for _, v := range vals {
				if !v.Null {
					sb.WriteString(v.S)
				}
			}
			return types.Str(sb.String()), nil
		}}, ""
}

// ---- LIKE ----

func (b *binder) bindLike(n *parser.LikeExpr, sc *scope) (Expr, error) {
	x, err := b.bindExpr(n.X, sc)
	if err != nil {
		return nil, err
	}
	p, err := b.bindExpr(n.Pattern, sc)
	if err != nil {
		return nil, err
	}
	op := "LIKE"
	if n.ILike {
		op = "ILIKE"
	}
	for _, e := range []Expr{x, p} {
		k := e.Type().Kind
		if k != types.KindVarchar && k != types.KindNull {
			return nil, b.errAt(n.P, "%s needs VARCHAR operands, got %s", op, e.Type())
		}
	}
	if x, err = coerce(x, types.Varchar); err != nil {
		return nil, b.errAt(n.P, "%v", err)
	}
	if p, err = coerce(p, types.Varchar); err != nil {
		return nil, b.errAt(n.P, "%v", err)
	}
	ilike := n.ILike
	not := n.Not
	name := strings.ToLower(op)
	if not {
		name = "not_" + name
	}
	e := &funcExpr{name: name, args: []Expr{x, p}, t: types.Boolean, strict: true,
		fnN: func(_ *funcExpr, v []types.Value) (types.Value, error) {
			s, pat := v[0].S, v[1].S
			if ilike {
				s, pat = strings.ToLower(s), strings.ToLower(pat)
			}
			return types.Bool(likeMatch(s, pat) != not), nil
		}}
	return fold(e, x, p), nil
}

// likeMatch matches SQL LIKE: % any sequence, _ one character, no escape
// character. Iterative with single backtracking point: O(len(s)*len(p))
// worst case, no allocation.
func likeMatch(s, p string) bool {
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '%':
				starP, starS = pi, si
				pi++
				continue
			case '_':
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				pi++
				continue
			default:
				if s[si] == p[pi] {
					si++
					pi++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		si, pi = starS, starP+1
	}
	for pi < len(p) && p[pi] == '%' {
		pi++
	}
	return pi == len(p)
}
