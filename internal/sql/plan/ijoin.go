package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// IntervalJoin is an inner join of two streams on equal keys and a time
// bound on both sides (Flink's interval join):
//
//	FROM l JOIN r ON r.k = l.k AND r.ts BETWEEN l.ts - INTERVAL 'a' AND l.ts + INTERVAL 'b'
//
// A pair (l, r) matches when every key pair is equal (a NULL never
// matches) and Lower <= r.ts - l.ts <= Upper (strict where LowerStrict,
// UpperStrict), both ts the inputs' event-time columns. The query's
// Source is the joined row, Left's columns then Right's (offset by
// Offset); its event time is TimeSide's time column, the one the query
// windows on. Each input is a declared stream with a watermark, or a
// windowed EMIT FINAL view (its window start the time).
type IntervalJoin struct {
	Left, Right           *Source
	LeftAlias, RightAlias string
	// LeftKey and RightKey are the equality's sides, one pair per
	// conjunct, unified to one type per pair; LeftKey reads the joined
	// row's left part, RightKey its right part (ordinals offset).
	LeftKey, RightKey []Expr
	// Lower and Upper bound r.ts - l.ts (µs).
	Lower, Upper             int64
	LowerStrict, UpperStrict bool
	// TimeSide is the input whose time is the joined row's event time:
	// 0 the left, 1 the right.
	TimeSide int
	Offset   int
	Text     string
}

// IntervalJoinTimeRule is what the documentation and explain say of the
// joined stream's watermark.
func (j *IntervalJoin) watermarkRule() string {
	l, r := j.LeftAlias, j.RightAlias
	if j.TimeSide == 0 {
		return fmt.Sprintf("min(%s watermark, %s watermark - %s)", l, r, us(j.Upper))
	}
	return fmt.Sprintf("min(%s watermark, %s watermark + %s)", r, l, signedUS(j.Lower))
}

func signedUS(d int64) string {
	if d < 0 {
		return "(-" + us(-d) + ")"
	}
	return us(d)
}

// OutputWatermark is the joined stream's watermark given the inputs'
// (math.MinInt64: nothing known; math.MaxInt64: an input ended). No
// joined row still to come has a time below it less the allowed
// lateness: a new left row is not behind lw less the lateness, a new
// right row not behind rw less the lateness, and a pair's times differ
// by Lower..Upper.
func (j *IntervalJoin) OutputWatermark(lw, rw int64) int64 {
	if j.TimeSide == 0 {
		return min(lw, SatAddWatermark(rw, -j.Upper))
	}
	return min(rw, SatAddWatermark(lw, j.Lower))
}

// SatAddWatermark adds d to a watermark, keeping the two ends (nothing
// known, ended) fixed and saturating in between.
func SatAddWatermark(w, d int64) int64 {
	switch {
	case w == math.MinInt64 || w == math.MaxInt64:
		return w
	case d > 0 && w > math.MaxInt64-d:
		return math.MaxInt64 - 1
	case d < 0 && w < math.MinInt64-d:
		return math.MinInt64
	}
	return w + d
}

// LeftUsed and RightUsed split the query's UsedColumns (over the joined
// row) into the columns each input's decoder converts, the event time
// included.
func (q *Query) LeftUsed() []bool {
	j := q.IJoin
	return sideUsed(j.Left, q.UsedColumns[:j.Offset])
}

// RightUsed: see LeftUsed.
func (q *Query) RightUsed() []bool {
	j := q.IJoin
	return sideUsed(j.Right, q.UsedColumns[j.Offset:])
}

func sideUsed(s *Source, from []bool) []bool {
	used := make([]bool, len(s.Columns))
	copy(used, from)
	mark := func(i int) {
		used[i] = true
		for _, d := range s.Columns[i].Deps {
			used[d] = true
		}
	}
	mark(s.TimeCol)
	return used
}

const intervalShape = "an interval join of two streams is an inner join ON equalities between the two inputs (l.k = r.k, one or more, joined with AND) and a time bound on both sides of their event-time columns: r.ts BETWEEN l.ts - INTERVAL 'a' AND l.ts + INTERVAL 'b', or the pair r.ts >= l.ts - INTERVAL 'a' AND r.ts <= l.ts + INTERVAL 'b' (>, < too, the bounds as INTERVAL offsets on either side), or r.ts = l.ts (of two views, their window starts)"

