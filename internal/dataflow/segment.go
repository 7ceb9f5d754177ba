package dataflow

import (
	"slices"
)

// segment assigns every node to a segment: nodes joined by an edge that
// does not leave an exchange are in one segment; an exchange is written
// by its producer's segment and read by its consumers' (as a repartition
// topic is the sink of one sub-topology and the source of the next).
func (l *lowerer) segment() {
	p := l.p
	parent := make([]int, len(p.Nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			if n.Kind == Exchange || p.Node(e.From).Kind != Exchange {
				a, b := find(n.ID), find(e.From)
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	index := map[int]int{}
	for _, n := range p.Nodes { // IDs are in dependency order: inputs first
		r := find(n.ID)
		s, ok := index[r]
		if !ok {
			s = len(p.Segments)
			index[r] = s
			p.Segments = append(p.Segments, Segment{})
		}
		n.Segment = s
		p.Segments[s].Nodes = append(p.Segments[s].Nodes, n.ID)
	}
	for _, n := range p.Nodes {
		seg := &p.Segments[n.Segment]
		for _, e := range n.Inputs {
			if n.Kind != Exchange && p.Node(e.From).Kind == Exchange && !slices.Contains(seg.Inputs, e.From) {
				seg.Inputs = append(seg.Inputs, e.From)
			}
		}
	}
}
