package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
)

// A query may read another query of the script in FROM when that query is
// a windowed view with EMIT FINAL: each (group, window) of it is published
// once, so its records are an append-only stream of rows, and the reader
// needs no retractions. The reader sees the view as a source (ViewSource)
// whose columns are the view's SELECT list and whose event time is the
// view's window start; hosts feed it the view's final rows (typed, as the
// view computed them) and move its watermark by ViewWatermark.

// viewSource builds the source a reader of q sees. It is registered under
// the view's name after q compiles; reading it is checked by readView.
func viewSource(q *Query) *Source {
	s := &Source{Name: q.Name, TimeCol: -1, View: q}
	for i, c := range q.Select {
		s.Columns = append(s.Columns, Column{Name: c.Name, Type: c.Expr.Type()})
		if s.TimeCol < 0 && q.isWindowStart(c.Expr) && q.Window != nil && q.Window.Kind != Session {
			s.TimeCol = i
		}
	}
	return s
}

// isWindowStart reports whether e is the window start of q itself (a
// TUMBLE_START / HOP_START call, window_start, or the GROUP BY window
// term), not an expression over it.
func (q *Query) isWindowStart(e Expr) bool {
	r, ok := e.(*ColRef)
	if !ok || !r.post {
		return false
	}
	if r.Index == q.WindowStartSlot() {
		return true
	}
	return r.Index < len(q.Keys) && q.Keys[r.Index].Kind == KeyWindowStart
}

// readView checks that the query reading view v at pos may read it: v
// publishes each row once (a window and EMIT FINAL).
func (b *binder) readView(v *Source, pos int) error {
	q := v.View
	switch {
	case q.Window == nil:
		return b.errAt(pos, "view %s is a continuous view: it updates a group on every change, so a query over it would need retractions, which ubik's changelog does not carry; give %s a window and EMIT FINAL (one final row per group and window)", q.Name, q.Name)
	case q.Emit.Mode == EmitEarly:
		return b.errAt(pos, "view %s emits early (EMIT EARLY): it publishes a (group, window) several times, so a query over it would have to retract the earlier values, and ubik's changelog carries no retractions; declare %s with EMIT FINAL so each row is published once, when its window closes", q.Name, q.Name)
	case q.Emit.Mode == EmitChanges:
		return b.errAt(pos, "view %s has EMIT CHANGES: it publishes a (group, window) on every change, so a query over it would have to retract the earlier values, and ubik's changelog carries no retractions; declare %s with EMIT FINAL so each row is published once, when its window closes", q.Name, q.Name)
	}
	return nil
}

// checkViewWindow is checkWindow's rule for a windowed query over a view:
// the window must be over the view's window start, its event time.
func (qb *queryBinder) checkViewWindow(sel *parser.Select) error {
	b := qb.b
	src := qb.src
	v := src.View
	w := qb.q.Window
	col := src.Columns[w.TimeCol].Name
	switch {
	case v.Window.Kind == Session:
		return b.errAt(sel.From.Pos(), "view %s is a SESSION view: a session's start is not bounded by the watermark (a session can stay open for any time), so its final rows have no event time a window could close by; read it without a window (a continuous view), or window it by TUMBLE or HOP", v.Name)
	case src.TimeCol < 0:
		return b.errAt(sel.From.Pos(), "windowed query over view %s, which does not select its window start: the window start is the event time of its final rows; add %s_START(...) (or window_start) to the SELECT list of %s", v.Name, v.Window.Kind, v.Name)
	case src.TimeCol != w.TimeCol:
		return b.errAt(sel.From.Pos(), "the window is over %s, but the event time of view %s is its window start, %s; window by %s", col, v.Name, src.Columns[src.TimeCol].Name, src.Columns[src.TimeCol].Name)
	}
	return nil
}

