package plan

import (
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// queryBinder binds one SELECT.
type queryBinder struct {
	b     *binder
	q     *Query
	src   *Source
	quals []string // names a column may be qualified with (source, alias)
	tvf   bool     // the window comes from FROM TABLE(TUMBLE(...))
	// legacy is the GROUP BY TUMBLE/HOP/SESSION(...) call, when the window
	// is spelled that way.
	legacy     *parser.FuncCall
	groupIndex map[string]int // GROUP BY term identity -> key index
	aggIndex   map[string]int // aggregate call identity -> index in q.Aggs
	metaRefs   []metaRef
	items      []parser.SelectItem
	// deps collects the source ordinals an expression reads, when binding
	// a computed column (q is nil then).
	deps map[int]bool
	// sides are the two inputs of a join (nil without one).
	sides []joinSide
}

// metaRef is a reference to one of the four trailing slots of the
// post-aggregation row; its index is set once the aggregate count is known.
type metaRef struct {
	ref  *ColRef
	slot int // 0 window_start, 1 window_end, 2 final, 3 revision
}

// revisionSlot is REVISION()'s slot among the trailing four.
const revisionSlot = 3

func (b *binder) query(name string, sel *parser.Select, sources map[string]*Source) (*Query, error) {
	start, end := sel.Span()
	qb := &queryBinder{
		b:          b,
		q:          &Query{Name: name, SQL: b.sql[start:end]},
		groupIndex: map[string]int{},
		aggIndex:   map[string]int{},
		items:      sel.Items,
	}
	if err := qb.from(sel.From, sources); err != nil {
		return nil, err
	}
	q := qb.q
	if sel.Where != nil {
		w, err := b.bindExpr(sel.Where, &scope{clause: "WHERE", q: qb})
		if err != nil {
			return nil, err
		}
		if w, err = b.boolOperand(w, sel.Where.Pos(), "WHERE"); err != nil {
			return nil, err
		}
		q.Filter = w
	}
	if err := qb.groupBy(sel.GroupBy); err != nil {
		return nil, err
	}
	if err := qb.checkWindow(sel); err != nil {
		return nil, err
	}
	if len(sel.GroupBy) == 0 && !hasAggregate(sel) {
		if j := q.IJoin; j != nil {
			return nil, b.errAt(sel.P, "query %s neither aggregates nor groups (ubik runs aggregating queries); to publish each joined row once, group the rows: %s", name, qb.joinGroupHint(sel, j))
		}
		return nil, b.errAt(sel.P, "query %s neither aggregates nor groups: ubik runs aggregating queries (GROUP BY and/or aggregate functions such as count(*), sum(x))", name)
	}
	post := &scope{clause: "SELECT", q: qb, post: true}
	names := map[string]bool{}
	for _, it := range sel.Items {
		if it.Star {
			return nil, b.errAt(it.P, "SELECT * is not supported: ubik queries aggregate, and * would select source columns that are neither grouped nor aggregated; list the GROUP BY columns and the aggregates")
		}
		x, err := b.bindExpr(it.Expr, post)
		if err != nil {
			return nil, err
		}
		colName := outputName(it)
		key := strings.ToLower(colName)
		if names[key] {
			return nil, b.errAt(it.P, "duplicate output column name %q; give one of them an alias with AS", colName)
		}
		names[key] = true
		q.Select = append(q.Select, OutputColumn{Name: colName, Expr: x})
	}
	// Every reference to REVISION() is a metaRef (metaRef), and the SELECT
	// list is bound before HAVING: the references so far are the SELECT
	// list's.
	for _, m := range qb.metaRefs {
		if m.slot == revisionSlot {
			q.SelectReadsRevision = true
		}
	}
	if sel.Having != nil {
		h, err := b.bindExpr(sel.Having, &scope{clause: "HAVING", q: qb, post: true})
		if err != nil {
			return nil, err
		}
		if h, err = b.boolOperand(h, sel.Having.Pos(), "HAVING"); err != nil {
			return nil, err
		}
		q.Having = h
	}
	for _, m := range qb.metaRefs {
		m.ref.Index = len(q.Keys) + len(q.Aggs) + m.slot
	}
	if err := qb.emit(sel); err != nil {
		return nil, err
	}
	// The operator reads these besides what the expressions name.
	if qb.src.TimeCol >= 0 {
		qb.use(qb.src.TimeCol)
	}
	if q.Window != nil {
		qb.use(q.Window.TimeCol)
	}
	if qb.src.Dedup != nil {
		qb.use(qb.src.Dedup.Col)
	}
	if q.UsedColumns == nil {
		q.UsedColumns = make([]bool, len(qb.src.Columns)) // count(*) over nothing else
	}
	return q, nil
}

// hasAggregate reports whether the SELECT list or HAVING calls an aggregate.
func hasAggregate(sel *parser.Select) bool {
	found := false
	visit := func(x parser.Expr) bool {
		if fc, ok := x.(*parser.FuncCall); ok && aggFuncs[strings.ToLower(fc.Name.Name)] {
			found = true
		}
		return !found
	}
	for _, it := range sel.Items {
		parser.Walk(it.Expr, visit)
	}
	parser.Walk(sel.Having, visit)
	return found
}

// outputName is the alias, or DuckDB's rendering of the expression (a column
// keeps its name as written).
func outputName(it parser.SelectItem) string {
	if it.Alias != nil {
		return it.Alias.Name
	}
	if r, ok := unparen(it.Expr).(*parser.ColumnRef); ok {
		return r.Name.Name
	}
	return parser.Format(it.Expr)
}

func (qb *queryBinder) from(ref parser.TableRef, sources map[string]*Source) error {
	b := qb.b
	lookup := func(id parser.Ident) (*Source, error) {
		s := sources[strings.ToLower(id.Name)]
		if s == nil {
			return b.lookupView(id, sources)
		}
		return s, nil
	}
	switch n := ref.(type) {
	case *parser.JoinRef:
		return qb.join(n, sources)
	case *parser.TableName:
		s, err := lookup(n.Name)
		if err != nil {
			return err
		}
		if s.PrimaryKey != nil {
			return b.errAt(n.Name.P, "%s is a versioned table: it is joined to a stream (FROM <stream> s JOIN %s FOR SYSTEM_TIME AS OF s.<time> ON ...), not read on its own", s.Name, s.Name)
		}
		qb.src, qb.q.Source = s, s
		qb.quals = []string{s.Name}
		if n.Alias != nil {
			qb.quals = []string{n.Alias.Name}
		}
		return nil
	case *parser.WindowTVF:
		s, err := lookup(n.Table)
		if err != nil {
			return err
		}
		if s.PrimaryKey != nil {
			return b.errAt(n.Table.P, "%s is a versioned table: it is joined to a stream, not windowed", s.Name)
		}
		qb.src, qb.q.Source, qb.tvf = s, s, true
		qb.quals = []string{s.Name}
		if n.Alias != nil {
			qb.quals = append(qb.quals, n.Alias.Name)
		}
		for _, c := range []string{"window_start", "window_end"} {
			if s.ColumnIndex(c) >= 0 {
				return b.errAt(n.P, "source %s already has a column named %s, which the window table function adds; rename the column", s.Name, c)
			}
		}
		kind := windowGroupFuncs[strings.ToLower(n.Func.Name)]
		w, err := qb.window(kind, n.Func, nil, n.TimeCol, n.Args, "DESCRIPTOR")
		if err != nil {
			return err
		}
		qb.q.Window = w
		return nil
	}
	return b.errAt(ref.Pos(), "unsupported FROM clause")
}

// window checks a window's time column and sizes.
func (qb *queryBinder) window(kind WindowKind, fn parser.Ident, qual *parser.Ident, timeCol parser.Ident, args []parser.Expr, how string) (*Window, error) {
	b := qb.b
	src := qb.src
	idx, err := qb.colIndex(qual, timeCol)
	if err != nil {
		return nil, err
	}
	if idx < 0 {
		return nil, b.errAt(timeCol.P, "unknown column %q in %s%s", timeCol.Name, how, suggest(timeCol.Name, columnNames(src)))
	}
	if t := src.Columns[idx].Type; t.Kind != types.KindTimestamp {
		return nil, b.errAt(timeCol.P, "window time column %s is %s; windows need a TIMESTAMP column", timeCol.Name, t)
	}
	var want []string
	switch kind {
	case Tumble:
		want = []string{"size"}
	case Hop:
		want = []string{"slide", "size"}
	case Session:
		want = []string{"gap"}
	}
	if len(args) != len(want) {
		return nil, b.errAt(fn.P, "%s takes a time column and %d interval%s (%s), got %d", kind, len(want), map[bool]string{true: "s", false: ""}[len(want) > 1], strings.Join(want, ", "), len(args))
	}
	w := &Window{Kind: kind, TimeCol: idx}
	for i, a := range args {
		v, err := b.fixedInterval(a, kind.String()+" "+want[i], false)
		if err != nil {
			return nil, err
		}
		switch want[i] {
		case "size":
			w.Size = v
		case "slide":
			w.Slide = v
		case "gap":
			w.Gap = v
		}
	}
	if kind == Tumble {
		w.Slide = w.Size
	}
	if kind == Hop && w.Slide > w.Size {
		return nil, b.errAt(args[0].Pos(), "HOP slide (%s) is longer than its size (%s): rows between windows would be dropped; HOP takes the slide first, then the size", ValueText(types.Interv(0, 0, w.Slide)), ValueText(types.Interv(0, 0, w.Size)))
	}
	if kind == Hop {
		if n := w.WindowsPerEvent(); n > MaxHopWindowsPerEvent {
			return nil, b.errAt(args[0].Pos(), "HOP size %s over slide %s puts each event into %d windows, more than the %d allowed: every event would update that many windows and every group keep that many open; use a longer slide or a shorter size",
				ValueText(types.Interv(0, 0, w.Size)), ValueText(types.Interv(0, 0, w.Slide)), n, MaxHopWindowsPerEvent)
		}
	}
	return w, nil
}

func (qb *queryBinder) groupBy(terms []parser.Expr) error {
	b := qb.b
	q := qb.q
	sc := &scope{clause: "GROUP BY", q: qb}
	for _, t := range terms {
		e := unparen(t)
		// GROUP BY 2: the second SELECT item (DuckDB).
		if lit, ok := e.(*parser.NumberLit); ok {
			n, err := strconv.Atoi(lit.Text)
			if err != nil || n < 1 || n > len(qb.items) || qb.items[n-1].Star {
				return b.errAt(lit.P, "GROUP BY %s: there is no SELECT item %s (the SELECT list has %d)", lit.Text, lit.Text, len(qb.items))
			}
			e = unparen(qb.items[n-1].Expr)
		}
		if fc, ok := e.(*parser.FuncCall); ok {
			if kind := windowGroupFuncs[strings.ToLower(fc.Name.Name)]; kind != 0 {
				if err := qb.legacyWindow(fc, kind); err != nil {
					return err
				}
				qb.addKey(KeyTerm{Kind: KeyWindowStart, Name: parser.Format(fc)}, e)
				continue
			}
		}
		if r, ok := e.(*parser.ColumnRef); ok {
			name := strings.ToLower(r.Name.Name)
			if qb.tvf && (name == "window_start" || name == "window_end") {
				if err := qb.checkQual(r); err != nil {
					return err
				}
				kind := KeyWindowStart
				if name == "window_end" {
					kind = KeyWindowEnd
				}
				qb.addKey(KeyTerm{Kind: kind, Name: name}, e)
				continue
			}
			// A SELECT alias (when no source column has that name).
			if r.Qualifier == nil && !qb.knownColumn(r.Name.Name) {
				for _, it := range qb.items {
					if it.Alias != nil && strings.EqualFold(it.Alias.Name, r.Name.Name) {
						e = unparen(it.Expr)
						break
					}
				}
			}
		}
		x, err := b.bindExpr(e, sc)
		if err != nil {
			return err
		}
		qb.addKey(KeyTerm{Kind: KeyExpr, Expr: x, Name: parser.Format(e)}, e)
		if t != e {
			qb.groupIndex[qb.identity(t)] = len(q.Keys) - 1
		}
	}
	return nil
}

func (qb *queryBinder) addKey(k KeyTerm, e parser.Expr) {
	qb.q.Keys = append(qb.q.Keys, k)
	id := qb.identity(e)
	if _, dup := qb.groupIndex[id]; !dup {
		qb.groupIndex[id] = len(qb.q.Keys) - 1
	}
}

func (qb *queryBinder) legacyWindow(fc *parser.FuncCall, kind WindowKind) error {
	b := qb.b
	if qb.q.Window != nil {
		return b.errAt(fc.Name.P, "a query has at most one window; this one already has %s", qb.q.Window.Kind)
	}
	if fc.Star || fc.Distinct || len(fc.Args) == 0 {
		return b.errAt(fc.Name.P, "%s(time_column, interval...) needs a time column first", kind)
	}
	col, ok := unparen(fc.Args[0]).(*parser.ColumnRef)
	if !ok {
		return b.errAt(fc.Args[0].Pos(), "the first argument of %s must be the TIMESTAMP column the window is over", kind)
	}
	if err := qb.checkQual(col); err != nil {
		return err
	}
	w, err := qb.window(kind, fc.Name, col.Qualifier, col.Name, fc.Args[1:], kind.String()+"(...)")
	if err != nil {
		return err
	}
	qb.q.Window = w
	qb.legacy = fc
	return nil
}

// checkWindow applies the rules that need both FROM and GROUP BY.
func (qb *queryBinder) checkWindow(sel *parser.Select) error {
	b := qb.b
	w := qb.q.Window
	if w == nil {
		return nil
	}
	if qb.tvf && len(qb.q.WindowPositions()) == 0 {
		return b.errAt(sel.From.Pos(), "a query over a window table function must GROUP BY window_start (and optionally window_end): otherwise rows of different windows would be mixed")
	}
	src := qb.src
	if src.View != nil {
		return qb.checkViewWindow(sel)
	}
	if err := qb.joinWindow(sel, w); err != nil {
		return err
	}
	col := src.Columns[w.TimeCol].Name
	switch {
	case src.TimeCol < 0:
		return b.errAt(sel.From.Pos(), "windowed query over source %s, which has no WATERMARK: without one no window would ever close; declare WATERMARK FOR %s AS %s - INTERVAL '<delay>' in CREATE SOURCE", src.Name, col, col)
	case src.TimeCol != w.TimeCol:
		return b.errAt(sel.From.Pos(), "the window is over %s but the WATERMARK of source %s is on %s; windows close by the watermark, so they must be over the watermarked column", col, src.Name, src.Columns[src.TimeCol].Name)
	}
	return nil
}

func (qb *queryBinder) checkQual(r *parser.ColumnRef) error {
	if r.Qualifier == nil {
		return nil
	}
	for _, q := range qb.quals {
		if strings.EqualFold(q, r.Qualifier.Name) {
			return nil
		}
	}
	return qb.b.errAt(r.Qualifier.P, "unknown source or alias %q in %s.%s (the query reads %s)", r.Qualifier.Name, r.Qualifier.Name, r.Name.Name, strings.Join(qb.quals, " / "))
}

// isLiteral reports whether e is a literal (never matched against GROUP BY).
func isLiteral(e parser.Expr) bool {
	switch e.(type) {
	case *parser.NumberLit, *parser.StringLit, *parser.BoolLit, *parser.NullLit, *parser.TypedLit, *parser.IntervalLit:
		return true
	}
	return false
}

// postLookup resolves a post-aggregation expression that is, as a whole, a
// GROUP BY term.
func (qb *queryBinder) postLookup(e parser.Expr, sc *scope) (Expr, bool, error) {
	if sc.inAgg || isLiteral(e) {
		return nil, false, nil
	}
	if _, ok := e.(*parser.ParenExpr); ok {
		return nil, false, nil
	}
	i, ok := qb.groupIndex[qb.identity(e)]
	if !ok {
		return nil, false, nil
	}
	// An unknown qualifier binds to no column; report it.
	var qerr error
	parser.Walk(e, func(x parser.Expr) bool {
		if r, ok := x.(*parser.ColumnRef); ok && qerr == nil {
			qerr = qb.checkQual(r)
		}
		return qerr == nil
	})
	if qerr != nil {
		return nil, false, qerr
	}
	k := qb.q.Keys[i]
	t := types.Timestamp
	if k.Kind == KeyExpr {
		t = k.Expr.Type()
	}
	return &ColRef{Index: i, T: t, Name: k.Name, post: true}, true, nil
}

func (qb *queryBinder) column(r *parser.ColumnRef, sc *scope) (Expr, error) {
	b := qb.b
	if qb.src == nil {
		return nil, b.errAt(r.Pos(), "column references are not allowed in %s", sc.clause)
	}
	if qb.sides != nil {
		return qb.joinedColumn(r, sc)
	}
	if err := qb.checkQual(r); err != nil {
		return nil, err
	}
	name := strings.ToLower(r.Name.Name)
	if qb.tvf && (name == "window_start" || name == "window_end") {
		if !sc.post || sc.inAgg {
			return nil, b.errAt(r.Pos(), "%s is only known after grouping: use it in GROUP BY, SELECT or HAVING, not in %s", name, sc.clause)
		}
		slot := 0
		if name == "window_end" {
			slot = 1
		}
		return qb.meta(slot, types.Timestamp, name), nil
	}
	idx := qb.src.ColumnIndex(r.Name.Name)
	if idx < 0 {
		cands := columnNames(qb.src)
		if qb.tvf {
			cands = append(cands, "window_start", "window_end")
		}
		hint := suggest(r.Name.Name, cands)
		if !qb.tvf && (name == "window_start" || name == "window_end") {
			hint = "; window_start and window_end are columns of the window table functions (FROM TABLE(TUMBLE(...))); with GROUP BY TUMBLE(...) use TUMBLE_START(...) / TUMBLE_END(...)"
		}
		what := "source"
		if qb.src.View != nil {
			what = "view"
		}
		return nil, b.errAt(r.Pos(), "unknown column %q in %s %s%s", r.Name.Name, what, qb.src.Name, hint)
	}
	if sc.post {
		return nil, b.errAt(r.Pos(), "column %q must appear in the GROUP BY clause or be used in an aggregate function", r.Name.Name)
	}
	c := qb.src.Columns[idx]
	qb.use(idx)
	return &ColRef{Index: idx, T: c.Type, Name: c.Name}, nil
}

// use marks source column idx as read by the query (the decoder converts
// only those).
func (qb *queryBinder) use(idx int) {
	if qb.deps != nil {
		qb.deps[idx] = true
	}
	if qb.q == nil {
		return // a lone expression (CompileExpr) or a computed column, not a query
	}
	if qb.q.UsedColumns == nil {
		qb.q.UsedColumns = make([]bool, len(qb.src.Columns))
	}
	qb.q.UsedColumns[idx] = true
	// A computed column is evaluated from the columns it reads: the
	// decoder must convert those too.
	for _, d := range qb.src.Columns[idx].Deps {
		qb.q.UsedColumns[d] = true
	}
}

func (qb *queryBinder) meta(slot int, t types.Type, name string) Expr {
	r := &ColRef{Index: -1, T: t, Name: name, post: true}
	qb.metaRefs = append(qb.metaRefs, metaRef{ref: r, slot: slot})
	return r
}

func (qb *queryBinder) metaRef(name string) Expr {
	if name == "is_final" {
		return qb.meta(2, types.Boolean, "is_final()")
	}
	return qb.meta(revisionSlot, types.BigInt, "revision()")
}

// windowBound resolves TUMBLE_START(ts, size) and its kin to the window
// start or end slot, checking the arguments repeat the GROUP BY window.
func (qb *queryBinder) windowBound(fc *parser.FuncCall, sc *scope) (Expr, error) {
	b := qb.b
	name := strings.ToLower(fc.Name.Name)
	wb := windowBoundFuncs[name]
	upper := strings.ToUpper(name)
	switch {
	case !sc.post || sc.inAgg:
		return nil, b.errAt(fc.Name.P, "%s(...) is only known after grouping: use it in SELECT or HAVING, not in %s", upper, sc.clause)
	case qb.tvf:
		col := "window_start"
		if wb.end {
			col = "window_end"
		}
		return nil, b.errAt(fc.Name.P, "%s(...) belongs to GROUP BY %s(...); with a window table function use the %s column", upper, wb.kind, col)
	case qb.legacy == nil:
		return nil, b.errAt(fc.Name.P, "%s(...) needs GROUP BY %s(...)", upper, wb.kind)
	case qb.q.Window.Kind != wb.kind:
		return nil, b.errAt(fc.Name.P, "%s(...) does not match the GROUP BY window %s(...)", upper, qb.q.Window.Kind)
	}
	// The arguments must name the same column and intervals.
	same := len(fc.Args) == len(qb.legacy.Args)
	if same {
		col, ok := unparen(fc.Args[0]).(*parser.ColumnRef)
		if ok {
			idx, err := qb.colIndex(col.Qualifier, col.Name)
			if err != nil {
				return nil, err
			}
			same = idx == qb.q.Window.TimeCol
		}
		for i := 1; same && i < len(fc.Args); i++ {
			got, err := b.fixedInterval(fc.Args[i], upper+" argument", false)
			if err != nil {
				return nil, err
			}
			want, _ := b.fixedInterval(qb.legacy.Args[i], "", false)
			same = got == want
		}
	}
	if !same {
		return nil, b.errAt(fc.Name.P, "%s arguments must repeat the GROUP BY window: %s(%s)", upper, upper, formatArgs(qb.legacy.Args))
	}
	slot := 0
	if wb.end {
		slot = 1
	}
	return qb.meta(slot, types.Timestamp, parser.Format(fc)), nil
}

func formatArgs(args []parser.Expr) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = parser.Format(a)
	}
	return strings.Join(s, ", ")
}

