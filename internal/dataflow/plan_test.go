package dataflow

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/golden"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestPlanGolden: the physical plan of each script shape (a single query,
// a chain of views, a temporal join, an interval join, a join of two
// views, a query over a join of views, dedup, a global aggregate).
// Regenerate: go test ./internal/dataflow -run TestPlanGolden -update
func TestPlanGolden(t *testing.T) {
	golden.Run(t, "testdata/plans.txt", func(script string) string {
		p, err := lowerScript(script)
		if err != nil {
			return "error: " + err.Error()
		}
		checkPlan(t, p)
		return strings.TrimRight(p.Explain(), "\n")
	})
}

func lowerScript(script string) (*Plan, error) {
	prog, err := plan.Compile(script, plan.CompileOptions{DefaultName: "q", OwnOutputs: true})
	if err != nil {
		return nil, err
	}
	return Lower(prog)
}

// checkPlan holds the invariants every plan keeps: each input gets the
// placement it needs from its producer; an exchange is the only node
// whose input may be placed otherwise; a segment's edges never leave an
// exchange, and an edge between segments always does.
func checkPlan(t *testing.T, p *Plan) {
	t.Helper()
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			from := p.Node(e.From)
			if e.From >= n.ID {
				t.Errorf("#%d reads #%d, which is not before it", n.ID, e.From)
			}
			if n.Kind != Exchange && !Satisfies(from.Out, e.Need) {
				t.Errorf("#%d needs %s from #%d, which places rows by %s", n.ID, e.Need, e.From, from.Out)
			}
			cross := from.Segment != n.Segment
			if n.Kind != Exchange && cross != (from.Kind == Exchange) {
				t.Errorf("#%d in segment %d reads #%d (%s) in segment %d", n.ID, n.Segment, e.From, from.Kind, from.Segment)
			}
			if n.Kind == Exchange && cross {
				t.Errorf("exchange #%d is not in its producer #%d's segment", n.ID, e.From)
			}
		}
	}
}