// ViewWatermark is the watermark of a reader of view q when q's watermark
// is wm: the earliest window start a final row of q can still have. A
// window [s, s+size) of q is final once wm >= s + size + allowed lateness,
// so every window still to be published has s + size + lateness > wm, and
// s is a multiple of the slide (the size for TUMBLE): s >= the first
// multiple of the slide above wm - lateness - size. The result never
// passes wm - lateness, so a reader never runs ahead of the view.
// math.MinInt64 (nothing known yet) stays that.
func (q *Query) ViewWatermark(wm int64) int64 {
	w := q.Window
	if w == nil || w.Kind == Session || wm == math.MinInt64 {
		return math.MinInt64
	}
	slide := w.Slide
	if w.Kind == Tumble || slide <= 0 {
		slide = w.Size
	}
	// wm - lateness - size, saturating at the bottom.
	edge := w.Size + q.Emit.AllowedLateness
	if edge < 0 || wm < math.MinInt64+edge+slide {
		return math.MinInt64
	}
	x := wm - edge
	f := x / slide
	if x%slide < 0 {
		f--
	}
	return f*slide + slide
}

// ViewReaders returns the queries of p that read view q, in script order.
func (p *Program) ViewReaders(q *Query) []*Query {
	var out []*Query
	for _, r := range p.Queries {
		if slices.Contains(r.Views(), q) {
			out = append(out, r)
		}
	}
	return out
}

// Views returns the views q reads directly: its source's, or those of
// the two inputs of an interval join (the left first); empty for a query
// over declared sources.
func (q *Query) Views() []*Query {
	if q.Source.View != nil {
		return []*Query{q.Source.View}
	}
	var out []*Query
	if j := q.IJoin; j != nil {
		for _, s := range []*Source{j.Left, j.Right} {
			if s.View != nil {
				out = append(out, s.View)
			}
		}
	}
	return out
}

// Upstream returns the views q reads, directly or through other views,
// nearest first (along the first view of a join of two views); empty for
// a query over a declared source.
func (q *Query) Upstream() []*Query {
	var out []*Query
	for vs := q.Views(); len(vs) > 0; vs = vs[0].Views() {
		out = append(out, vs[0])
	}
	return out
}

// explainView renders how a query over a view is fed.
func explainView(s *Source) string {
	v := s.View
	tc := "no event time"
	wm := "no watermark"
	if s.TimeCol >= 0 {
		tc = "event time " + s.Columns[s.TimeCol].Name
		slide := v.Window.Slide
		if v.Window.Kind == Tumble {
			slide = v.Window.Size
		}
		wm = fmt.Sprintf("watermark = the first multiple of %s above (%s watermark - %s", us(slide), v.Name, us(v.Window.Size))
		if v.Emit.AllowedLateness != 0 {
			wm += " - " + us(v.Emit.AllowedLateness)
		}
		wm += ")"
	}
	cols := make([]string, len(s.Columns))
	for i := range s.Columns {
		cols[i] = s.Columns[i].Decl()
	}
	return fmt.Sprintf("  input: the final rows of view %s (%s), append-only; %s; %s\n", v.Name, strings.Join(cols, ", "), tc, wm)
}

// addView registers q as a view later queries may name in FROM.
func (b *binder) addView(q *Query) {
	if b.views == nil {
		b.views = map[string]*Source{}
	}
	b.views[strings.ToLower(q.Name)] = viewSource(q)
}

// lookupView resolves a FROM name that is not a source: a view declared
// earlier in the script, checked by readView.
func (b *binder) lookupView(id parser.Ident, sources map[string]*Source) (*Source, error) {
	v := b.views[strings.ToLower(id.Name)]
	if v == nil {
		if pos, declared := b.declared[strings.ToLower(id.Name)]; declared {
			if pos < id.P { // the view being bound names itself
				return nil, b.errAt(id.P, "view %q reads itself; a query reads only sources and views declared before it", id.Name)
			}
			line, _ := parser.LineCol(b.sql, pos)
			return nil, b.errAt(id.P, "view %q is declared later in the script (line %d); a query reads only views declared before it, so move its CREATE VIEW above this query", id.Name, line)
		}
		if len(b.views) == 0 {
			return nil, b.errAt(id.P, "unknown source %q%s", id.Name, suggest(id.Name, sourceNames(sources)))
		}
		names := append(sourceNames(sources), sourceNames(b.views)...)
		return nil, b.errAt(id.P, "unknown source or view %q%s", id.Name, suggest(id.Name, names))
	}
	if err := b.readView(v, id.P); err != nil {
		return nil, err
	}
	return v, nil
}

