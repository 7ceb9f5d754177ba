package drive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A Graph runs a query over views: the query (the primary), every view it
// reads, directly or through other views, and any further queries the host
// asks for, each with its own driver, operator, changelog and key. The
// nodes that read the declared source (the roots) take the host's input;
// every other node reads the final rows of the view it names.
//
// The rows between two nodes are the view's projected rows, typed, as the
// view computed them (Config.OnRow), so exact decimals, HUGEINT sums, NaN,
// infinities and -0.0 reach the reader unchanged and meet its GROUP BY
// under the key rules. They wait in the reader's inbox with the view's
// watermark markers, in the order the view produced them:
//
//   - after every call on a view's driver (an input record, a row, a
//     watermark, a close) its reader's inbox gets a marker
//     plan.Query.ViewWatermark(the view's watermark) when that moved
//     forward: the earliest window start a final row of the view can still
//     have. The reader's watermark is moved only by these markers
//     (Config.ExternalWatermark), never by the rows, so it is a function of
//     the view's input history alone, whatever the batching: a reader's
//     window finalizes once no final row that could fall in it can come,
//     and no row of a view is ever late at its reader.
//   - Close and CloseOpenWindows pass to a reader after the view's last
//     rows.
//
// Inboxes are applied in topological order after every host call. Only
// the primary buffers records (when the host pulls them); a push to it
// that meets backpressure stops the flow, and the rest waits in its inbox
// until the host takes records, so the buffer bound holds for the graph.
// The host's next push is refused (ErrBackpressure) until every inbox is
// empty. A checkpoint writes every node's entries under its name, and
// only with every inbox empty, so a restore resumes the whole graph at one
// input position.
type Graph struct {
	nodes   []*gnode // upstream before downstream
	primary *gnode
	roots   []*gnode // the nodes reading a declared source
	// sources are the declared sources the roots read: one, or two for a
	// join of two views over different sources (the left view's first).
	// The first is the host's Push input, the second its PushTable input.
	sources []*plan.Source
	ended   [2]bool // the inputs ended (EndTable, Close)
	// join is the root whose query has a second input of its own, nil
	// without one: a temporal join (a view over a stream and a versioned
	// table) or an interval join of two declared streams (a view over
	// both). The graph's second input (PushTable, AdvanceTableWatermark,
	// EndTable) is its table, or its right stream; its first input (Push)
	// is the graph's first source, the join's stream or left stream.
	join *gnode
	// reporter is the root whose input counters and event errors the
	// graph reports: the primary when it reads the source, else the first.
	reporter *gnode
	fatal    error

	// The steps of the host's calls (inbox.go): step is the last begun,
	// cur the one whose items are being made; seq numbers the items.
	step, cur, seq uint64
	rootCall       bool // the roots are being called by the host (not the inboxes applied)
	inAll          bool // every node is being called (Tick, EmitEarly)
}

type gnode struct {
	q         *plan.Query
	d         *Driver
	readers   []gedge  // nodes of the graph reading this one
	producers []*gnode // the nodes it reads
	in        [2]inbox // what waits to enter d, per input (inbox.go)
	two       bool     // a join of two views: its inputs interleave in one thread's order
	root      bool     // it reads a declared source
	index     int      // in Graph.nodes
	mark      [2]int64 // the last watermark marker put into in, per input
	input     int      // a root: the index of its source in Graph.sources
	// joined: a row graph's root that is an interval join of two
	// streams or a temporal join, applying the joined rows a host made
	// (NewRowGraph).
	joined bool
	// A join of two views: the inputs whose close (or close of the open
	// windows) has arrived; the node acts once both have.
	closed, closedOpen [2]bool
}

// gedge is a reader of a node: which node, and which of its inputs (0;
// 1 for the right input of a join of two views).
type gedge struct {
	n    *gnode
	side int
}

type gitemKind uint8

const (
	itemRow gitemKind = iota
	itemWatermark
	itemCloseOpen
	itemClose
)

// NewGraph returns the graph of primary, the queries in with, and every
// view they read. cfg configures the primary (its Emit nil: buffered, for
// Next); the other nodes deliver their records to viewEmit (nil: dropped)
// and share cfg's Late, Now, Strict and CountsInCheckpoint. Every root
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

