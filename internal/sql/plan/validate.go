package plan

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/types"
)

// Validate checks that q is a plan an operator can run: every part Compile
// always sets is there and consistent (a source with an event time column
// of type TIMESTAMP when it has one, a well-formed window, expressions for
// every GROUP BY expression term, aggregate argument and SELECT column,
// column references within their rows). A plan from Compile always
// passes; Validate is for plans built or altered by hand, so that running
// one fails with the reason instead of crashing.
func (q *Query) Validate() error {
	if q == nil {
		return fmt.Errorf("plan: the query is nil")
	}
	name := q.Name
	if name == "" {
		name = "(unnamed)"
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("plan: query %s: %s", name, fmt.Sprintf(format, args...))
	}
	src := q.Source
	if src == nil {
		return bad("has no source")
	}
	nc := len(src.Columns)
	isTS := func(c int) bool { return src.Columns[c].Type.Kind == types.KindTimestamp }
	if src.TimeCol < -1 || src.TimeCol >= nc {
		return bad("source %s: event time column %d is outside its %d columns", src.Name, src.TimeCol, nc)
	}
	if src.TimeCol >= 0 && !isTS(src.TimeCol) {
		return bad("source %s: event time column %s is %s, not TIMESTAMP", src.Name, src.Columns[src.TimeCol].Name, src.Columns[src.TimeCol].Type)
	}
	if src.Dedup != nil && (src.Dedup.Col < 0 || src.Dedup.Col >= nc) {
		return bad("source %s: dedup key column %d is outside its %d columns", src.Name, src.Dedup.Col, nc)
	}
	if src.Dedup != nil && src.TimeCol < 0 {
		return bad("source %s: deduplication needs an event time column", src.Name)
	}
	if q.UsedColumns != nil && len(q.UsedColumns) != nc {
		return bad("UsedColumns has %d entries for %d source columns", len(q.UsedColumns), nc)
	}
	if w := q.Window; w != nil {
		if w.TimeCol < 0 || w.TimeCol >= nc || !isTS(w.TimeCol) {
			return bad("window time column %d is not a TIMESTAMP column of source %s", w.TimeCol, src.Name)
		}
		switch w.Kind {
		case Tumble:
			if w.Size <= 0 {
				return bad("TUMBLE size %d µs is not positive", w.Size)
			}
		case Hop:
			if w.Size <= 0 || w.Slide <= 0 {
				return bad("HOP size %d µs and slide %d µs must be positive", w.Size, w.Slide)
			}
		case Session:
			if w.Gap <= 0 {
				return bad("SESSION gap %d µs is not positive", w.Gap)
			}
		default:
			return bad("unknown window kind %d", w.Kind)
		}
	}
	// row expressions read the source row; post expressions the row of
	// keys, aggregates and the window and revision slots.
	checkExpr := func(what string, e Expr, width int) error {
		if e == nil {
			return bad("%s has no expression", what)
		}
		if c, ok := e.(*ColRef); ok && (c.Index < 0 || c.Index >= width) {
			return bad("%s reads column %d of a row of %d", what, c.Index, width)
		}
		return nil
	}
	if q.Filter != nil {
		if err := checkExpr("WHERE", q.Filter, nc); err != nil {
			return err
		}
	}
	for i, k := range q.Keys {
		switch k.Kind {
		case KeyExpr:
			if err := checkExpr(fmt.Sprintf("GROUP BY term %d", i+1), k.Expr, nc); err != nil {
				return err
			}
		case KeyWindowStart, KeyWindowEnd:
			if q.Window == nil {
				return bad("GROUP BY term %d is a window bound, but the query has no window", i+1)
			}
		default:
			return bad("GROUP BY term %d has unknown kind %d", i+1, k.Kind)
		}
	}
	for i, a := range q.Aggs {
		for j, e := range a.Args {
			if err := checkExpr(fmt.Sprintf("aggregate %d (%s) argument %d", i+1, a.Func, j+1), e, nc); err != nil {
				return err
			}
		}
	}
	post := q.PostAggWidth()
	if q.Having != nil {
		if err := checkExpr("HAVING", q.Having, post); err != nil {
			return err
		}
	}
	for i, c := range q.Select {
		if err := checkExpr(fmt.Sprintf("SELECT column %d (%s)", i+1, c.Name), c.Expr, post); err != nil {
			return err
		}
	}
	switch q.Emit.Mode {
	case EmitFinal, EmitChanges:
	case EmitEarly:
		if q.Emit.EarlyEvery < MinEarlyEvery {
			return bad("EMIT EARLY interval %d µs is shorter than %d µs", q.Emit.EarlyEvery, MinEarlyEvery)
		}
	default:
		return bad("unknown emit mode %d", q.Emit.Mode)
	}
	return nil
}