// Graph renders the program's views over views, one line per path from a
// declared source to a query no other query reads ("events -> minute_totals
// -> hourly"); empty when no query reads a view.
func (p *Program) Graph() []string {
	var lines []string
	for _, q := range p.Queries {
		if len(p.ViewReaders(q)) > 0 || len(q.Views()) == 0 {
			continue
		}
		lines = append(lines, paths(q)...)
	}
	return lines
}

// paths renders every path from a declared source to q, a join (of two
// views, or of two streams) giving one per side (the left first).
func paths(q *Query) []string {
	vs := q.Views()
	if len(vs) == 0 {
		if j := q.IJoin; j != nil {
			return []string{j.Left.Name + " -> " + q.Name, j.Right.Name + " -> " + q.Name}
		}
		return []string{q.Source.Name + " -> " + q.Name}
	}
	var out []string
	for _, v := range vs {
		for _, p := range paths(v) {
			out = append(out, p+" -> "+q.Name)
		}
	}
	return out
}

// joinGroupHint says what to write instead of a join that neither
// aggregates nor groups: group the joined rows by the columns selected,
// with a window over the time input's event time, so that each joined row
// is one (group, window), published once when its window closes.
func (qb *queryBinder) joinGroupHint(sel *parser.Select, j *IntervalJoin) string {
	src, alias := j.Left, j.LeftAlias
	if j.TimeSide == 1 {
		src, alias = j.Right, j.RightAlias
	}
	if src.TimeCol < 0 {
		return "GROUP BY the columns you select"
	}
	tcol := src.Columns[src.TimeCol].Name
	size := "INTERVAL '1' SECOND"
	if v := src.View; v != nil && v.Window != nil && v.Window.Kind != Session {
		slide := v.Window.Slide
		if v.Window.Kind == Tumble || slide <= 0 {
			slide = v.Window.Size
		}
		size = intervalLit(slide)
	}
	tcRef := alias + "." + tcol
	var cols []string
	tsAs := tcol
	for _, it := range sel.Items {
		c, ok := it.Expr.(*parser.ColumnRef)
		if !ok {
			continue
		}
		name := c.Name.Name
		if c.Qualifier != nil {
			name = c.Qualifier.Name + "." + name
		}
		if strings.EqualFold(c.Name.Name, tcol) && (c.Qualifier == nil || strings.EqualFold(c.Qualifier.Name, alias)) {
			if it.Alias != nil {
				tsAs = it.Alias.Name
			}
			continue
		}
		cols = append(cols, name)
	}
	list := strings.Join(cols, ", ")
	if list != "" {
		list += ", "
	}
	win := fmt.Sprintf("TUMBLE(%s, %s)", tcRef, size)
	return fmt.Sprintf("SELECT %sTUMBLE_START(%s, %s) AS %s ... GROUP BY %s%s", list, tcRef, size, tsAs, list, win)
}

// intervalLit renders d (µs) as an INTERVAL literal in its largest whole
// unit.
func intervalLit(d int64) string {
	for _, u := range []struct {
		us   int64
		name string
	}{{86400e6, "DAY"}, {3600e6, "HOUR"}, {60e6, "MINUTE"}, {1e6, "SECOND"}} {
		if d > 0 && d%u.us == 0 {
			return fmt.Sprintf("INTERVAL '%d' %s", d/u.us, u.name)
		}
	}
	return fmt.Sprintf("INTERVAL '%d' MILLISECOND", d/1000)
}