// aggregate binds an aggregate call to its slot, sharing identical calls.
func (qb *queryBinder) aggregate(fc *parser.FuncCall, sc *scope) (Expr, error) {
	b := qb.b
	q := qb.q
	name := strings.ToLower(fc.Name.Name)
	call := AggCall{Func: aggCanonical[name], Distinct: fc.Distinct, Name: parser.Format(fc)}
	if fc.Star {
		if name != "count" {
			return nil, b.errAt(fc.Name.P, "%s(*) is not valid; only count(*) takes *", name)
		}
		if fc.Distinct {
			return nil, b.errAt(fc.Name.P, "count(DISTINCT *) is not valid; name the column: count(DISTINCT x)")
		}
		call.Func = "count_star"
		call.Type = types.BigInt
	} else {
		want := 1
		switch call.Func {
		case "min_by", "max_by", "approx_quantile":
			want = 2
		}
		if len(fc.Args) != want {
			return nil, b.errAt(fc.Name.P, "%s takes %s, got %d", name, plural(want, "argument"), len(fc.Args))
		}
		if fc.Distinct && !distinctOK[call.Func] {
			return nil, b.errAt(fc.Name.P, "%s(DISTINCT ...) is not supported: DISTINCT applies to count, sum, avg, min, max, the variance and standard deviation aggregates, bool_and, bool_or and approx_count_distinct", name)
		}
		args := make([]Expr, len(fc.Args))
		for i, a := range fc.Args {
			x, err := b.bindExpr(a, &scope{clause: "an aggregate argument", q: qb, inAgg: true})
			if err != nil {
				return nil, err
			}
			if x.Type().Kind == types.KindNull {
				x, _ = coerce(x, types.Integer)
			}
			args[i] = x
		}
		arg := args[0]
		at := arg.Type()
		bad := func(hint string) error {
			return b.errAt(fc.Name.P, "%s(%s) is not supported%s", name, at, hint)
		}
		switch call.Func {
		case "count", "approx_count_distinct":
			call.Type = types.BigInt
		case "min", "max", "min_by", "max_by":
			call.Type = at
		case "sum":
			switch at.Kind {
			case types.KindInteger, types.KindBigInt, types.KindHugeInt:
				call.Type = types.HugeInt
			case types.KindDouble:
				call.Type = types.Double
			case types.KindDecimal:
				call.Type = types.Decimal(38, at.Scale)
			case types.KindBoolean:
				return nil, bad(": count true values with sum(CASE WHEN x THEN 1 ELSE 0 END)")
			default:
				return nil, bad(": sum needs a numeric argument")
			}
		case "avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop":
			if !at.IsNumeric() {
				return nil, bad(": " + name + " needs a numeric argument")
			}
			call.Type = types.Double
		case "bool_and", "bool_or":
			if at.Kind != types.KindBoolean {
				return nil, bad(": " + name + " needs a BOOLEAN argument")
			}
			call.Type = types.Boolean
		case "first", "last":
			// The value at the smallest / largest event time: the binder
			// adds the source's event-time column as a hidden argument.
			if qb.src.TimeCol < 0 {
				return nil, b.errAt(fc.Name.P, "%s(x) is the value at the %s event time, and source %s declares no event time; add WATERMARK FOR <timestamp column> AS ... to CREATE SOURCE", name, map[string]string{"first": "smallest", "last": "largest"}[call.Func], qb.src.Name)
			}
			tc := qb.src.Columns[qb.src.TimeCol]
			qb.use(qb.src.TimeCol)
			args = append(args, &ColRef{Index: qb.src.TimeCol, T: tc.Type, Name: tc.Name})
			call.Type = at
		case "approx_quantile":
			switch at.Kind {
			case types.KindInteger, types.KindBigInt, types.KindDouble, types.KindDecimal:
			default:
				return nil, bad(": approx_quantile needs an INTEGER, BIGINT, DOUBLE or DECIMAL argument")
			}
			c, ok := args[1].(*Const)
			if !ok || c.V.Null || !c.T.IsNumeric() {
				return nil, b.errAt(fc.Args[1].Pos(), "approx_quantile's second argument must be a constant fraction between 0 and 1, as in approx_quantile(x, 0.5)")
			}
			f, _ := coerce(c, types.Double)
			qv := f.(*Const).V.F
			if !(qv >= 0 && qv <= 1) {
				return nil, b.errAt(fc.Args[1].Pos(), "approx_quantile's fraction must be between 0 and 1, got %s", c.Text)
			}
			call.Param = types.Float(qv)
			args = args[:1]
			call.Type = at
		}
		call.Args = args
	}
	if fc.Filter != nil {
		x, err := b.bindExpr(fc.Filter, &scope{clause: "FILTER (WHERE ...)", q: qb, inAgg: true})
		if err != nil {
			return nil, err
		}
		if call.Filter, err = b.boolOperand(x, fc.Filter.Pos(), "FILTER (WHERE ...)"); err != nil {
			return nil, err
		}
	}
	// The call's identity covers its name, DISTINCT, arguments and FILTER.
	key := call.Func + "\x00" + qb.identity(fc)
	i, ok := qb.aggIndex[key]
	if !ok {
		i = len(q.Aggs)
		q.Aggs = append(q.Aggs, call)
		qb.aggIndex[key] = i
	}
	return &ColRef{Index: len(q.Keys) + i, T: q.Aggs[i].Type, Name: q.Aggs[i].Name, post: true}, nil
}

