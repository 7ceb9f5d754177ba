package dataflow

import (
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// GroupNeed is the placement a query's aggregate needs of its input rows
// (groupNeed): a runtime splits the aggregate over several partitions only
// when it is a Hash placement.
func GroupNeed(q *plan.Query) Partitioning { return groupNeed(q) }

// groupNeed is the placement a query's aggregate needs: its rows hashed
// by the group identity of its GROUP BY terms other than the window, or
// all in one partition when it groups by the window alone (or nothing).
// A term that is an expression rather than a column is hashed as such.
func groupNeed(q *plan.Query) Partitioning {
	p := Partitioning{Kind: Hash, Rule: GroupIdentity}
	for _, k := range q.Keys {
		if k.Kind != plan.KeyExpr {
			continue
		}
		if c, ok := k.Expr.(*plan.ColRef); ok {
			p.Cols = append(p.Cols, c.Index)
			p.Names = append(p.Names, q.Source.Columns[c.Index].Name)
		} else {
			p.Exprs = append(p.Exprs, k.Name)
		}
	}
	if len(p.Cols)+len(p.Exprs) == 0 {
		return Partitioning{Kind: Single}
	}
	return p
}

// groupOut is how a query's output rows (its SELECT list, which a query
// over it reads as its columns) are placed: by its grouping, when every
// GROUP BY term other than the window is a column of the SELECT list;
// else (a term not selected, so rows equal on the selected columns may be
// apart) anywhere.
func groupOut(q *plan.Query) Partitioning {
	need := groupNeed(q)
	if need.Kind == Single {
		return need
	}
	out := Partitioning{Kind: Hash, Rule: GroupIdentity}
	for slot, k := range q.Keys {
		if k.Kind != plan.KeyExpr {
			continue
		}
		col := selected(q, slot)
		if col < 0 {
			return Partitioning{Kind: Any}
		}
		out.Cols = append(out.Cols, col)
		out.Names = append(out.Names, q.Select[col].Name)
	}
	return out
}

// selected returns the SELECT column that is the post-aggregation slot,
// or -1.
func selected(q *plan.Query, slot int) int {
	for i, c := range q.Select {
		if r, ok := c.Expr.(*plan.ColRef); ok && r.Index == slot {
			return i
		}
	}
	return -1
}

// keyPlacement is the placement an interval join's input needs: hashed by
// join equality of its key, the key's expressions read the joined row
// from offset (the input's own columns are offset less).
func keyPlacement(keys []plan.Expr, offset int, s *plan.Source) Partitioning {
	p := Partitioning{Kind: Hash, Rule: JoinEquality}
	for _, k := range keys {
		if c, ok := k.(*plan.ColRef); ok && c.Index >= offset && c.Index-offset < len(s.Columns) {
			p.Cols = append(p.Cols, c.Index-offset)
			p.Names = append(p.Names, s.Columns[c.Index-offset].Name)
		} else {
			p.Exprs = append(p.Exprs, k.String())
		}
	}
	return p
}