// intervalJoin binds FROM l JOIN r ON ... where both are streams (or
// EMIT FINAL views).
func (qb *queryBinder) intervalJoin(n *parser.JoinRef, leftRef *parser.TableName, left, right *Source) error {
	b := qb.b
	lAlias, rAlias := left.Name, right.Name
	if leftRef.Alias != nil {
		lAlias = leftRef.Alias.Name
	}
	if n.Right.Alias != nil {
		rAlias = n.Right.Alias.Name
	}
	if strings.EqualFold(lAlias, rAlias) {
		return b.errAt(n.Right.Pos(), "both inputs of the join are called %s; give one an alias (AS name)", lAlias)
	}
	if n.Kind == parser.LeftJoin {
		return b.errAt(n.P, "LEFT JOIN of two streams (an outer interval join) is not supported: write JOIN (inner); a LEFT JOIN reads a versioned table FOR SYSTEM_TIME AS OF the stream's time")
	}
	for _, s := range []struct {
		src *Source
		pos int
	}{{left, leftRef.Name.P}, {right, n.Right.Name.P}} {
		if s.src.TimeCol < 0 {
			if s.src.View != nil {
				return b.errAt(s.pos, "view %s has no event time: a join of two streams needs each input's event time; select the view's window start (%s_START(...) or window_start)", s.src.Name, s.src.View.Window.Kind)
			}
			return b.errAt(s.pos, "stream %s has no event time, so its side of the join would be unbounded: an interval join keeps each row until the other input's watermark passes its bound; declare WATERMARK FOR <timestamp column> AS ... in CREATE SOURCE", s.src.Name)
		}
		if s.src.Dedup != nil {
			return b.errAt(s.pos, "stream %s has a dedup_key: deduplication is not supported on an input of an interval join; deduplicate in a view, or drop the option", s.src.Name)
		}
	}
	off := len(left.Columns)
	joined := &Source{Name: left.Name, TimeCol: left.TimeCol, WatermarkDelay: left.WatermarkDelay, Options: left.Options}
	joined.Columns = append(joined.Columns, left.Columns...)
	for _, c := range right.Columns {
		c.Deps = shift(c.Deps, off)
		joined.Columns = append(joined.Columns, c)
	}
	j := &IntervalJoin{Left: left, Right: right, LeftAlias: lAlias, RightAlias: rAlias, Offset: off,
		Text: b.sql[n.P:endOf(b, n)]}
	qb.src, qb.q.Source, qb.q.IJoin = joined, joined, j
	qb.quals = []string{lAlias, rAlias}
	qb.sides = []joinSide{{left, aliasNames(left.Name, leftRef.Alias), 0}, {right, aliasNames(right.Name, n.Right.Alias), off}}
	return qb.intervalOn(n.On, j)
}

// bound is one time comparison normalized to r.ts - l.ts op c.
type bound struct {
	lower, strict bool
	c             int64
}

