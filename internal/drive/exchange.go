package drive

import (
	"fmt"
	"slices"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// ExchangeKeys places the rows one exchange of a plan moves by the
// placement the plan gives it (dataflow.Node.Out): a row's key is the
// group identity (AppendGroupIdentity) of the cells the placement hashes,
// its columns of the producer's row, then its expressions (the
// consumer's GROUP BY terms, or a join's key expressions, evaluated over
// that row). Rows that one consumer needs together then share their key
// bytes whichever segment produced them: an event of the source a view
// in a join's segment reads, and a row of the join's other side.
type ExchangeKeys struct {
	cols  []int
	exprs []plan.Expr
	where string // what exprs are, for an evaluation error
	off   int    // where the row goes in scratch: a join's right input's offset
	// scratch holds the row for exprs, which read a join's joined row.
	scratch, cells []types.Value
}

// NewExchangeKeys returns the keys of exchange x of p; an exchange to
// every partition (Broadcast) or to one (Single) has no key cells.
func NewExchangeKeys(p *dataflow.Plan, x int) (*ExchangeKeys, error) {
	n := p.Node(x)
	if n.Kind != dataflow.Exchange {
		return nil, fmt.Errorf("drive: node %d of the plan is no exchange", x)
	}
	k := &ExchangeKeys{}
	if n.Out.Kind != dataflow.Hash {
		return k, nil
	}
	k.cols = n.Out.Cols
	if len(n.Out.Exprs) == 0 {
		return k, nil
	}
	cs := p.Consumers(x)
	if len(cs) == 0 {
		return nil, fmt.Errorf("drive: exchange %d of the plan has no consumer", x)
	}
	c := p.Node(cs[0])
	role := roleOf(c, x)
	named := map[string]plan.Expr{}
	width := 0
	switch j := c.Query.IJoin; {
	case c.Kind == dataflow.Aggregate:
		k.where = "GROUP BY"
		for _, t := range c.Query.Keys {
			if t.Kind == plan.KeyExpr {
				named[t.Name] = t.Expr
			}
		}
	case c.Kind == dataflow.IntervalJoin && (role == "left" || role == "right"):
		keys := j.LeftKey
		if role == "right" {
			keys, k.off = j.RightKey, j.Offset
		}
		for _, e := range keys {
			named[e.String()] = e
		}
		k.where = "join key"
		width = j.Offset + len(j.Right.Columns)
	}
	for _, name := range n.Out.Exprs {
		e, ok := named[name]
		if !ok {
			return nil, fmt.Errorf("drive: exchange %d of the plan hashes %s, which its consumer %s does not compute", x, name, c.Name)
		}
		k.exprs = append(k.exprs, e)
	}
	k.scratch = make([]types.Value, width)
	return k, nil
}

// NewColumnKeys returns the keys of rows placed by the group identity of
// their columns cols, for a host that places a view's rows where a join
// of the plan reads them without an exchange between them.
func NewColumnKeys(cols []int) *ExchangeKeys { return &ExchangeKeys{cols: cols} }

// Append appends the key of row, a row of the exchange's producer, to
// dst. An expression that fails to evaluate returns an *exec.EvalError.
func (k *ExchangeKeys) Append(dst []byte, row []types.Value) ([]byte, error) {
	k.cells = k.cells[:0]
	for _, c := range k.cols {
		k.cells = append(k.cells, row[c])
	}
	if len(k.exprs) > 0 {
		in := row
		if len(k.scratch) > 0 {
			copy(k.scratch[k.off:], row)
			in = k.scratch
		}
		for _, e := range k.exprs {
			v, err := e.Eval(in)
			if err != nil {
				return dst, &exec.EvalError{Where: k.where, Err: err}
			}
			k.cells = append(k.cells, v)
		}
	}
	return AppendGroupIdentity(dst, slices.Clip(k.cells)), nil
}