// NewHostGraph is NewGraph for a host that reads the input itself and
// moves its watermark (a Kafka stage): the roots decode with dec and run
// with ExternalWatermark, so only AdvanceWatermark moves theirs (Mark
// reports the first root's own event-time watermark). The primary must
// read a view and the graph must have one root, whose group key
// PushKeyed takes.
func NewHostGraph(primary *plan.Query, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent), dec *exec.Decoder) (*Graph, error) {
	if len(primary.Views()) == 0 {
		return nil, fmt.Errorf("drive: query %s reads no view: run it on a Driver", primary.Name)
	}
	g, err := newGraph(primary, nil, cfg, viewEmit, viewLate, &hostRoots{dec: dec})
	if err != nil {
		return nil, err
	}
	if len(g.roots) != 1 {
		return nil, fmt.Errorf("drive: query %s reads the source through %d views: a host graph has one", primary.Name, len(g.roots))
	}
	return g, nil
}

// NewRowGraph is NewHostGraph for the part of a chain of views that
// starts at root, a query reading a view: the graph holds root, primary
// and the views between them (not root's view), root takes the view's
// typed rows (PushRow) and its watermark from AdvanceWatermark (the
// view's watermark markers: plan.Query.ViewWatermark of the view's
// watermark), as a reader does in a whole graph. A Kafka stage that reads
// a view's final rows from a repartition topic runs it.
//
// root may instead be an interval join of two declared streams, or a
// temporal join of the source with a versioned table, whose join another
// host ran (Config.OnJoined): root then aggregates, without
// its join, the joined rows as they are (PushRow is Driver.ApplyRow for
// it), its watermark the joined stream's from AdvanceWatermark.
//
// root may also be a join of two views: it then takes the left view's
// rows and markers as the first input (PushRow, AdvanceWatermark) and the
// right view's as the second (PushTableRow, AdvanceTableWatermark), as
// the root of a graph with an interval join of two streams does; a Kafka
// join stage that reads both views' final rows runs it.
func NewRowGraph(primary, root *plan.Query, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent)) (*Graph, error) {
	joined := root != nil && (root.IJoin != nil || root.Join != nil) && len(root.Views()) == 0
	if root == nil || !joined && !joinsViews(root) && (len(root.Views()) != 1 || root.IJoin != nil) {
		return nil, fmt.Errorf("drive: a row graph's root must read one view, or join two views, or be a join over the source (an interval join of two streams, a temporal join)")
	}
	g, err := newGraph(primary, nil, cfg, viewEmit, viewLate, &hostRoots{root: root})
	if err != nil {
		return nil, err
	}
	if len(g.roots) != 1 || g.roots[0].q != root {
		if joined {
			return nil, fmt.Errorf("drive: query %s does not read the joined rows of %s alone", primary.Name, root.Name)
		}
		return nil, fmt.Errorf("drive: query %s does not read view %s's rows through %s alone", primary.Name, root.Views()[0].Name, root.Name)
	}
	return g, nil
}

// hostRoots configures the roots of a host graph: dec decodes the
// declared source's records; or root, a reader of a view, is the one root
// (NewRowGraph).
type hostRoots struct {
	dec  *exec.Decoder
	root *plan.Query
}

// joinsViews reports whether q is an interval join of two views.
func joinsViews(q *plan.Query) bool {
	return q.IJoin != nil && q.IJoin.Left.View != nil && q.IJoin.Right.View != nil
}

// cut reports whether q is a row graph's root: its views are outside.
func (h *hostRoots) cut(q *plan.Query) bool { return h != nil && h.root != nil && h.root == q }