func (qb *queryBinder) emit(sel *parser.Select) error {
	b := qb.b
	q := qb.q
	w := q.Window
	e := sel.Emit
	if w == nil {
		q.Emit = Emit{Mode: EmitChanges}
	} else {
		q.Emit = Emit{Mode: EmitFinal}
	}
	if e == nil {
		return nil
	}
	switch e.Kind {
	case parser.EmitFinal:
		if w == nil {
			return b.errAt(e.P, "EMIT FINAL needs a window: a continuous view never closes, so it would never publish; remove EMIT FINAL (continuous views publish every change)")
		}
		q.Emit.Mode = EmitFinal
	case parser.EmitEarly:
		// On a continuous view EMIT EARLY coalesces: every interval, one
		// record per group that changed, instead of one per change.
		if w != nil && w.Kind == Session {
			return b.errAt(e.P, "a session's start can move when sessions merge, so a session row is published only when it closes; remove EMIT EARLY")
		}
		every, err := b.fixedInterval(e.Every, "EMIT EARLY EVERY", false)
		if err != nil {
			return err
		}
		if every < MinEarlyEvery {
			return b.errAt(e.Every.Pos(), "EMIT EARLY EVERY %s is shorter than the shortest interval, %s: each interval wakes the query even when no event comes",
				us(every), us(MinEarlyEvery))
		}
		q.Emit.Mode, q.Emit.EarlyEvery = EmitEarly, every
	case parser.EmitChanges:
		if w != nil && w.Kind == Session {
			return b.errAt(e.P, "a session's start can move when sessions merge, so a session row is published only when it closes; remove EMIT CHANGES")
		}
		q.Emit.Mode = EmitChanges
	}
	if e.Lateness != nil {
		if w == nil {
			return b.errAt(e.Lateness.Pos(), "ALLOWED LATENESS applies to windows; a continuous view has none to keep open")
		}
		late, err := b.fixedInterval(e.Lateness, "ALLOWED LATENESS", true)
		if err != nil {
			return err
		}
		q.Emit.AllowedLateness = late
	}
	return nil
}
