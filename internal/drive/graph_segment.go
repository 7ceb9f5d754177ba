package drive

import (
	"fmt"
	"math"
	"slices"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A segment graph runs one segment of a plan whose inputs are any mix of
// declared sources and views other segments compute (a Kafka task of a
// join whose one side's view runs in the join's partitions, the other's
// rows coming through an exchange). Each input is a declared source,
// whose records the roots reading it decode and take, or a view's rows,
// which wait in the inboxes of the nodes reading the view with its
// watermark markers and its end, as the rows of a view of the graph
// would: the host's call is the step that delivers them.

// NewSegmentGraph returns the graph of primary and the views it reads
// but views (and what only they read), which other segments compute: a
// node reading one of them takes its rows from the host. The graph's
// inputs (Sources) are the declared sources its roots read (at most two),
// a join root's second input, then the views, each in the order its
// nodes read them, upstream first (Input finds one by name): input 0
// takes Push, PushKeyed (one root) or PushRow, and AdvanceWatermark;
// input 1 PushTable or PushTableRow, and AdvanceTableWatermark; any
// PushInputRow and AdvanceInputWatermark. A view's
// input takes its rows and its markers (plan.Query.ViewWatermark of its
// watermark), each row kept as it is until a node applies it (the host
// does not change it after the call); EndFirst, EndTable and Close end it
// as a source's. Each
// root over a declared source decodes with decoder(root) and runs with
// ExternalWatermark (nil decoder: the driver's own decoder). A graph of
// one query writes its driver's checkpoint entries as they are, under no
// query name.
func NewSegmentGraph(primary *plan.Query, views []*plan.Query, decoder func(root *plan.Query) *exec.Decoder, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent)) (*Graph, error) {
	for _, v := range views {
		if v == nil || !reads(primary, v) {
			return nil, fmt.Errorf("drive: a segment graph of %s takes the rows of views it reads", primary.Name)
		}
	}
	g, err := newGraph(primary, nil, cfg, viewEmit, viewLate, &HostInput{views: views, decoders: decoder})
	if err != nil {
		return nil, err
	}
	// A graph of one query writes its driver's entries as they are, as
	// a host graph of one does.
	g.flat = len(g.nodes) == 1
	return g, nil
}

// reads reports whether q reads view v, directly or through other views.
func reads(q, v *plan.Query) bool {
	for _, w := range q.Views() {
		if w == v || reads(w, v) {
			return true
		}
	}
	return false
}

// outsideNodes are the nodes of p that compute views, or feed them only:
// another segment runs them.
func outsideNodes(p *dataflow.Plan, views []*plan.Query) map[int]bool {
	out := map[int]bool{}
	for _, v := range views {
		if a := p.Aggregate(v); a != nil {
			out[a.ID] = true
			for id := range p.Upstream(a.ID) {
				out[id] = true
			}
		}
	}
	return out
}

// fedBy is the view of views whose aggregate node is from, or nil.
func (h *HostInput) fedBy(p *dataflow.Plan, from *dataflow.Node) *plan.Query {
	if h == nil || from.Kind != dataflow.Aggregate {
		return nil
	}
	for _, v := range h.views {
		if p.Aggregate(v) == from {
			return v
		}
	}
	return nil
}

// fedSide reports whether a side of interval join ij is a view the host
// brings.
func (h *HostInput) fedSide(p *dataflow.Plan, ij *dataflow.Node) bool {
	return h.fedBy(p, p.Producer(ij.Inputs[0])) != nil || h.fedBy(p, p.Producer(ij.Inputs[1])) != nil
}

// linkFed makes side of n a reader of view v, a view the host brings
// (own: an input of its own, the right side of a join of a view with
// itself, whose rows the host brings for each side). Until numberFed,
// the views are fedViews and their readers fed, in the order first read.
func (g *Graph) linkFed(n *gnode, v *plan.Query, side int, own bool) error {
	i := slices.Index(g.fedViews, v)
	if i < 0 || own {
		i = len(g.fedViews)
		g.fedViews = append(g.fedViews, v)
		g.fed = append(g.fed, nil)
	}
	g.fed[i] = append(g.fed[i], gedge{n, side})
	return nil
}

