package drive

import (
	"fmt"
	"math"

	"github.com/ubiksql/ubik/internal/types"
)

// A graph's second input: a temporal join's versioned table, an interval
// join's right stream, or the second source of a join of two views.

// second checks that the graph has a second input that has not ended. A
// graph of one node leaves that to its driver, whose words (and whose
// leniency: a second EndTable does nothing) a host of one query knows; a
// graph of views keeps its own, which name the input of the graph.
func (g *Graph) second() error {
	if g.lone {
		if g.join == nil {
			return g.primary.d.errNoInput() // a query that reads no view
		}
		return nil
	}
	if g.join != nil {
		if g.ended[1] {
			if g.join.q.IJoin != nil {
				return fmt.Errorf("%w: input %s has ended", ErrClosed, g.join.secondName())
			}
			return fmt.Errorf("%w: table %s has ended", ErrClosed, g.join.q.Join.Table.Name)
		}
		return nil
	}
	if len(g.sources) < 2 {
		return ErrGraphTable
	}
	if g.ended[1] {
		return fmt.Errorf("%w: input %s has ended", ErrClosed, g.sources[1].Name)
	}
	return nil
}

// PushTable decodes one record of the second source and applies it to
// the roots reading it (see ErrGraphTable).
func (g *Graph) PushTable(raw []byte) (err error) {
	if g.lone && g.fatal == nil && g.join != nil {
		// One node: no inbox, no step, nothing to settle (eachOf's lone
		// case); a table loaded row by row is a host's hot path.
		return g.lonely(g.primary.d.PushInput(1, raw))
	}
	defer g.settle(&err)
	if err := g.second(); err != nil {
		return err
	}
	if err := g.admit(true); err != nil {
		return err
	}
	if g.join != nil {
		return g.onJoin(func(d *Driver) error { return d.PushInput(1, raw) })
	}
	return g.eachOf(1, func(d *Driver) error { return d.Push(raw) })
}

// onJoin runs f, a call of the table input, on the join's root, then
// moves what it released on.
func (g *Graph) onJoin(f func(d *Driver) error) error {
	n := g.join
	g.begin(true)
	g.setStep(n, g.step)
	err := f(n.d)
	g.marked(n)
	g.rootCall = false
	if err != nil && n.d.fatal != nil {
		return g.fail(err)
	}
	if perr := g.pump(); perr != nil {
		return perr
	}
	return err
}

// PushTableBehind is PushTable for the temporal join's table that also
// counts the row late when it is behind floor (Driver.PushTableBehind).
func (g *Graph) PushTableBehind(raw []byte, floor int64) (err error) {
	defer g.settle(&err)
	if g.join == nil {
		return g.PushTable(raw)
	}
	if err := g.second(); err != nil {
		return err
	}
	if err := g.admit(true); err != nil {
		return err
	}
	return g.onJoin(func(d *Driver) error { return d.PushBehind(1, raw, floor) })
}

// PushTableRow applies one typed row of the second source.
func (g *Graph) PushTableRow(row []types.Value) (err error) {
	defer g.settle(&err)
	if err := g.second(); err != nil {
		return err
	}
	if g.isFed(1) {
		return g.feedRow(1, row)
	}
	if err := g.admit(true); err != nil {
		return err
	}
	if g.join != nil {
		return g.onJoin(func(d *Driver) error { return d.PushInputRow(1, row) })
	}
	return g.eachOf(1, func(d *Driver) error { return d.PushRow(row) })
}

// AdvanceTableWatermark moves the second source's watermark.
func (g *Graph) AdvanceTableWatermark(wm int64) (err error) {
	defer g.settle(&err)
	if err := g.second(); err != nil {
		return err
	}
	if g.isFed(1) {
		return g.feed(1, itemWatermark, wm, nil)
	}
	if g.join != nil {
		if err := g.pump(); err != nil {
			return err
		}
		return g.onJoin(func(d *Driver) error { return d.AdvanceInput(1, wm) })
	}
	return g.controlOf(1, func(d *Driver) error { return d.AdvanceWatermark(wm) }, 0)
}

