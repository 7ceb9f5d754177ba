package plan

import (
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
)

// identity is the one rule by which the binder decides that two
// expressions of a query are the same expression: the same canonical text
// (identifiers folded, redundant parentheses dropped) and every column
// reference bound to the same column of the query's row. Canonical text
// alone drops qualifiers, and in a join s.v and t.v are different
// columns. It identifies GROUP BY terms, the SELECT and HAVING
// expressions matched against them, and aggregate calls (their arguments
// and FILTER).
func (qb *queryBinder) identity(e parser.Expr) string {
	var b strings.Builder
	b.WriteString(parser.Canonical(e))
	parser.Walk(e, func(x parser.Expr) bool {
		if r, ok := x.(*parser.ColumnRef); ok {
			b.WriteString("\x00")
			b.WriteString(strconv.Itoa(qb.binding(r)))
		}
		return true
	})
	return b.String()
}

// binding is the ordinal of the column r names in the query's row, or -1
// when it names none (a SELECT alias, window_start, or an error the
// binder reports where the reference is bound).
func (qb *queryBinder) binding(r *parser.ColumnRef) int {
	switch {
	case qb.src == nil:
		return -1
	case qb.sides != nil:
		idx, err := qb.joinColumn(r)
		if err != nil {
			return -1
		}
		return idx
	case qb.checkQual(r) != nil:
		return -1
	}
	return qb.src.ColumnIndex(r.Name.Name)
}