// intervalOn binds the ON of an interval join: equalities across the
// inputs and a lower and an upper time bound.
func (qb *queryBinder) intervalOn(on parser.Expr, j *IntervalJoin) error {
	b := qb.b
	var conj []parser.Expr
	var split func(e parser.Expr)
	split = func(e parser.Expr) {
		if be, ok := unparen(e).(*parser.BinaryExpr); ok && strings.EqualFold(be.Op, "AND") {
			split(be.L)
			split(be.R)
			return
		}
		conj = append(conj, e)
	}
	split(on)
	var lo, hi *bound
	set := func(bd bound, pos int) {
		p := &hi
		if bd.lower {
			p = &lo
		}
		cur := *p
		switch {
		case cur == nil:
		case bd.lower && (bd.c > cur.c || bd.c == cur.c && bd.strict):
		case !bd.lower && (bd.c < cur.c || bd.c == cur.c && bd.strict):
		default:
			return
		}
		*p = &bd
	}
	type eq struct {
		l, r parser.Expr
		at   parser.Expr
	}
	var eqs []eq
	for _, c := range conj {
		switch x := unparen(c).(type) {
		case *parser.BetweenExpr:
			if x.Not {
				return b.errAt(x.P, "%s: NOT BETWEEN is not a time bound", intervalShape)
			}
			for i, side := range []parser.Expr{x.Lo, x.Hi} {
				op := ">="
				if i == 1 {
					op = "<="
				}
				bd, ok, err := qb.timeBound(x.X, op, side, j)
				if err != nil {
					return err
				}
				if !ok {
					return b.errAt(x.P, "%s: %s does not compare the event times of the two inputs", intervalShape, parser.Format(c))
				}
				set(bd, x.P)
			}
			continue
		case *parser.BinaryExpr:
			switch x.Op {
			case ">=", ">", "<=", "<":
				bd, ok, err := qb.timeBound(x.L, x.Op, x.R, j)
				if err != nil {
					return err
				}
				if !ok {
					return b.errAt(x.P, "%s: %s is not a time bound between the inputs' event times (%s.%s, %s.%s)", intervalShape, parser.Format(c), j.LeftAlias, timeName(j.Left), j.RightAlias, timeName(j.Right))
				}
				set(bd, x.P)
				continue
			case "=":
				// The two inputs' times equal (up to an offset): both bounds.
				// Other columns (a TIMESTAMP that is not the event time
				// included) make a key equality.
				if bd, ok, err := qb.timeBound(x.L, ">=", x.R, j); err == nil && ok {
					set(bound{lower: true, c: bd.c}, x.P)
					set(bound{c: bd.c}, x.P)
					continue
				}
				sl, err := qb.exprSide(x.L)
				if err != nil {
					return err
				}
				sr, err := qb.exprSide(x.R)
				if err != nil {
					return err
				}
				switch {
				case sl == 0 && sr == 1:
					eqs = append(eqs, eq{x.L, x.R, c})
				case sl == 1 && sr == 0:
					eqs = append(eqs, eq{x.R, x.L, c})
				default:
					return b.errAt(x.P, "%s: %s does not compare a column of %s with one of %s; filter one input in WHERE", intervalShape, parser.Format(c), j.LeftAlias, j.RightAlias)
				}
				continue
			}
		}
		return b.errAt(c.Pos(), "%s: %s is neither an equality nor a time bound", intervalShape, parser.Format(c))
	}
	if len(eqs) == 0 {
		return b.errAt(on.Pos(), "%s: ON has no equality between %s and %s (a join on time alone is not supported)", intervalShape, j.LeftAlias, j.RightAlias)
	}
	if lo == nil || hi == nil {
		which := "lower"
		if lo != nil {
			which = "upper"
		} else if hi == nil {
			which = "lower and no upper"
		}
		return b.errAt(on.Pos(), "%s: ON has no %s bound on %s.%s - %s.%s, so a row would wait for its match forever (the state would be unbounded)", intervalShape, which, j.RightAlias, timeName(j.Right), j.LeftAlias, timeName(j.Left))
	}
	if lo.c > hi.c || lo.c == hi.c && (lo.strict || hi.strict) {
		return b.errAt(on.Pos(), "the time bounds of ON leave no pair: %s.%s - %s.%s must be at least %s and at most %s", j.RightAlias, timeName(j.Right), j.LeftAlias, timeName(j.Left), signedUS(lo.c), signedUS(hi.c))
	}
	j.Lower, j.LowerStrict, j.Upper, j.UpperStrict = lo.c, lo.strict, hi.c, hi.strict
	for _, e := range eqs {
		lx, err := b.bindExpr(e.l, &scope{clause: "ON", q: qb})
		if err != nil {
			return err
		}
		rx, err := b.bindExpr(e.r, &scope{clause: "ON", q: qb})
		if err != nil {
			return err
		}
		if lx.Type().Kind == types.KindNull || rx.Type().Kind == types.KindNull {
			return b.errAt(e.at.Pos(), "ON %s compares with NULL, which never matches", parser.Format(e.at))
		}
		out, _, err := b.unify([]Expr{lx, rx}, e.at.Pos(), "ON "+parser.Format(e.at))
		if err != nil {
			return err
		}
		j.LeftKey = append(j.LeftKey, out[0])
		j.RightKey = append(j.RightKey, out[1])
	}
	return nil
}

// timeBound reads x op y as a bound on r.ts - l.ts, each side an input's
// event-time column plus or minus a constant INTERVAL; ok is false when
// x op y does not compare the two inputs' times.
func (qb *queryBinder) timeBound(x parser.Expr, op string, y parser.Expr, j *IntervalJoin) (bound, bool, error) {
	sx, cx, okx, err := qb.timeTerm(x, j)
	if err != nil || !okx {
		return bound{}, false, err
	}
	sy, cy, oky, err := qb.timeTerm(y, j)
	if err != nil || !oky || sx == sy {
		return bound{}, false, err
	}
	// x + cx op y + cy.
	var c int64
	if sx == 1 {
		// r + cx op l + cy: d op cy - cx.
		c = cy - cx
	} else {
		// l + cx op r + cy: d flip(op) cx - cy.
		c = cx - cy
		op = map[string]string{">=": "<=", ">": "<", "<=": ">=", "<": ">"}[op]
	}
	return bound{lower: op[0] == '>', strict: len(op) == 1, c: c}, true, nil
}