// numberFed numbers the views the host brings after the declared
// sources and a join root's second input (input 1, its table or right
// stream): any number of them, each addressed by its name (Input).
func (g *Graph) numberFed() {
	views, readers := g.fedViews, g.fed
	g.fedViews = nil
	if len(views) > 0 && g.join != nil && len(g.sources) == 1 {
		second := g.join.q.IJoin.Right // the join's second input takes input 1
		if g.join.q.Join != nil {
			second = g.join.q.Join.Table
		}
		g.sources = append(g.sources, second)
	}
	g.fed = make([][]gedge, len(g.sources), len(g.sources)+len(views))
	g.fedMark = make([]int64, len(g.sources), cap(g.fed))
	for k, v := range views {
		g.sources = append(g.sources, &plan.Source{Name: v.Name, View: v})
		g.fed, g.fedMark = append(g.fed, readers[k]), append(g.fedMark, math.MinInt64)
	}
	for len(g.ended) < len(g.sources) {
		g.ended = append(g.ended, false)
	}
}

// linkFedJoin links a join of two views one side of which (or both) the
// host brings: the other reads the graph's node.
func (g *Graph) linkFedJoin(n *gnode, ij *dataflow.Node, host *HostInput) error {
	for side, e := range ij.Inputs[:2] {
		from := g.plan.Producer(e)
		var err error
		switch v := host.fedBy(g.plan, from); {
		case v != nil:
			err = g.linkFed(n, v, side, side == 1 && v == host.fedBy(g.plan, g.plan.Producer(ij.Inputs[0])))
		case from.Kind == dataflow.Aggregate:
			err = g.read(n, from, side)
		default:
			err = fmt.Errorf("drive: query %s joins a view and a stream: an interval join in a graph joins two views, or two declared streams", n.q.Name)
		}
		if err != nil {
			return err
		}
	}
	n.two, g.ordered = true, true
	return nil
}

// isFed reports whether input i is a view's rows the host brings.
func (g *Graph) isFed(i int) bool { return i < len(g.fed) && len(g.fed[i]) > 0 }

// anyFed reports whether an input is a view's rows the host brings.
func (g *Graph) anyFed() bool {
	return slices.ContainsFunc(g.fed, func(r []gedge) bool { return len(r) > 0 })
}

// Input is the index of the graph's input named name (a declared
// source's, a join root's second input's, a view's whose rows the host
// brings), or -1: how a host addresses a segment's inputs, of which a
// segment graph has any number.
func (g *Graph) Input(name string) int {
	i := slices.IndexFunc(g.sources, func(s *plan.Source) bool { return s.Name == name })
	if i < 0 && len(g.sources) == 1 && g.join != nil && g.join.secondName() == name {
		i = 1 // a join root's second input, which a graph without fed views does not list
	}
	return i
}

// PushInputRow applies one typed row of input i: PushRow of the first,
// PushTableRow of the second, a view's row the host brings of any.
func (g *Graph) PushInputRow(i int, row []types.Value) (err error) {
	switch {
	case i == 0:
		return g.PushRow(row)
	case i == 1:
		return g.PushTableRow(row)
	case !g.isFed(i):
		return fmt.Errorf("drive: the graph of %s has no input %d", g.primary.q.Name, i)
	}
	defer g.settleEvent(&err, 0, nil, false)
	return g.feedRow(i, row)
}

// AdvanceInputWatermark moves input i's watermark: AdvanceWatermark of
// the first, AdvanceTableWatermark of the second, a view's marker of any.
func (g *Graph) AdvanceInputWatermark(i int, wm int64) (err error) {
	switch {
	case i == 0:
		return g.AdvanceWatermark(wm)
	case i == 1:
		return g.AdvanceTableWatermark(wm)
	case !g.isFed(i):
		return fmt.Errorf("drive: the graph of %s has no input %d", g.primary.q.Name, i)
	}
	defer g.settle(&err)
	return g.feed(i, itemWatermark, wm, nil)
}

// feed delivers an item of input i, a view's row, marker, end or close
// of its open windows, to the nodes reading it, in a step of its own,
// then applies the inboxes.
func (g *Graph) feed(i int, kind gitemKind, wm int64, row []types.Value) error {
	if g.fatal != nil {
		return g.fatal
	}
	if kind == itemWatermark {
		if wm <= g.fedMark[i] {
			return nil
		}
		g.fedMark[i] = wm
	}
	g.begin(true)
	it := gitem{kind: kind, wm: wm, step: g.cur, from: -1}
	for k, r := range g.fed[i] {
		if kind == itemRow && k > 0 {
			row = slices.Clone(row) // each reader holds its own
		}
		it.row = row
		g.deliver(r, it)
	}
	g.rootCall = false
	return g.pump()
}

// feedRow is PushRow and PushTableRow for input i, a view's rows.
func (g *Graph) feedRow(i int, row []types.Value) error {
	if g.ended[i] {
		return fmt.Errorf("%w: input %s has ended", ErrClosed, g.sources[i].Name)
	}
	if err := g.admit(false); err != nil {
		return err
	}
	return g.feed(i, itemRow, 0, row) // the host's: it waits as it is
}
