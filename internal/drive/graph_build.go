package drive

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"weak"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Building a graph: its nodes (the queries and every view they read), its
// roots and inputs, each node's readers, and each node's driver.

// NewGraph returns the graph of primary, the queries in with, and every
// view they read. cfg configures the primary (its Emit nil: buffered, for
// Next); the other nodes deliver their records to viewEmit (nil: dropped)
// and share cfg's Late, Now, Strict, CountsInCheckpoint and Deduplicated. Every root
// must read one source (a root that joins a second input, a versioned
// table or a right stream, takes it as the graph's second input, with
// cfg's JoinBuffer, LateTable, TableDecoder); with may name queries that read a view or the
// same source, and needs a primary with a callback, since only the
// primary may buffer and it must then have no readers.
//
// viewLate, if set, receives the late events of the other nodes with
// their query's name (instead of cfg.Late).
func NewGraph(primary *plan.Query, with []*plan.Query, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent)) (*Graph, error) {
	return newGraph(primary, with, cfg, viewEmit, viewLate, nil)
}

// HostInput is what a host graph's one root takes (NewHostGraph): the
// input of one segment of the plan. A segment whose input is the rows of
// views is a segment graph (NewSegmentGraph).
type HostInput struct {
	// Decoder decodes the declared source's records, which the root
	// takes (Push, PushKeyed): a segment that reads a source.
	Decoder *exec.Decoder
	// Joined, if set, is the root, whose rows are its join's joined rows,
	// which another host joined (Config.OnJoined): it aggregates them as
	// they are (PushRow is Driver.ApplyRow), its watermark the joined
	// stream's (AdvanceWatermark).
	Joined *plan.Query
	// views and decoders are a segment graph's (NewSegmentGraph).
	views    []*plan.Query
	decoders func(root *plan.Query) *exec.Decoder
}

// NewHostGraph returns the graph of one segment of primary's plan for a
// host that reads the input itself and moves its watermark (a Kafka
// task): primary and the queries below it down to the one root, which
// takes in. A root over the source decodes with in.Decoder and runs with
// ExternalWatermark, so only AdvanceWatermark moves its watermark (Mark
// reports its own event-time watermark; PushKeyed takes its group key).
// A graph of one query writes its driver's checkpoint entries as they
// are, under no query name.
func NewHostGraph(primary *plan.Query, in HostInput, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent)) (*Graph, error) {
	root := in.Joined
	if root != nil && root.IJoin == nil && root.Join == nil {
		return nil, fmt.Errorf("drive: query %s has no join whose joined rows a host graph could take", root.Name)
	}
	g, err := newGraph(primary, nil, cfg, viewEmit, viewLate, &in)
	if err != nil {
		return nil, err
	}
	switch {
	case len(g.roots) != 1 && root == nil:
		return nil, fmt.Errorf("drive: query %s reads the source through %d views: a host graph has one", primary.Name, len(g.roots))
	case root != nil && (len(g.roots) != 1 || g.roots[0].q != root):
		return nil, fmt.Errorf("drive: query %s does not read the rows of %s alone", primary.Name, root.Name)
	}
	g.flat = g.lone
	return g, nil
}

// cut reports whether q is a host graph's root taking its join's joined
// rows.
func (h *HostInput) cut(q *plan.Query) bool { return h != nil && h.Joined != nil && h.Joined == q }

