package ubik

import "github.com/ubiksql/ubik/internal/sql/plan"

// Column is one column of a query's output row (its SELECT list), as the
// changelog's value object names it.
type Column struct {
	Name string
	Type string // the SQL type, as explain prints it: VARCHAR, BIGINT, DECIMAL(38,2), ...
}

// Columns returns the query's output columns in SELECT order.
func (q *Query) Columns() []Column { return columnsOf(q.plan) }

func columnsOf(q *plan.Query) []Column {
	cols := make([]Column, len(q.Select))
	for i, c := range q.Select {
		cols[i] = Column{Name: c.Name, Type: c.Expr.Type().String()}
	}
	return cols
}

// JoinKind says which join, if any, a query's input is.
type JoinKind uint8

const (
	NoJoin       JoinKind = iota // one input, a source or a view
	TemporalJoin                 // a stream joined with a versioned table (Stats.Join, Stats.Table)
	IntervalJoin                 // two streams joined within an interval (Stats.Interval, Stats.Table)
)

// JoinKind returns the join the query reads.
func (q *Query) JoinKind() JoinKind {
	switch {
	case q.plan.Join != nil:
		return TemporalJoin
	case q.plan.IJoin != nil:
		return IntervalJoin
	}
	return NoJoin
}
