package ubik

import "github.com/ubiksql/ubik/internal/sql/plan"

// StartRawPlan starts a hand-built plan, which no embedder can make: the
// tests of the driver's validation hand it broken ones.
func StartRawPlan(e *Engine, q *plan.Query, qo QueryOptions) (*Query, error) {
	var p *Plan
	if q != nil {
		p = newProgram(&plan.Program{Queries: []*plan.Query{q}}).c.plan(q)
	}
	return e.StartPlan(p, qo)
}

// VarcharText is a VARCHAR value's text.
func VarcharText(v Value) string { return v.v.S }

// RegisterRawSource registers a hand-built source, which the compiler
// would refuse: the tests of the validation at start hand it one.
func RegisterRawSource(e *Engine, s plan.Source) error {
	return e.RegisterSource(newProgram(&plan.Program{}).c.source(&s))
}
