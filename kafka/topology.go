package kafka

import (
	"slices"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query's stages over Kafka come from its physical plan: one stage per
// segment of the plan (internal/dataflow). chainQueries walks the chain of
// aggregating segments that ends at the query's sink; each stage runs the
// queries of its segment's joins and aggregates (stage2.go), the stage
// after it reading its rows through a repartition topic (viewrepart.go).
// TestTopologyFromPlan derives every stage of the plan the same way (its
// name, topics in and out, state topic) and holds the pipelines to it.

// topology walks a plan's segments.
type topology struct {
	p *dataflow.Plan
}

// chainOf is the chain of aggregating segments ending at seg, upstream
// first: each reads the rows of the one before through an exchange.
func (t *topology) chainOf(seg int) []int {
	segs := []int{seg}
	for s := t.pred(seg); s >= 0; s = t.pred(s) {
		segs = append([]int{s}, segs...)
	}
	return segs
}

// chainQueries returns, for each stage of the chain that ends at q's
// sink (the stages Q, Q-s2, ...), the queries whose operators it runs,
// upstream first: a chain of views cut where the plan puts an exchange,
// and a join whose joined rows an exchange moves runs in a stage of its
// own, its query's aggregate in the next (both name the query).
func chainQueries(q *plan.Query) ([][]*plan.Query, error) {
	p, err := dataflow.LowerQueries([]*plan.Query{q})
	if err != nil {
		return nil, err
	}
	t := &topology{p: p}
	var out [][]*plan.Query
	for _, n := range p.Nodes {
		if n.Kind == dataflow.Sink && n.Query == q {
			for _, s := range t.chainOf(n.Segment) {
				out = append(out, t.queriesOf(s))
			}
		}
	}
	return out, nil
}

// queriesOf are the queries of segment s's joins and aggregates, in
// plan order.
func (t *topology) queriesOf(s int) []*plan.Query {
	var out []*plan.Query
	for _, id := range t.p.Segments[s].Nodes {
		switch n := t.p.Node(id); n.Kind {
		case dataflow.Aggregate, dataflow.TemporalJoin, dataflow.IntervalJoin:
			if !slices.Contains(out, n.Query) {
				out = append(out, n.Query)
			}
		}
	}
	return out
}

// pred is the segment whose rows seg's first aggregate reads through an
// exchange (a view's, or a join's joined rows), or -1: also for a join's
// segment, whose inputs are the join's sides.
func (t *topology) pred(seg int) int {
	if t.joinIn(seg) != nil {
		return -1
	}
	for _, x := range t.p.Segments[seg].Inputs {
		from := t.p.Node(t.p.Node(x).Inputs[0].From)
		if from.Kind != dataflow.Decode && from.Kind != dataflow.Dedup && t.consumer(x, seg).Kind == dataflow.Aggregate {
			return from.Segment
		}
	}
	return -1
}

// joinIn is segment seg's interval join, or nil.
func (t *topology) joinIn(seg int) *dataflow.Node {
	for _, id := range t.p.Segments[seg].Nodes {
		if n := t.p.Node(id); n.Kind == dataflow.IntervalJoin {
			return n
		}
	}
	return nil
}

// consumer is the node of segment seg that reads exchange x.
func (t *topology) consumer(x, seg int) *dataflow.Node {
	for _, id := range t.p.Segments[seg].Nodes {
		n := t.p.Node(id)
		if n.Kind != dataflow.Exchange && slices.ContainsFunc(n.Inputs, func(e dataflow.Edge) bool { return e.From == x }) {
			return n
		}
	}
	return nil
}

// joinsInPlace reports whether q's plan runs a temporal join where its
// stream is (the stream needs no placement: the GROUP BY reads the
// table): in the source's partitions, or in a dedup's, whose segment
// the join's is. Its stage then reads the source topic itself, or the
// events placed by their dedup key, and the broadcast table.
func joinsInPlace(q *plan.Query) (bool, error) {
	p, err := dataflow.LowerQueries([]*plan.Query{q})
	if err != nil {
		return false, err
	}
	for _, n := range p.Nodes {
		if n.Kind != dataflow.TemporalJoin {
			continue
		}
		if k := p.Node(n.Inputs[0].From).Kind; k == dataflow.Decode || k == dataflow.Dedup {
			return true, nil
		}
	}
	return false, nil
}
