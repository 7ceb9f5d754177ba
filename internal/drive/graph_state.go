package drive

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ubiksql/ubik/internal/exec"
)

// A graph's counters, checkpoint and restore: every node's entries under
// its query name, the primary's meta entry last.

// TakeCounts returns what the graph counted since the last call: the
// reporter's input counters, and the late events and evaluation errors
// of every node (a view's rows are not events of the input).
func (g *Graph) TakeCounts() Counts {
	c := g.reporter.d.TakeCounts()
	for _, n := range g.nodes {
		if n != g.reporter {
			o := n.d.TakeCounts()
			c.EvalErrors += o.EvalErrors
			c.Late += o.Late
		}
	}
	return c
}

// NodeStats returns every node's operator counters, upstream first.
func (g *Graph) NodeStats() []exec.Stats {
	out := make([]exec.Stats, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = n.d.Stats()
	}
	return out
}

// MetaKey is the checkpoint key of the primary's meta entry (the one
// whose position Restore returns).
func (g *Graph) MetaKey() []byte { return g.key(nil, g.primary, []byte(exec.MetaKey)) }

// Stats are the primary's operator counters.
func (g *Graph) Stats() exec.Stats { return g.primary.d.Stats() }

// Counts are the first input's counters: its reporter's events and
// malformed (every root of an input reads the same records), and the late
// events and evaluation errors of every node but the second input's roots
// (TableCounts has those). So Counts().Late plus TableCounts().Late is
// every event of the graph handed to a late hook, as TakeCounts adds
// them: a view's late events are the input's, whichever query the host
// reports.
func (g *Graph) Counts() Counts {
	c := g.reporter.d.Counts()
	c.EvalErrors, c.Late = 0, 0
	for _, n := range g.nodes {
		if len(n.q.Views()) == 0 && n.input == 1 {
			continue
		}
		o := n.d.Counts()
		c.EvalErrors += o.EvalErrors
		c.Late += o.Late
	}
	return c
}

// key is node n's checkpoint key: prefixed with its query name, unless
// the graph is flat.
func (g *Graph) key(dst []byte, n *gnode, key []byte) []byte {
	if g.flat {
		return append(dst, key...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(n.q.Name)))
	dst = append(dst, n.q.Name...)
	return append(dst, key...)
}

// Checkpoint writes every node's state entries under its query name; each
// node's meta entry carries position, the primary's comes last. It
// refuses (ErrBackpressure, nothing written) while an inbox or the
// primary's queue holds work.
func (g *Graph) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	// A record skipped as the rows in flight are delivered is counted,
	// not the checkpoint's error: a driver's checkpoint returns none.
	err := g.flush()
	g.evalErr = nil
	if err != nil {
		return err
	}
	if err := g.primary.d.agg.pump(); err != nil {
		return err
	}
	if g.lone && g.primary.d.Queued() {
		return checkpointWaits() // its driver's words: it has no inbox
	}
	if g.waiting() || g.primary.d.Queued() {
		return fmt.Errorf("%w: a checkpoint waits until the rows between the views and the records of finalized windows are taken", ErrBackpressure)
	}
	var kb []byte
	order := append(slices.DeleteFunc(slices.Clone(g.nodes), func(n *gnode) bool { return n == g.primary }), g.primary)
	for _, n := range order {
		err := n.d.Checkpoint(full, position, func(key, val []byte) error {
			kb = g.key(kb[:0], n, key)
			return put(kb, val)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Restore loads one entry written by Checkpoint into its node. It returns
// the host's position for the primary's meta entry.
func (g *Graph) Restore(key, val []byte) ([]byte, error) {
	if g.flat {
		return g.primary.d.Restore(key, val)
	}
	l, n := binary.Uvarint(key)
	if n <= 0 || uint64(len(key)-n) < l {
		return nil, fmt.Errorf("%w: a graph checkpoint entry without its query name", exec.ErrBadState)
	}
	name := string(key[n : n+int(l)])
	for _, nd := range g.nodes {
		if nd.q.Name == name {
			pos, err := nd.d.Restore(key[n+int(l):], val)
			if nd != g.primary {
				pos = nil
			}
			return pos, err
		}
	}
	return nil, fmt.Errorf("%w: the checkpoint holds query %q, which this graph does not run", exec.ErrBadState, name)
}

// FinishRestore completes every node's restore; it refuses a restored
// state a node cannot carry over (Driver.FinishRestore).
func (g *Graph) FinishRestore() error {
	for _, n := range g.nodes {
		if err := n.d.FinishRestore(); err != nil {
			return err
		}
		n.mark = [2]int64{math.MinInt64, math.MinInt64}
	}
	if n := g.ijRoot(); n != nil {
		// An input of the join that had ended before the checkpoint
		// (EndFirst, EndTable) is over in the restored graph too.
		g.ended[n.input] = n.d.first.ended(0)
		g.ended[1] = n.d.first.ended(1)
	}
	if g.stepped {
		// The input's records before the checkpoint: the events
		// numbered from the restored counters on are the calls'.
		c := g.reporter.d.n
		g.outs.first = int(c.Events + c.Headers)
	}
	return nil
}
