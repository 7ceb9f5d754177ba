// Package dataflow is the physical plan of a script: a DAG of nodes
// (decode, dedup, the joins, the window aggregate, the changelog sink),
// each input of which declares the partitioning it needs. Where a
// producer's partitioning does not give what a consumer needs, the
// planner puts an exchange between them; the maximal sub-graphs between
// exchanges are segments, the unit a runtime schedules (one task per
// partition of a segment, as a Kafka Streams sub-topology runs one task
// per partition of its input topics).
//
// The plan is the same for every runtime: in process on one partition, on
// N goroutines joined by in-memory exchanges, and over Kafka with an
// exchange as a repartition topic. A runtime never asks which query shape
// it runs; it runs nodes, edges and exchanges.
package dataflow

import (
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Kind is what a node does.
type Kind uint8

const (
	// Decode reads a declared source (a stream or a versioned table) and
	// decodes its records into rows: one per source.
	Decode Kind = iota
	// Dedup drops later copies of an event (the source's dedup_key).
	Dedup
	// TemporalJoin joins a stream with a versioned table as of the
	// stream's event time.
	TemporalJoin
	// IntervalJoin joins two streams (declared sources or views) on key
	// equalities within a time interval.
	IntervalJoin
	// Aggregate is a query's WHERE, GROUP BY, window and aggregates, and
	// its emit policy: it turns rows into the query's changelog.
	Aggregate
	// Sink publishes a query's changelog (to the host, a file or a topic).
	Sink
	// Exchange moves rows between partitions so that its consumers get
	// the partitioning they need.
	Exchange
)

var kindNames = [...]string{"decode", "dedup", "temporal-join", "interval-join", "aggregate", "sink", "exchange"}

func (k Kind) String() string { return kindNames[k] }

// Node is one operator of the plan.
type Node struct {
	ID   int
	Kind Kind
	// Name is the source's name (Decode, Dedup) or the query's.
	Name string
	// Source is the declared source of a Decode or Dedup node.
	Source *plan.Source
	// Query is the query of a join, Aggregate or Sink node.
	Query *plan.Query
	// Inputs are the node's inputs, in the operator's order (a temporal
	// join: stream, table; an interval join: left, right).
	Inputs []Edge
	// Out is how the node's output rows are partitioned.
	Out Partitioning
	// Segment is the index of the node's segment in Plan.Segments.
	Segment int
}

// Edge is one input of a node.
type Edge struct {
	From int    // the producing node's ID
	Role string // "stream", "table", "left", "right"; "" for a node's only input
	// Need is the partitioning the consumer needs on this input; the
	// producer (an exchange where one was needed) provides it.
	Need Partitioning
}

// Plan is the physical plan of a script.
type Plan struct {
	Nodes    []*Node
	Segments []Segment
}

// Segment is a maximal sub-graph between exchanges. Its inputs are
// decode nodes (the sources' partitions) and exchanges; its outputs are
// sinks and exchanges it feeds.
type Segment struct {
	Nodes []int // node IDs in topological order
	// Inputs are the exchanges the segment reads (node IDs).
	Inputs []int
}

// Node returns the node with the given ID.
func (p *Plan) Node(id int) *Node { return p.Nodes[id] }

// Consumers returns the IDs of the nodes that read node id.
func (p *Plan) Consumers(id int) []int {
	var out []int
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			if e.From == id {
				out = append(out, n.ID)
			}
		}
	}
	return out
}

// Producer returns the node whose rows reach e's consumer: e's producer,
// or, through exchanges, the node that feeds them (an exchange moves rows
// and changes nothing else).
func (p *Plan) Producer(e Edge) *Node {
	n := p.Node(e.From)
	for n.Kind == Exchange {
		n = p.Node(n.Inputs[0].From)
	}
	return n
}

// Aggregate returns q's aggregate node, or nil.
func (p *Plan) Aggregate(q *plan.Query) *Node {
	for _, n := range p.Nodes {
		if n.Kind == Aggregate && n.Query == q {
			return n
		}
	}
	return nil
}

// Upstream returns the nodes that feed node id, directly or through
// other nodes.
func (p *Plan) Upstream(id int) map[int]bool {
	seen := map[int]bool{}
	var walk func(int)
	walk = func(n int) {
		for _, e := range p.Node(n).Inputs {
			if !seen[e.From] {
				seen[e.From] = true
				walk(e.From)
			}
		}
	}
	walk(id)
	return seen
}