// EndTable ends the second source: its roots close, then their readers
// after the views' last rows; the first source goes on.
func (g *Graph) EndTable() (err error) {
	defer g.settle(&err)
	if err := g.second(); err != nil {
		return err
	}
	g.ended[1] = true
	if g.join != nil {
		if err := g.pump(); err != nil {
			return err
		}
		return g.onJoin(func(d *Driver) error { return d.EndInput(1) })
	}
	return g.controlOf(1, (*Driver).Close, itemClose)
}

// EndFirst ends the first source of a graph of two alone (its input
// ended while the second goes on): its roots close, then their readers
// after the views' last rows, so a join of two views holds no row of the
// other side for it any more. Ending twice is a no-op; Close ends both.
func (g *Graph) EndFirst() (err error) {
	defer g.settle(&err)
	if ij := g.ijRoot(); ij != nil {
		if g.ended[ij.input] {
			return nil
		}
		g.ended[ij.input] = true
		// The join's left stream ends (its right goes on); any other
		// root of that source closes.
		for _, n := range g.rootsOf(ij.input) {
			f, pass := (*Driver).Close, itemClose
			if n == ij {
				f, pass = func(d *Driver) error { return d.EndInput(0) }, 0
			}
			if err := g.controlNode(n, f, pass); err != nil {
				return err
			}
		}
		return nil
	}
	if g.lone {
		return errNoEndFirst(g.primary.q) // a query that reads no view
	}
	if len(g.sources) < 2 {
		return fmt.Errorf("drive: the graph of %s reads one source: its input ends with Close", g.primary.q.Name)
	}
	if g.ended[0] {
		return nil
	}
	g.ended[0] = true
	return g.controlOf(0, (*Driver).Close, itemClose)
}

// TableCounts are the second input's counters (zero with one): the
// temporal join's table's, or the second source's: its reporter's events
// and malformed, and the late events and evaluation errors of all its
// roots.
func (g *Graph) TableCounts() Counts {
	if g.join != nil {
		return g.join.d.InputCounts(1)
	}
	if len(g.sources) < 2 || g.isFed(1) {
		return Counts{}
	}
	c := g.reporterOf(1).d.Counts()
	c.EvalErrors, c.Late = 0, 0
	for _, n := range g.rootsOf(1) {
		o := n.d.Counts()
		c.EvalErrors += o.EvalErrors
		c.Late += o.Late
	}
	return c
}

// JoinStats are the graph's temporal join's (zero without one).
func (g *Graph) JoinStats() JoinStats {
	if g.join == nil {
		return JoinStats{}
	}
	return g.join.d.JoinStats()
}

// InputWatermarks are the watermarks of the graph's two inputs: the
// temporal join's stream and table, or the two sources' (the first root
// of each); math.MinInt64 for both when it reads one.
func (g *Graph) InputWatermarks() (int64, int64) {
	if g.join != nil {
		return g.join.d.InputWatermark(0), g.join.d.InputWatermark(1)
	}
	if len(g.sources) < 2 {
		return math.MinInt64, math.MinInt64
	}
	return g.InputWatermark(0), g.InputWatermark(1)
}

// InputWatermark is input i's watermark: its first root's, or the last
// marker of a view whose rows the host brings.
func (g *Graph) InputWatermark(i int) int64 {
	switch {
	case g.isFed(i):
		return g.fedMark[i]
	case i == 1 && g.join != nil:
		return g.join.d.InputWatermark(1)
	}
	return g.firstRootOf(i).d.Watermark()
}

// IntervalStats are the primary's interval join's, or else the interval
// join of two streams at the graph's root (zero without one).
func (g *Graph) IntervalStats() IntervalStats {
	if n := g.ijRoot(); n != nil && g.primary.q.IJoin == nil {
		return n.d.IntervalStats()
	}
	if _, ij := g.primary.d.first.(intervalNode); !ij && g.anyFed() {
		// A segment graph's join of two views below the primary.
		for _, n := range g.nodes {
			if n.two {
				return n.d.IntervalStats()
			}
		}
	}
	return g.primary.d.IntervalStats()
}