// timeTerm reads e as an input's event-time column, plus or minus
// constant intervals: the input (0 left, 1 right) and the offset (µs).
func (qb *queryBinder) timeTerm(e parser.Expr, j *IntervalJoin) (int, int64, bool, error) {
	b := qb.b
	switch x := unparen(e).(type) {
	case *parser.ColumnRef:
		idx, err := qb.joinColumn(x)
		if err != nil {
			return 0, 0, false, err
		}
		side, src, col := 0, j.Left, idx
		if idx >= j.Offset {
			side, src, col = 1, j.Right, idx-j.Offset
		}
		if col != src.TimeCol {
			if src.Columns[col].Type.Kind == types.KindTimestamp {
				return 0, 0, false, b.errAt(x.Pos(), "%s: the time bound compares %s, but the event time of %s is %s (the column its watermark is on); an interval join bounds the event times, which its state is dropped by", intervalShape, parser.Format(x), qb.sides[side].names[0], timeName(src))
			}
			return 0, 0, false, nil
		}
		return side, 0, true, nil
	case *parser.BinaryExpr:
		if x.Op != "+" && x.Op != "-" {
			return 0, 0, false, nil
		}
		if _, isIv := unparen(x.L).(*parser.IntervalLit); isIv && x.Op == "+" {
			s, c, ok, err := qb.timeTerm(x.R, j)
			if err != nil || !ok {
				return 0, 0, ok, err
			}
			d, err := b.signedInterval(x.L)
			return s, c + d, err == nil, err
		}
		s, c, ok, err := qb.timeTerm(x.L, j)
		if err != nil || !ok {
			return 0, 0, ok, err
		}
		d, err := b.signedInterval(x.R)
		if err != nil {
			return 0, 0, false, err
		}
		if x.Op == "-" {
			d = -d
		}
		return s, c + d, true, nil
	}
	return 0, 0, false, nil
}

// signedInterval evaluates a constant INTERVAL of fixed length (µs, any sign).
func (b *binder) signedInterval(e parser.Expr) (int64, error) {
	x, err := b.bindExpr(e, &scope{clause: "ON", q: &queryBinder{b: b}})
	if err != nil {
		return 0, err
	}
	c, ok := x.(*Const)
	if !ok || c.T.Kind != types.KindInterval || c.V.Null {
		return 0, b.errAt(e.Pos(), "%s: a time bound's offset must be a constant INTERVAL, as in INTERVAL '5' MINUTE; got %s", intervalShape, x.Type())
	}
	m, d, micros := c.V.IntervalParts()
	if m != 0 {
		return 0, b.errAt(e.Pos(), "a time bound's offset must have a fixed length: months and years vary in length; use days, hours, minutes or seconds")
	}
	if d > 100_000_000 || d < -100_000_000 {
		return 0, b.errAt(e.Pos(), "a time bound's offset of %d days is beyond the TIMESTAMP range", d)
	}
	return int64(d)*usPerDay + micros, nil
}

// intervalWindow sets the joined row's event time to the input the
// window is over: either input's event-time column.
func (qb *queryBinder) intervalWindow(sel *parser.Select, w *Window) error {
	j := qb.q.IJoin
	l, r := j.Left.TimeCol, j.Offset+j.Right.TimeCol
	switch w.TimeCol {
	case l:
		j.TimeSide = 0
	case r:
		j.TimeSide = 1
		qb.src.TimeCol = r
	default:
		return qb.b.errAt(sel.From.Pos(), "the window is over %s, which is neither input's event time: a joined row's time is %s.%s or %s.%s (the joined stream's watermark is derived from both inputs' watermarks and the time bounds); window over one of them", qb.src.Columns[w.TimeCol].Name, j.LeftAlias, timeName(j.Left), j.RightAlias, timeName(j.Right))
	}
	return nil
}

// explain renders the interval join: inputs, keys, bounds, state bound
// and the joined stream's watermark.
func (j *IntervalJoin) explain() string {
	keys := make([]string, len(j.LeftKey))
	qual := func(alias string, e Expr) string {
		if _, ok := e.(*ColRef); ok {
			return alias + "." + e.String()
		}
		return e.String()
	}
	for i := range j.LeftKey {
		keys[i] = qual(j.LeftAlias, j.LeftKey[i]) + " = " + qual(j.RightAlias, j.RightKey[i])
	}
	lop, uop := "<=", "<="
	if j.LowerStrict {
		lop = "<"
	}
	if j.UpperStrict {
		uop = "<"
	}
	lt, rt := j.LeftAlias+"."+timeName(j.Left), j.RightAlias+"."+timeName(j.Right)
	tside := lt
	if j.TimeSide == 1 {
		tside = rt
	}
	return fmt.Sprintf("  interval join (inner) %s AS %s JOIN %s AS %s ON %s AND %s %s %s - %s %s %s\n"+
		"    [state: a row of %s is kept until the watermark of %s less the allowed lateness passes %s + %s; a row of %s until the watermark of %s less the allowed lateness passes %s - %s]\n"+
		"    joined rows: append-only, event time %s, watermark %s\n",
		j.Left.Name, j.LeftAlias, j.Right.Name, j.RightAlias, strings.Join(keys, " AND "),
		signedUS(j.Lower), lop, rt, lt, uop, signedUS(j.Upper),
		j.LeftAlias, j.RightAlias, lt, signedUS(j.Upper), j.RightAlias, j.LeftAlias, rt, signedUS(j.Lower),
		tside, j.watermarkRule())
}
