package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// The graph of one query of the embedding API: the root package runs
// every query on a Graph (the C ABI, Python and ubik run on files through
// it), a query that reads no view as a graph of one node.

// NewQueryGraph returns the graph of q, a query that reads no view: one
// node, whose driver is made with cfg as New makes it, so a query New
// refuses is refused with New's error. The graph is flat: it writes its
// driver's checkpoint entries as they are (under no query name, so a
// state written before restores); and as every graph of one node, every
// call's outcome (its error, what it refuses and delivers) is its
// driver's (TestQueryGraphIsItsDriver).
func NewQueryGraph(q *plan.Query, cfg Config) (*Graph, error) {
	d, err := New(q, cfg)
	if err != nil {
		return nil, err
	}
	if len(q.Views()) > 0 {
		return nil, fmt.Errorf("drive: query %s reads views: its graph has a node for each (NewGraph)", q.Name)
	}
	g, err := planGraph(q, nil, nil)
	if err == nil {
		err = g.link(nil)
	}
	if err == nil {
		err = g.check()
	}
	if err != nil {
		return nil, err
	}
	d.useSoloFeed(cfg)
	n := g.primary
	n.d, n.root = d, true
	g.reporter = n
	g.lone, g.flat = true, true
	return g, nil
}

// Leave ends a call begun by Enter; deferred, it turns a panic into an
// ErrInternal error that is the primary's fatal error from then on, as
// Driver.Leave does (which cannot recover it for the graph: recover
// stops a panic only when the deferred function calls it itself).
func (g *Graph) Leave(err *error) {
	d := g.primary.d
	if r := recover(); r != nil {
		d.fatal = internal(r)
		*err = d.fatal
		LogPanic(d.log, d.fatal)
	}
	d.busy.Store(false)
}

// Roots is the number of nodes reading the declared sources: PushKeyed
// takes a key for a graph of one.
func (g *Graph) Roots() int { return len(g.roots) }