func newGraph(primary *plan.Query, with []*plan.Query, cfg Config, viewEmit func(*changelog.Record) error, viewLate func(query string, ev *exec.LateEvent), host *hostRoots) (*Graph, error) {
	g := &Graph{}
	byQuery := map[*plan.Query]*gnode{}
	var add func(q *plan.Query)
	add = func(q *plan.Query) {
		if byQuery[q] != nil {
			return
		}
		if !host.cut(q) {
			for _, v := range q.Views() {
				add(v)
			}
		}
		n := &gnode{q: q, mark: [2]int64{math.MinInt64, math.MinInt64}}
		byQuery[q] = n
		g.nodes = append(g.nodes, n) // after its view: topological
	}
	add(primary)
	for _, q := range with {
		if q == nil {
			return nil, errors.New("drive: a nil query in a graph")
		}
		add(q)
	}
	g.primary = byQuery[primary]
	for _, n := range g.nodes {
		if host.cut(n.q) && (n.q.IJoin != nil || n.q.Join != nil) && len(n.q.Views()) == 0 {
			// A row graph's root over a join's joined rows (an interval
			// join of two streams, a temporal join): its one input is
			// the host's rows.
			n.joined = true
			g.sources = append(g.sources, n.q.Source)
			g.roots = append(g.roots, n)
			continue
		}
		if j := n.q.IJoin; j != nil && (j.Left.View == nil && j.Right.View == nil || host.cut(n.q)) {
			// An interval join of two declared streams (or a row
			// graph's root joining two views, whose rows the host
			// brings): a root whose left input is a source of the
			// graph and whose right input is the graph's second input.
			if g.join != nil {
				return nil, fmt.Errorf("drive: queries %s and %s both join a second input (%s, %s); a graph runs at most one temporal join or interval join of two streams (its second input is the graph's)", g.join.q.Name, n.q.Name, g.join.secondName(), j.Right.Name)
			}
			g.join = n
			n.input = slices.Index(g.sources, j.Left)
			if n.input < 0 {
				if len(g.sources) == 2 {
					return nil, fmt.Errorf("drive: query %s reads %s, a third source (the graph reads %s and %s); a graph reads at most two inputs", n.q.Name, j.Left.Name, g.sources[0].Name, g.sources[1].Name)
				}
				n.input = len(g.sources)
				g.sources = append(g.sources, j.Left)
			}
			g.roots = append(g.roots, n)
			continue
		}
		if j := n.q.IJoin; j != nil {
			if j.Left.View == nil || j.Right.View == nil {
				return nil, fmt.Errorf("drive: query %s joins %s and %s: an interval join in a graph joins two views, or two declared streams; join the stream's own windowed EMIT FINAL view instead", n.q.Name, j.Left.Name, j.Right.Name)
			}
			for side, v := range []*plan.Query{j.Left.View, j.Right.View} {
				up := byQuery[v]
				up.readers = append(up.readers, gedge{n, side})
				if !slices.Contains(n.producers, up) {
					n.producers = append(n.producers, up)
				}
			}
			n.two = true
			continue
		}
		if v := n.q.Source.View; v != nil && !host.cut(n.q) {
			up := byQuery[v]
			up.readers = append(up.readers, gedge{n, 0})
			n.producers = append(n.producers, up)
			continue
		}
		if n.q.Join != nil {
			if g.join != nil {
				return nil, fmt.Errorf("drive: queries %s and %s both join a second input (%s, %s); a graph runs at most one temporal join or interval join of two streams (its second input is the graph's)", g.join.q.Name, n.q.Name, g.join.secondName(), n.q.Join.Table.Name)
			}
			g.join = n
		}
		n.input = slices.Index(g.sources, n.q.Source)
		if n.input < 0 {
			if len(g.sources) == 2 {
				return nil, fmt.Errorf("drive: query %s reads %s, a third source (the graph reads %s and %s); a graph reads at most two inputs, the two sides of a join of two views", n.q.Name, n.q.Source.Name, g.sources[0].Name, g.sources[1].Name)
			}
			n.input = len(g.sources)
			g.sources = append(g.sources, n.q.Source)
		}
		g.roots = append(g.roots, n)
	}
	if g.join != nil && len(g.sources) == 2 {
		if j := g.join.q.IJoin; j != nil {
			other := g.sources[0]
			if other == j.Left {
				other = g.sources[1]
			}
			return nil, fmt.Errorf("drive: query %s joins the streams %s and %s, and the graph also reads %s as the source of another query; a graph reads at most two inputs, here the join's: run the other queries in a graph of their own", g.join.q.Name, j.Left.Name, j.Right.Name, other.Name)
		}
		return nil, fmt.Errorf("drive: query %s joins the versioned table %s, and the graph also reads a second source (%s); a graph reads at most two inputs: run the join's queries in a graph of their own", g.join.q.Name, g.join.q.Join.Table.Name, g.sources[1].Name)
	}
	if len(g.sources) == 2 && !g.joinsSources() {
		return nil, fmt.Errorf("drive: the graph's queries read two sources (%s, %s), but none joins a view of one with a view of the other; a graph reads two inputs only for such a join: run the queries of each source in a graph of their own", g.sources[0].Name, g.sources[1].Name)
	}
	for i, n := range g.nodes {
		n.index = i
	}
	for _, n := range g.roots {
		n.root = true
	}
	g.reporter = g.roots[0]
	if len(g.primary.q.Views()) == 0 {
		g.reporter = g.primary
	}
	if len(g.primary.readers) > 0 && cfg.Emit == nil {
		return nil, fmt.Errorf("drive: query %s is read by %s: a query that feeds others delivers its records by callback, not for Next", primary.Name, g.primary.readers[0].n.q.Name)
	}
	emitView := func(*changelog.Record) error { return nil }
	if viewEmit != nil {
		emitView = viewEmit
	}
	for _, n := range g.nodes {
		c := Config{Late: cfg.Late, Now: cfg.Now, Strict: cfg.Strict, CountsInCheckpoint: cfg.CountsInCheckpoint, Emit: emitView, Threads: cfg.Threads}
		if n == g.primary {
			c = cfg
		} else if n == g.join {
			// The join's table options are the host's (the primary's
			// config carries them for the graph).
			c.JoinBuffer, c.LateTable, c.TableDecoder = cfg.JoinBuffer, cfg.LateTable, cfg.TableDecoder
			c.IncrementalJoinState = cfg.IncrementalJoinState
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
		if host != nil && host.dec != nil && len(n.q.Views()) == 0 {
			c.Decoder, c.ExternalWatermark = host.dec, true
		}
		if len(n.readers) > 0 {
			n := n
			c.OnMark = func(wm int64) { g.markTo(n, wm) }
			c.OnRow = func(row []types.Value) error {
				it := g.item(n, itemRow, 0)
				for _, r := range n.readers {
					it.row = slices.Clone(row)
					g.deliver(r, it)
				}
				return nil
			}
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
			return nil, fmt.Errorf("query %s: %w", n.q.Name, err)
		}
		n.d = d
	}
	return g, nil
}

// secondName names the second input of a join root: a temporal join's
// table, an interval join's right stream.
func (n *gnode) secondName() string {
	if n.q.Join != nil {
		return n.q.Join.Table.Name
	}
	return n.q.IJoin.Right.Name
}

// ijRoot is the graph's root that is an interval join of two declared
// streams, or nil.
func (g *Graph) ijRoot() *gnode {
	if g.join != nil && g.join.q.IJoin != nil {
		return g.join
	}
	return nil
}

// SecondInput names the graph's second input: a temporal join's table,
// an interval join's right stream, or the second source of a join of two
// views over two sources; "" when it reads one input.
func (g *Graph) SecondInput() string {
	switch {
	case g.join != nil:
		return g.join.secondName()
	case len(g.sources) == 2:
		return g.sources[1].Name
	}
	return ""
}

// TwoStreams reports whether the graph's two inputs are streams that end
// one at a time (EndFirst, EndTable): the two sides of an interval join
// of two streams, or the two sources of a join of two views.
func (g *Graph) TwoStreams() bool { return g.ijRoot() != nil || g.join == nil && len(g.sources) == 2 }

// joinsSources reports whether a join of two views in the graph has one
// side over each of its two sources.
func (g *Graph) joinsSources() bool {
	var src func(q *plan.Query) *plan.Source
	src = func(q *plan.Query) *plan.Source {
		for vs := q.Views(); len(vs) > 0; vs = q.Views() {
			q = vs[0]
		}
		return q.Source
	}
	for _, n := range g.nodes {
		if j := n.q.IJoin; j != nil && j.Left.View != nil && j.Right.View != nil && src(j.Left.View) != src(j.Right.View) {
			return true
		}
	}
	return false
}

// Sources returns the declared sources the graph reads: the first is the
// Push input, the second (a join of views over two sources) the
// PushTable input.
func (g *Graph) Sources() []*plan.Source { return g.sources }

// rootsOf returns the roots reading input i.
func (g *Graph) rootsOf(i int) []*gnode {
	var out []*gnode
	for _, n := range g.roots {
		if n.input == i {
			out = append(out, n)
		}
	}
	return out
}

// reporterOf is the root whose counters stand for input i.
func (g *Graph) reporterOf(i int) *gnode {
	if i == 0 {
		return g.reporter
	}
	return g.rootsOf(i)[0]
}

// Primary returns the primary's driver.
func (g *Graph) Primary() *Driver { return g.primary.d }

// Queries returns the graph's queries, upstream before downstream.
func (g *Graph) Queries() []*plan.Query {
	qs := make([]*plan.Query, len(g.nodes))
	for i, n := range g.nodes {
		qs[i] = n.q
	}
	return qs
}

// Driver returns the driver of the named query of the graph, or nil.
func (g *Graph) Driver(name string) *Driver {
	for _, n := range g.nodes {
		if n.q.Name == name {
			return n.d
		}
	}
	return nil
}

// Enter and Leave bracket a host call, as Driver's do (on the primary).
func (g *Graph) Enter() error {
	if err := g.primary.d.Enter(); err != nil {
		return err
	}
	if g.fatal != nil {
		g.primary.d.busy.Store(false)
		return g.fatal
	}
	return nil
}

// Leave ends a call begun by Enter.
func (g *Graph) Leave(err *error) { g.primary.d.Leave(err) }

// Err returns the graph's fatal error, if it failed.
func (g *Graph) Err() error {
	if g.fatal != nil {
		return g.fatal
	}
	return g.primary.d.fatal
}

func (g *Graph) fail(err error) error {
	if g.fatal == nil {
		g.fatal = err
	}
	return err
}

// waiting reports whether any inbox holds an item its node may apply now
// (a join of two views waits for its other input's earlier items).
func (g *Graph) waiting() bool {
	for _, n := range g.nodes {
		if it, _ := n.next(g.joinFront(n)); it != nil {
			return true
		}
	}
	return false
}

// marked is called after every call on n's driver: it gives n's readers
// the watermark marker of n's watermark, when it moved.
func (g *Graph) marked(n *gnode) {
	if len(n.readers) == 0 {
		return
	}
	if n.d.Sharded() {
		// Its rows are in flight: the marker follows them in the merged
		// stream (Config.OnMark, markTo).
		n.d.MarkCall()
		return
	}
	g.markTo(n, n.d.Watermark())
}

// markTo gives n's readers the marker of n's watermark wm, when it moved.
func (g *Graph) markTo(n *gnode, wm int64) {
	wm = n.q.ViewWatermark(wm)
	it := g.item(n, itemWatermark, wm)
	for _, r := range n.readers {
		if wm > r.n.mark[r.side] {
			r.n.mark[r.side] = wm
			g.deliver(r, it)
		}
	}
}

// pass appends an item (close, close open windows) to n's readers.
func (g *Graph) pass(n *gnode, kind gitemKind) {
	it := g.item(n, kind, 0)
	for _, r := range n.readers {
		g.deliver(r, it)
	}
}

// pump applies the inboxes in topological order until they are empty or
// the primary refuses a row (backpressure; the rest waits).
func (g *Graph) pump() error {
	if g.fatal != nil {
		return g.fatal
	}
	for _, n := range g.nodes {
		front := g.joinFront(n)
		for {
			it, q := n.next(front)
			if it == nil {
				break
			}
			g.cur = it.step
			n.d.SetStep(it.step)
			var err error
			two := n.q.IJoin != nil // a join of two views: the item's input
			act := true             // a close acts once both inputs' came
			switch it.kind {
			case itemRow:
				if two && it.side == 1 {
					err = n.d.PushTableRow(it.row)
				} else {
					err = n.d.PushRow(it.row)
				}
				if errors.Is(err, ErrBackpressure) {
					return nil
				}
			case itemWatermark:
				if two && it.side == 1 {
					err = n.d.AdvanceTableWatermark(it.wm)
				} else {
					err = n.d.AdvanceWatermark(it.wm)
				}
			case itemCloseOpen:
				if two {
					n.closedOpen[it.side] = true
					// An input that has ended has no open window left.
					act = (n.closedOpen[0] || n.closed[0]) && (n.closedOpen[1] || n.closed[1])
					if act {
						n.closedOpen = [2]bool{}
					}
				}
				if act {
					err = n.d.CloseOpenWindows()
				}
			case itemClose:
				if two {
					n.closed[it.side] = true
					act = n.closed[0] && n.closed[1]
					if !act && it.side == 1 {
						err = n.d.EndTable()
					} else if !act {
						err = n.d.endSide(0)
					}
				}
				if act && err == nil {
					err = n.d.Close()
				}
			}
			kind := it.kind
			q.pop()
			if err != nil && !g.skipped(n, err) {
				return g.fail(fmt.Errorf("query %s: %w", n.q.Name, err))
			}
			g.marked(n)
			if kind >= itemCloseOpen && act {
				g.pass(n, kind)
			}
		}
	}
	return nil
}

// skipped reports whether err is an error of one row or record that the
// node counted and went past (a SELECT that failed for one group).
func (g *Graph) skipped(n *gnode, err error) bool {
	var ee *EventError
	if errors.As(err, &ee) || Skipped(err) {
		return n.d.fatal == nil
	}
	return false
}

// admit refuses a host push while anything waits before it.
func (g *Graph) admit() error {
	if err := g.pump(); err != nil {
		return err
	}
	if g.waiting() {
		return ErrBackpressure
	}
	for _, n := range g.roots {
		if g.ended[n.input] {
			continue // its input ended: nothing more comes to it
		}
		if err := n.d.admit(); err != nil {
			return err
		}
	}
	return nil
}

// each runs f on every root (the host's input goes to all of them) and
// returns the reporter's error; a fatal error stops it.
func (g *Graph) each(f func(d *Driver) error) error { return g.eachOf(0, f) }

// eachOf is each for the roots of input i.
func (g *Graph) eachOf(i int, f func(d *Driver) error) error {
	var res error
	rep := g.reporterOf(i)
	g.begin(true)
	for _, n := range g.roots {
		if n.input != i {
			continue
		}
		n.d.SetStep(g.step)
		err := f(n.d)
		g.marked(n)
		if err != nil && n.d.fatal != nil {
			return g.fail(err)
		}
		if n == rep {
			res = err
		}
	}
	g.rootCall = false
	if err := g.pump(); err != nil {
		return err
	}
	return res
}

// Push decodes one input record and applies it to every root.
func (g *Graph) Push(raw []byte) error {
	if err := g.admit(); err != nil {
		return err
	}
	return g.each(func(d *Driver) error { return d.Push(raw) })
}

// PushKeyed decodes one input record and applies it to the one root
// with its group key as a router computed it (Driver.PushKeyed).
func (g *Graph) PushKeyed(raw, key []byte) error {
	if len(g.roots) != 1 {
		return fmt.Errorf("drive: a keyed push into a graph of %d roots", len(g.roots))
	}
	if err := g.admit(); err != nil {
		return err
	}
	return g.each(func(d *Driver) error { return d.PushKeyed(raw, key) })
}

// Root returns the driver of the first root (the node reading the
// declared source).
func (g *Graph) Root() *Driver { return g.roots[0].d }

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
func (g *Graph) MetaKey() []byte { return graphKey(nil, g.primary.q.Name, []byte(exec.MetaKey)) }

// PushRow applies one typed row of the declared source to every root.
func (g *Graph) PushRow(row []types.Value) error {
	if err := g.admit(); err != nil {
		return err
	}
	if g.roots[0].joined {
		return g.each(func(d *Driver) error { return d.ApplyRow(row) })
	}
	return g.each(func(d *Driver) error { return d.PushRow(row) })
}

// ReportMalformed counts an input record the host could not hand over.
func (g *Graph) ReportMalformed() {
	for _, n := range g.rootsOf(0) {
		n.d.ReportMalformed()
	}
}

// Tick performs the early emissions due (every node's).
func (g *Graph) Tick() error { return g.all((*Driver).Tick) }

// EmitEarly publishes every node's changed groups now.
func (g *Graph) EmitEarly() error { return g.all((*Driver).EmitEarly) }

func (g *Graph) all(f func(*Driver) error) error {
	// What is in flight first, as one thread would have delivered it.
	if err := g.Flush(); err != nil {
		return err
	}
	g.begin(false)
	g.inAll = true
	defer func() { g.inAll = false }()
	for _, n := range g.nodes {
		if n.backlog() > 0 {
			continue // its turn comes after its inbox
		}
		n.d.SetStep(g.step)
		if err := f(n.d); err != nil {
			return g.failIfFatal(n, err)
		}
		g.marked(n)
	}
	g.inAll = false
	return g.pump()
}

// failIfFatal makes err the graph's fatal error when it is n's (a closed
// driver's ErrClosed, an event's error, are not).
func (g *Graph) failIfFatal(n *gnode, err error) error {
	if n.d.fatal != nil {
		return g.fail(err)
	}
	return err
}

// AdvanceWatermark moves the input's watermark (the roots'); the readers
// follow by their markers.
func (g *Graph) AdvanceWatermark(wm int64) error {
	return g.controlOf(0, func(d *Driver) error { return d.AdvanceWatermark(wm) }, 0)
}

// CloseOpenWindows finalizes the open windows of the roots whose input
// has not ended, then, after those rows, every reader's (a join of two
// views whose other input ended acts on this one's alone).
func (g *Graph) CloseOpenWindows() error {
	for i := range g.sources {
		if g.ended[i] {
			continue
		}
		if err := g.controlOf(i, (*Driver).CloseOpenWindows, itemCloseOpen); err != nil {
			return err
		}
	}
	if n := g.ijRoot(); n != nil && g.ended[n.input] && !g.ended[1] && !n.d.closed {
		// Its left stream ended (EndFirst), its right goes on.
		return g.controlNode(n, (*Driver).CloseOpenWindows, itemCloseOpen)
	}
	return nil
}

// Close ends the input (both inputs, when the graph reads two): the roots
// close, then each reader after its view's last rows.
func (g *Graph) Close() error {
	ij := g.ijRoot()
	if g.ended[0] && (len(g.sources) < 2 || g.ended[1]) && (ij == nil || ij.d.closed) {
		return nil // closed already: a second Close does nothing
	}
	for i := range g.sources {
		if g.ended[i] {
			continue
		}
		g.ended[i] = true
		if err := g.controlOf(i, (*Driver).Close, itemClose); err != nil {
			return err
		}
	}
	if ij != nil && !ij.d.closed {
		// Its left stream ended before (EndFirst): both end now.
		g.ended[1] = true
		return g.controlNode(ij, (*Driver).Close, itemClose)
	}
	return nil
}

// controlNode is control on root n alone.
func (g *Graph) controlNode(n *gnode, f func(*Driver) error, pass gitemKind) error {
	if g.fatal != nil {
		return g.fatal
	}
	g.begin(true)
	n.d.SetStep(g.step)
	if err := f(n.d); err != nil && !g.skipped(n, err) {
		return g.failIfFatal(n, err)
	}
	g.marked(n)
	if pass != 0 {
		g.pass(n, pass)
	}
	g.rootCall = false
	return g.pump()
}

func (g *Graph) control(f func(*Driver) error, pass gitemKind) error { return g.controlOf(-1, f, pass) }

// controlOf is control on the roots of input i (-1: every root).
func (g *Graph) controlOf(i int, f func(*Driver) error, pass gitemKind) error {
	if g.fatal != nil {
		return g.fatal
	}
	g.begin(true)
	for _, n := range g.roots {
		if i >= 0 && n.input != i {
			continue
		}
		n.d.SetStep(g.step)
		if err := f(n.d); err != nil && !g.skipped(n, err) {
			return g.failIfFatal(n, err)
		}
		g.marked(n)
		if pass != 0 {
			g.pass(n, pass)
		}
	}
	g.rootCall = false
	return g.pump()
}

// Watermark is the primary's watermark.
func (g *Graph) Watermark() int64 { return g.primary.d.Watermark() }

// Next pops the primary's next buffered record.
func (g *Graph) Next() (changelog.Record, bool) { return g.primary.d.Next() }

// Refill renders queued records of the primary and moves waiting rows on
// until a record is buffered or nothing waits.
func (g *Graph) Refill() (bool, error) {
	for {
		ok, err := g.primary.d.Refill()
		if ok || err != nil || !g.waiting() {
			return ok, err
		}
		before := g.backlog()
		if err := g.pump(); err != nil {
			return false, err
		}
		if g.backlog() == before && g.primary.d.Pending() == 0 && !g.primary.d.Queued() {
			return false, nil // no progress (cannot happen with an empty buffer; never spin)
		}
	}
}

// backlog counts the items waiting in the inboxes.
func (g *Graph) backlog() int {
	k := 0
	for _, n := range g.nodes {
		k += n.backlog()
	}
	return k
}

// Threads is the most shards a node of the graph runs on (1: every node
// runs on the pushing goroutine). Each node on several threads merges its
// records, and its rows to its readers, back into one thread's order.
func (g *Graph) Threads() int {
	k := 1
	for _, n := range g.nodes {
		k = max(k, n.d.Threads())
	}
	return k
}

// Flush delivers every record of the input pushed so far: each node's rows
// in flight, upstream first, each reader taking its view's rows before it
// flushes its own.
func (g *Graph) Flush() error {
	for _, n := range g.nodes {
		if err := g.pump(); err != nil {
			return err
		}
		if n.backlog() > 0 {
			return nil // backpressure: the rest waits for Next
		}
		if err := n.d.Flush(); err != nil {
			return g.failIfFatal(n, err)
		}
		g.marked(n)
	}
	return g.pump()
}

// Pending is the number of the primary's buffered records.
func (g *Graph) Pending() int { return g.primary.d.Pending() }

// Queued reports whether work waits: the primary's queue or an inbox.
func (g *Graph) Queued() bool { return g.primary.d.Queued() || g.waiting() }

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

// graphKey prefixes a node's checkpoint key with its query name.
func graphKey(dst []byte, name string, key []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	return append(dst, key...)
}

// Checkpoint writes every node's state entries under its query name; each
// node's meta entry carries position, the primary's comes last. It
// refuses (ErrBackpressure, nothing written) while an inbox or the
// primary's queue holds work.
func (g *Graph) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := g.Flush(); err != nil {
		return err
	}
	if g.primary.d.buffered {
		if err := g.primary.d.drain(); err != nil {
			return err
		}
	}
	if g.waiting() || g.primary.d.Queued() {
		return fmt.Errorf("%w: a checkpoint waits until the rows between the views and the records of finalized windows are taken", ErrBackpressure)
	}
	var kb []byte
	order := append(slices.DeleteFunc(slices.Clone(g.nodes), func(n *gnode) bool { return n == g.primary }), g.primary)
	for _, n := range order {
		name := n.q.Name
		err := n.d.Checkpoint(full, position, func(key, val []byte) error {
			kb = graphKey(kb[:0], name, key)
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

// FinishRestore completes every node's restore.
func (g *Graph) FinishRestore() {
	for _, n := range g.nodes {
		n.d.FinishRestore()
		n.mark = [2]int64{math.MinInt64, math.MinInt64}
	}
	if n := g.ijRoot(); n != nil {
		// An input of the join that had ended before the checkpoint
		// (EndFirst, EndTable) is over in the restored graph too.
		g.ended[n.input] = n.d.inputEnded(0)
		g.ended[1] = n.d.inputEnded(1)
	}
}

// ErrGraphTable is returned by a graph's second-input calls when the graph
// has none: its second input is the versioned table of a view with a
// temporal join, or the other source of a join of two views over two
// different sources.
var ErrGraphTable = errors.New("a query over views has no second input: its views read one source and join no versioned table (a second input is the table of a view's temporal join, or the other source of a join of two views over two sources)")

// second checks that the graph has a second input that has not ended.
func (g *Graph) second() error {
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
func (g *Graph) PushTable(raw []byte) error {
	if err := g.second(); err != nil {
		return err
	}
	if err := g.admit(); err != nil {
		return err
	}
	if g.join != nil {
		return g.onJoin(func(d *Driver) error { return d.PushTable(raw) })
	}
	return g.eachOf(1, func(d *Driver) error { return d.Push(raw) })
}

// onJoin runs f, a call of the table input, on the join's root, then
// moves what it released on.
func (g *Graph) onJoin(f func(d *Driver) error) error {
	n := g.join
	g.begin(true)
	n.d.SetStep(g.step)
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
func (g *Graph) PushTableBehind(raw []byte, floor int64) error {
	if g.join == nil {
		return g.PushTable(raw)
	}
	if err := g.second(); err != nil {
		return err
	}
	if err := g.admit(); err != nil {
		return err
	}
	return g.onJoin(func(d *Driver) error { return d.PushTableBehind(raw, floor) })
}

// PushTableRow applies one typed row of the second source.
func (g *Graph) PushTableRow(row []types.Value) error {
	if err := g.second(); err != nil {
		return err
	}
	if err := g.admit(); err != nil {
		return err
	}
	if g.join != nil {
		return g.onJoin(func(d *Driver) error { return d.PushTableRow(row) })
	}
	return g.eachOf(1, func(d *Driver) error { return d.PushRow(row) })
}

// AdvanceTableWatermark moves the second source's watermark.
func (g *Graph) AdvanceTableWatermark(wm int64) error {
	if err := g.second(); err != nil {
		return err
	}
	if g.join != nil {
		if err := g.pump(); err != nil {
			return err
		}
		return g.onJoin(func(d *Driver) error { return d.AdvanceTableWatermark(wm) })
	}
	return g.controlOf(1, func(d *Driver) error { return d.AdvanceWatermark(wm) }, 0)
}

// EndTable ends the second source: its roots close, then their readers
// after the views' last rows; the first source goes on.
func (g *Graph) EndTable() error {
	if err := g.second(); err != nil {
		return err
	}
	g.ended[1] = true
	if g.join != nil {
		if err := g.pump(); err != nil {
			return err
		}
		return g.onJoin((*Driver).EndTable)
	}
	return g.controlOf(1, (*Driver).Close, itemClose)
}

// EndFirst ends the first source of a graph of two alone (its input
// ended while the second goes on): its roots close, then their readers
// after the views' last rows, so a join of two views holds no row of the
// other side for it any more. Ending twice is a no-op; Close ends both.
func (g *Graph) EndFirst() error {
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
				f, pass = (*Driver).EndFirst, 0
			}
			if err := g.controlNode(n, f, pass); err != nil {
				return err
			}
		}
		return nil
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
		return g.join.d.TableCounts()
	}
	if len(g.sources) < 2 {
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
		return g.join.d.InputWatermarks()
	}
	if len(g.sources) < 2 {
		return math.MinInt64, math.MinInt64
	}
	return g.rootsOf(0)[0].d.Watermark(), g.rootsOf(1)[0].d.Watermark()
}

// IntervalStats are the primary's interval join's, or else the interval
// join of two streams at the graph's root (zero without one).
func (g *Graph) IntervalStats() IntervalStats {
	if n := g.ijRoot(); n != nil && !g.primary.d.HasIntervalJoin() {
		return n.d.IntervalStats()
	}
	return g.primary.d.IntervalStats()
}
