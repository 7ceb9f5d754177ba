package dataflow

import (
	"slices"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
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
			p.Reads = append(p.Reads, keptReads(plan.ColumnsRead(k.Expr), q.Source, 0))
		}
	}
	if len(p.Cols)+len(p.Exprs) == 0 {
		return Partitioning{Kind: Single}
	}
	return p
}

// Carried is how q's aggregate places its output rows when its input rows
// are placed by in (carried): a runtime that places a join's rows its own
// way follows them through the queries above it.
func Carried(q *plan.Query, in Partitioning) Partitioning { return carried(q, in) }

// carried is how an aggregate's output rows (its SELECT list, which a
// query over it reads as its columns) are placed, given how its input rows
// are: by the SELECT columns that repeat the GROUP BY terms the input is
// hashed by (each a plain column of the input, or the expression the
// input was hashed by), under the input's rule, since rows of one group
// have one cell for each such term; one partition stays one; else (a
// term not selected, or not a GROUP BY term, so rows equal on the
// selected columns may be apart) anywhere.
func carried(q *plan.Query, in Partitioning) Partitioning {
	switch in.Kind {
	case Single:
		return in
	case Hash:
	default:
		return Partitioning{Kind: Any}
	}
	out := Partitioning{Kind: Hash, Rule: in.Rule}
	terms := make([]int, 0, len(in.Cols)+len(in.Exprs))
	for _, c := range in.Cols {
		terms = append(terms, keySlot(q, func(k plan.KeyTerm) bool { r, ok := k.Expr.(*plan.ColRef); return ok && r.Index == c }))
	}
	for i, e := range in.Exprs {
		slot := keySlot(q, func(k plan.KeyTerm) bool { _, ok := k.Expr.(*plan.ColRef); return !ok && k.Name == e })
		if slot < 0 && i < len(in.Reads) && len(in.Reads[i]) == 1 {
			// An expression of one column (a join key under a cast):
			// rows of one group have one cell of that column, so one
			// value of the expression.
			c := in.Reads[i][0]
			slot = keySlot(q, func(k plan.KeyTerm) bool { r, ok := k.Expr.(*plan.ColRef); return ok && r.Index == c })
		}
		terms = append(terms, slot)
	}
	for _, slot := range terms {
		col := -1
		if slot >= 0 {
			col = selected(q, slot)
		}
		if col < 0 {
			return Partitioning{Kind: Any}
		}
		out.Cols = append(out.Cols, col)
		out.Names = append(out.Names, q.Select[col].Name)
	}
	return out
}

// keySlot is the post-aggregation slot of q's first GROUP BY term (other
// than the window) that is, or -1.
func keySlot(q *plan.Query, is func(plan.KeyTerm) bool) int {
	for slot, k := range q.Keys {
		if k.Kind == plan.KeyExpr && is(k) {
			return slot
		}
	}
	return -1
}

// ijOut is how an interval join's joined rows are placed: as its left
// rows are (the joined row starts with the left's columns). The join is
// inner and values that join are one group, so in every joined row the
// two sides of a key equality have one group identity: a hashed left key
// may be named by its right side instead when that is a plain column the
// query groups by and the left key is not.
func ijOut(q *plan.Query, left Partitioning) Partitioning {
	if left.Kind != Hash || left.Rule != GroupIdentity {
		return left
	}
	need := groupNeed(q)
	out := Partitioning{Kind: Hash, Rule: GroupIdentity}
	col := func(c int) {
		out.Cols = append(out.Cols, c)
		out.Names = append(out.Names, q.Source.Columns[c].Name)
	}
	for _, c := range left.Cols {
		if !slices.Contains(need.Cols, c) {
			if rc := rightColumn(q, need, func(lk plan.Expr) bool { r, ok := lk.(*plan.ColRef); return ok && r.Index == c }); rc >= 0 {
				c = rc
			}
		}
		col(c)
	}
	for i, e := range left.Exprs {
		reads := left.Reads[i]
		if !isSubset(reads, need.Cols) {
			if rc := rightColumn(q, need, func(lk plan.Expr) bool { return lk.String() == e }); rc >= 0 {
				col(rc)
				continue
			}
		}
		out.Exprs = append(out.Exprs, e)
		out.Reads = append(out.Reads, reads)
	}
	return out
}

// rightColumn is the joined-row column the right side of q's first key
// equality whose left side is reads, when that side reads one column and
// need hashes it (a plain column, or an expression of one whose group
// identity folds nothing, keptReads); else -1.
func rightColumn(q *plan.Query, need Partitioning, is func(plan.Expr) bool) int {
	j := q.IJoin
	for k, lk := range j.LeftKey {
		rc := plan.ColumnsRead(j.RightKey[k])
		if _, plain := j.RightKey[k].(*plan.ColRef); !plain {
			rc = keptReads(rc, q.Source, 0)
		}
		if len(rc) == 1 && is(lk) && slices.Contains(need.Cols, rc[0]) {
			return rc[0]
		}
	}
	return -1
}

// keptReads is cols (columns of src, offset into the row) when an
// expression of them gives rows of one group identity one value: so
// unless one is a DOUBLE, whose group identity folds values an
// expression may tell apart (NaN, ±Infinity and NULL are one group, -0.0
// and 0.0 another, but CAST(x AS VARCHAR) gives 'NaN', 'Infinity', '-0');
// else nil, and a placement by such an expression serves only itself.
func keptReads(cols []int, src *plan.Source, offset int) []int {
	for _, c := range cols {
		if src.Columns[c-offset].Type.Kind == types.KindDouble {
			return nil
		}
	}
	return cols
}

// isSubset reports whether every one of cols is in of.
func isSubset(cols, of []int) bool {
	return !slices.ContainsFunc(cols, func(c int) bool { return !slices.Contains(of, c) })
}

// shifted is cols less offset (an input's own ordinals of joined-row
// columns).
func shifted(cols []int, offset int) []int {
	for i := range cols {
		cols[i] -= offset
	}
	return cols
}

// streamNeed is the placement a temporal join's stream input needs: any,
// since every partition holds the whole table; but when the query's GROUP
// BY reads only the stream's columns (which start the joined row), its
// own placement, so that the joined rows reach the aggregate placed as it
// needs with no exchange after the join (as Kafka routes such a join's
// events by their group key before the join).
func streamNeed(q *plan.Query) Partitioning {
	if need := groupNeed(q); need.Kind == Hash && StreamGrouped(q) {
		return need
	}
	return Partitioning{Kind: Any}
}

// StreamGrouped reports whether a temporal join's GROUP BY reads only the
// stream's columns, so an event's group is known before the join: a host
// that splits the stream by group key (Kafka's repartition stage,
// drive.NewRouter) can route it. A term over a table column is known only
// once the event has joined its version.
func StreamGrouped(q *plan.Query) bool {
	for _, k := range q.Keys {
		if k.Kind == plan.KeyExpr && plan.MaxColumn(k.Expr) >= q.Join.Offset {
			return false
		}
	}
	return true
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
			p.Reads = append(p.Reads, keptReads(shifted(plan.ColumnsRead(k), offset), s, 0))
		}
	}
	return p
}
