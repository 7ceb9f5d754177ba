package dataflow

import (
	"fmt"
	"slices"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Lower turns the queries of a compiled program into its physical plan:
// every query gets an aggregate and a sink; every declared source one
// decode node (and a dedup node when it deduplicates), shared by all its
// readers; a view read by other queries feeds them from its aggregate.
// An exchange goes wherever a consumer needs rows placed otherwise than
// its producer places them.
func Lower(prog *plan.Program) (*Plan, error) { return LowerQueries(prog.Queries) }

// LowerQueries is Lower for the queries qs (and every view they read): a
// runtime that runs some queries of a program lowers those.
func LowerQueries(qs []*plan.Query) (*Plan, error) {
	l := &lowerer{p: &Plan{}, decoded: map[*plan.Source]int{}, aggs: map[*plan.Query]int{}, exchanges: map[string]int{}}
	for _, q := range qs {
		if q == nil {
			return nil, fmt.Errorf("%w: a nil query", ErrPlan)
		}
		id, err := l.aggregate(q, nil)
		if err != nil {
			return nil, err
		}
		l.add(&Node{Kind: Sink, Name: q.Name, Query: q, Inputs: []Edge{{From: id}}})
	}
	l.segment()
	return l.p, nil
}

type lowerer struct {
	p         *Plan
	decoded   map[*plan.Source]int // a declared source's decode (or dedup) node
	aggs      map[*plan.Query]int  // a query's aggregate node
	exchanges map[string]int       // (producer, placement) -> exchange node
}

func (l *lowerer) add(n *Node) int {
	n.ID = len(l.p.Nodes)
	l.p.Nodes = append(l.p.Nodes, n)
	return n.ID
}

// aggregate returns q's aggregate node, lowering its inputs first. seen
// holds the queries being lowered below, to refuse a cycle.
func (l *lowerer) aggregate(q *plan.Query, seen []*plan.Query) (int, error) {
	if id, ok := l.aggs[q]; ok {
		return id, nil
	}
	if slices.Contains(seen, q) {
		return 0, fmt.Errorf("%w: query %s reads itself through its views", ErrPlan, q.Name)
	}
	seen = append(seen, q)
	in, err := l.rows(q, seen)
	if err != nil {
		return 0, err
	}
	e := l.edge(in, "", groupNeed(q))
	id := l.add(&Node{Kind: Aggregate, Name: q.Name, Query: q, Inputs: []Edge{e}, Out: carried(q, l.p.Node(e.From).Out)})
	l.aggs[q] = id
	return id, nil
}

// rows returns the node whose output rows q aggregates: its input, or the
// join of its two inputs.
func (l *lowerer) rows(q *plan.Query, seen []*plan.Query) (int, error) {
	switch {
	case q.Join != nil:
		j := q.Join
		stream, err := l.input(j.Stream, seen)
		if err != nil {
			return 0, err
		}
		table, err := l.input(j.Table, seen)
		if err != nil {
			return 0, err
		}
		se := l.edge(stream, "stream", streamNeed(q))
		te := l.edge(table, "table", Partitioning{Kind: Broadcast})
		// The joined row starts with the stream's columns: the stream's
		// placement is the join's.
		out := l.p.Node(se.From).Out
		return l.add(&Node{Kind: TemporalJoin, Name: q.Name, Query: q, Inputs: []Edge{se, te}, Out: out}), nil
	case q.IJoin != nil:
		j := q.IJoin
		left, err := l.input(j.Left, seen)
		if err != nil {
			return 0, err
		}
		right, err := l.input(j.Right, seen)
		if err != nil {
			return 0, err
		}
		ln, rn := keyPlacement(j.LeftKey, 0, j.Left), keyPlacement(j.RightKey, j.Offset, j.Right)
		le, re := l.edge(left, "left", ln), l.edge(right, "right", rn)
		out := ijOut(q, l.p.Node(le.From).Out)
		return l.add(&Node{Kind: IntervalJoin, Name: q.Name, Query: q, Inputs: []Edge{le, re}, Out: out}), nil
	}
	return l.input(q.Source, seen)
}

// input returns the node producing a source's rows: a view's aggregate,
// or the declared source's decode (then dedup) node.
func (l *lowerer) input(s *plan.Source, seen []*plan.Query) (int, error) {
	if s.View != nil {
		return l.aggregate(s.View, seen)
	}
	if id, ok := l.decoded[s]; ok {
		return id, nil
	}
	id := l.add(&Node{Kind: Decode, Name: s.Name, Source: s, Out: Partitioning{Kind: Any}})
	if d := s.Dedup; d != nil {
		need := Partitioning{Kind: Hash, Rule: DistinctIdentity, Cols: []int{d.Col}, Names: []string{s.Columns[d.Col].Name}}
		id = l.add(&Node{Kind: Dedup, Name: s.Name, Source: s, Inputs: []Edge{l.edge(id, "", need)}, Out: need})
	}
	l.decoded[s] = id
	return id, nil
}

// edge connects producer id to a consumer needing need, through an
// exchange when id's placement does not satisfy it. Consumers needing the
// same placement of one producer share its exchange.
func (l *lowerer) edge(id int, role string, need Partitioning) Edge {
	if Satisfies(l.p.Node(id).Out, need) {
		return Edge{From: id, Role: role, Need: need}
	}
	k := fmt.Sprintf("%d/%s", id, need)
	x, ok := l.exchanges[k]
	if !ok {
		x = l.add(&Node{Kind: Exchange, Name: l.p.Node(id).Name, Inputs: []Edge{{From: id}}, Out: provided(need)})
		l.exchanges[k] = x
	}
	return Edge{From: x, Role: role, Need: need}
}
