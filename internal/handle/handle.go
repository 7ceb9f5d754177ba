// Package handle lets the packages of this module that run a compiled
// query themselves (the Kafka runtime) reach the plan behind the root
// package's opaque Plan, which embedders cannot: the root type embeds a
// Plan of this package, whose one method is unexported, so only this
// package can call it (the root package's own types name no internal
// type in anything they export).
package handle

import "github.com/ubiksql/ubik/internal/sql/plan"

// Plan holds a compiled query.
type Plan struct{ q *plan.Query }

// New wraps q.
func New(q *plan.Query) Plan { return Plan{q: q} }

func (h Plan) query() *plan.Query { return h.q }

// holder is any type that embeds a Plan.
type holder interface{ query() *plan.Query }

// Query returns the compiled query behind x, a value that embeds a Plan
// (the root package's *Plan), or nil.
func Query(x any) *plan.Query {
	if h, ok := x.(holder); ok {
		return h.query()
	}
	return nil
}