func newGraph(primary *plan.Query, with []*plan.Query, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent), host *HostInput) (*Graph, error) {
	g, err := planGraph(primary, with, host)
	if err != nil {
		return nil, err
	}
	if err := g.link(host); err != nil {
		return nil, err
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	g.numberFed()
	for i, n := range g.nodes {
		n.index = i
	}
	g.lone = len(g.nodes) == 1 && !g.anyFed()
	for _, n := range g.roots {
		n.root = true
	}
	g.reporter = g.primary // a segment graph's whose inputs are all rows
	if len(g.roots) > 0 {
		g.reporter = g.roots[0]
	}
	if len(g.primary.q.Views()) == 0 {
		g.reporter = g.primary
	}
	if len(g.primary.readers) > 0 && cfg.Emit == nil {
		return nil, fmt.Errorf("drive: query %s is read by %s: a query that feeds others delivers its records by callback, not for Next", primary.Name, g.primary.readers[0].n.q.Name)
	}
	if err := g.configure(cfg, viewEmit, viewLate, host); err != nil {
		return nil, err
	}
	return g, nil
}

// planGraph lowers the graph's queries (primary, then with) into their
// physical plan and makes a node of the graph of every aggregate of it,
// upstream first; a row graph runs the aggregates below its root only
// (the host runs those above, as another segment).
func planGraph(primary *plan.Query, with []*plan.Query, host *HostInput) (*Graph, error) {
	qs := []*plan.Query{primary}
	for _, q := range with {
		if q == nil {
			return nil, errors.New("drive: a nil query in a graph")
		}
		qs = append(qs, q)
	}
	p, err := dataflow.LowerQueries(qs)
	if err != nil {
		return nil, err
	}
	g := &Graph{plan: p, byNode: map[int]*gnode{}, ended: make([]bool, 2)}
	var above map[int]bool // the nodes above a row graph's root
	if host != nil && host.Joined != nil {
		if cut := p.Aggregate(host.Joined); cut != nil {
			above = p.Upstream(cut.ID)
		}
	}
	if host != nil && len(host.views) > 0 {
		above = outsideNodes(p, host.views)
	}
	for _, x := range p.Nodes {
		if x.Kind != dataflow.Aggregate || above[x.ID] {
			continue
		}
		n := &gnode{q: x.Query, node: x, mark: [2]int64{math.MinInt64, math.MinInt64}}
		g.byNode[x.ID] = n
		g.nodes = append(g.nodes, n)
	}
	g.primary = g.byNode[p.Aggregate(primary).ID]
	return g, nil
}

// link finds, from the plan, the roots (the nodes reading a declared
// source, and the graph's inputs) and each node's readers.
func (g *Graph) link(host *HostInput) error {
	for _, n := range g.nodes {
		in := g.plan.Producer(n.node.Inputs[0])
		var err error
		switch {
		case host.cut(n.q):
			err = g.linkJoined(n)
		case host.fedBy(g.plan, in) != nil:
			err = g.linkFed(n, host.fedBy(g.plan, in), 0, false)
		case in.Kind == dataflow.IntervalJoin && host.fedSide(g.plan, in):
			err = g.linkFedJoin(n, in, host)
		case in.Kind == dataflow.IntervalJoin:
			err = g.linkIntervalJoin(n, in)
		case in.Kind == dataflow.Aggregate:
			err = g.read(n, in, 0)
		default: // a declared source's decode (or dedup), or a temporal join of it
			err = g.linkRoot(n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// read makes n a reader of the aggregate node from, on its input side.
func (g *Graph) read(n *gnode, from *dataflow.Node, side int) error {
	up := g.byNode[from.ID]
	if up == nil {
		return fmt.Errorf("drive: query %s reads view %s, which the host runs outside this graph", n.q.Name, from.Name)
	}
	up.readers = append(up.readers, gedge{n, side})
	if !slices.Contains(n.producers, up) {
		n.producers = append(n.producers, up)
	}
	return nil
}

// linkJoined links a host graph's root over its join's joined rows: its
// one input is the host's rows.
func (g *Graph) linkJoined(n *gnode) error {
	n.joined = true
	g.sources = append(g.sources, n.q.Source)
	g.roots = append(g.roots, n)
	return nil
}

// linkIntervalJoin links a node whose rows an interval join makes: a join
// of two views reads both, a join of two declared streams is a root.
func (g *Graph) linkIntervalJoin(n *gnode, ij *dataflow.Node) error {
	j := n.q.IJoin
	left, right := g.plan.Producer(ij.Inputs[0]), g.plan.Producer(ij.Inputs[1])
	switch views := (left.Kind == dataflow.Aggregate) == (right.Kind == dataflow.Aggregate); {
	case !views:
		return fmt.Errorf("drive: query %s joins %s and %s: an interval join in a graph joins two views, or two declared streams; join the stream's own windowed EMIT FINAL view instead", n.q.Name, j.Left.Name, j.Right.Name)
	case left.Kind != dataflow.Aggregate:
		return g.joinRoot(n, j.Left, "")
	}
	for side, v := range []*dataflow.Node{left, right} {
		if err := g.read(n, v, side); err != nil {
			return err
		}
	}
	n.two, g.ordered = true, true
	return nil
}

// joinRoot makes n the graph's root with a second input of its own, its
// first input reading first.
func (g *Graph) joinRoot(n *gnode, first *plan.Source, which string) error {
	if g.join != nil {
		return fmt.Errorf("drive: queries %s and %s both join a second input (%s, %s); a graph runs at most one temporal join or interval join of two streams (its second input is the graph's)", g.join.q.Name, n.q.Name, g.join.secondName(), n.secondName())
	}
	g.join = n
	return g.addRoot(n, first, which)
}

// linkRoot makes n a root reading its query's source (a temporal join's
// joined row: the graph's second input is its table).
func (g *Graph) linkRoot(n *gnode) error {
	const which = ", the two sides of a join of two views"
	if n.q.Join != nil {
		return g.joinRoot(n, n.q.Source, which)
	}
	return g.addRoot(n, n.q.Source, which)
}

// addRoot makes n a root reading src, the graph's first or second input.
func (g *Graph) addRoot(n *gnode, src *plan.Source, which string) error {
	n.input = slices.Index(g.sources, src)
	if n.input < 0 {
		if len(g.sources) == 2 {
			return fmt.Errorf("drive: query %s reads %s, a third source (the graph reads %s and %s); a graph reads at most two inputs%s", n.q.Name, src.Name, g.sources[0].Name, g.sources[1].Name, which)
		}
		n.input = len(g.sources)
		g.sources = append(g.sources, src)
	}
	g.roots = append(g.roots, n)
	return nil
}

// check refuses a graph of more inputs than it can take.
func (g *Graph) check() error {
	if g.join != nil && len(g.sources) == 2 {
		if j := g.join.q.IJoin; j != nil {
			other := g.sources[0]
			if other == j.Left {
				other = g.sources[1]
			}
			return fmt.Errorf("drive: query %s joins the streams %s and %s, and the graph also reads %s as the source of another query; a graph reads at most two inputs, here the join's: run the other queries in a graph of their own", g.join.q.Name, j.Left.Name, j.Right.Name, other.Name)
		}
		return fmt.Errorf("drive: query %s joins the versioned table %s, and the graph also reads a second source (%s); a graph reads at most two inputs: run the join's queries in a graph of their own", g.join.q.Name, g.join.q.Join.Table.Name, g.sources[1].Name)
	}
	if len(g.sources) == 2 && !g.joinsSources() {
		return fmt.Errorf("drive: the graph's queries read two sources (%s, %s), but none joins a view of one with a view of the other; a graph reads two inputs only for such a join: run the queries of each source in a graph of their own", g.sources[0].Name, g.sources[1].Name)
	}
	return nil
}

// readerHooks returns the hooks through which node i's driver feeds its
// readers: its watermark markers and its rows. They hold the graph by a
// weak pointer: a driver on several threads keeps its hooks with its
// shards, and frees them (stopping the goroutines) only once the driver
// is unreachable, which a strong pointer back to the graph, and so to
// the driver, would never let happen for a graph dropped unclosed.
func (g *Graph) readerHooks(i int) (onMark func(int64), onRow func([]types.Value) error) {
	wg := weak.Make(g)
	onMark = func(wm int64) {
		if g := wg.Value(); g != nil {
			g.markTo(g.nodes[i], wm)
		}
	}
	onRow = func(row []types.Value) error {
		g := wg.Value()
		if g == nil {
			return nil // the graph is gone: no reader is left to feed
		}
		n := g.nodes[i]
		it := g.item(n, itemRow, 0)
		it.owned = true
		for _, r := range n.readers {
			it.row = g.copyRow(row)
			g.deliver(r, it)
		}
		return nil
	}
	return onMark, onRow
}

// rowSlab is how many cells the graph allocates at once for the copies of
// its views' rows.
const rowSlab = 512

// copyRow copies a view's row for a reader, carved from a slab: an
// allocation per row was about 7% of the reading goroutine of a join of
// two views on threads. A row a join holds keeps its slab alive, at most
// rowSlab cells; the rows of a slab arrive together and mostly expire
// together.
func (g *Graph) copyRow(row []types.Value) []types.Value {
	if len(g.slab) < len(row) {
		g.slab = make([]types.Value, max(rowSlab, len(row)))
	}
	r := g.slab[:len(row):len(row)]
	g.slab = g.slab[len(row):]
	copy(r, row)
	return r
}

// configure makes each node's driver: the primary's with the host's
// config, the others delivering to viewEmit and their readers.
func (g *Graph) configure(cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent), host *HostInput) error {
	g.stepOutcomes(cfg, host)
	onEventError, skipStep := g.outcomeHooks()
	emitView := func(*changelog.Record) error { return nil }
	if viewEmit != nil {
		emitView = viewEmit
	}
	for _, n := range g.nodes {
		c := Config{Late: cfg.Late, Now: cfg.Now, Strict: cfg.Strict, CountsInCheckpoint: cfg.CountsInCheckpoint, Emit: emitView, Threads: cfg.Threads, HostTicks: cfg.HostTicks, Deduplicated: cfg.Deduplicated}
		if n == g.primary {
			c = cfg
		} else if n == g.join {
			// The join's table options are the host's (the primary's
			// config carries them for the graph).
			c.JoinBuffer, c.LateTable, c.TableDecoder = cfg.JoinBuffer, cfg.LateTable, cfg.TableDecoder
			c.IncrementalJoinState = cfg.IncrementalJoinState
		}
		if n.root && len(g.sources) == 2 {
			// The host reads the two inputs' watermarks to interleave
			// them (InputWatermarks): they must be exact at every record.
			c.RecordWatermark = true
		}
		if n == g.reporter {
			// The input's outcomes are the host's, with its tags.
			c.OnEventError, c.BlockEvents = cfg.OnEventError, cfg.BlockEvents
			if g.stepped {
				c.OnEventError = onEventError // held (graph_outcome.go)
			}
		}
		if n != g.primary && viewLate != nil {
			name := n.q.Name
			c.Late = func(ev *exec.LateEvent) { viewLate(name, ev) }
		}
		if len(n.q.Views()) > 0 {
			c.ExternalWatermark = true // moved by the view's markers only
			c.Decoder = nil
		} else if n != g.primary {
			c.Decoder = nil
		}
		if host != nil && host.Decoder != nil && len(n.q.Views()) == 0 {
			c.Decoder, c.ExternalWatermark = host.Decoder, true
		}
		if host != nil && host.decoders != nil && len(n.q.Views()) == 0 {
			c.Decoder, c.ExternalWatermark = host.decoders(n.q), true
		}
		if len(n.readers) > 0 {
			c.OnMark, c.OnRow = g.readerHooks(n.index)
		}
		q := n.q
		if n.joined {
			// The aggregate over the joined rows: the query without its
			// join (the same columns, GROUP BY, windows and name).
			a := *q
			a.IJoin, a.Join = nil, nil
			q = &a
			c.ExternalWatermark, c.Decoder = true, nil
		}
		d, err := New(q, c)
		if err != nil {
			return fmt.Errorf("query %s: %w", n.q.Name, err)
		}
		n.d = d
		if g.stepped && n != g.reporter {
			d.skipStep = skipStep
		}
	}
	return nil
}
