package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/dataflow"
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
//
// To the host a graph is a driver: a call returns what the same call on
// the driver of one query returns, whichever node did the work; a record
// skipped for an evaluation error (a HAVING that fails as a window
// finalizes, in a view or its reader) is returned by the call that
// rendered it, a push's as its event's *EventError, except Refill's and a
// checkpoint's, as a driver's; on several threads a fed event's reaches
// OnEventError by the host's step (graph_outcome.go). A graph of one node
// is its driver's calls (TestQueryGraphIsItsDriver).
type Graph struct {
	plan    *dataflow.Plan // the physical plan of the graph's queries
	byNode  map[int]*gnode // the graph's node of each aggregate node of plan
	nodes   []*gnode       // upstream before downstream
	primary *gnode
	roots   []*gnode // the nodes reading a declared source
	// sources are the graph's inputs: the declared sources the roots
	// read, one or two for a join of two views over different sources
	// (the left view's first); in a segment graph, then the views whose
	// rows the host brings, after a join root's second input (numberFed).
	// The first is the host's Push input, the second its PushTable input.
	sources []*plan.Source
	ended   []bool // the inputs ended (EndTable, Close); at least two
	// fed are the readers of each input that is a view's rows the host
	// brings (NewSegmentGraph); fedMark the last marker of each.
	fed     [][]gedge
	fedMark []int64
	// fedViews are the views the host brings, while the graph links
	// (numberFed).
	fedViews []*plan.Query
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
	stalled  bool // the last pump stopped at an item the primary refused
	// lone: a graph of one node, which has no inbox; flat: a graph of one
	// query, whose checkpoint entries are its driver's as they are
	// (NewHostGraph, NewQueryGraph).
	lone, flat bool
	// ordered: a node joins two views, whose inputs it takes in the order
	// of the steps (inbox.go); without one no step is recorded, so a
	// driver on several threads pays nothing per event for them.
	ordered bool
	// stepped: the nodes carry the host's step through their ops, and
	// the graph holds the outcomes of the fed events (graph_outcome.go).
	stepped bool
	outs    outcomes
	// evalErr is the first evaluation error of a record that a node
	// skipped during the host's call (a HAVING that fails when a window
	// finalizes), which the call returns as a driver's would (settle).
	evalErr error

	// The steps of the host's calls (inbox.go): step is the last begun,
	// cur the one whose items are being made; seq numbers the items.
	step, cur, seq uint64
	rootCall       bool          // the roots are being called by the host (not the inboxes applied)
	inAll          bool          // every node is being called (Tick, EmitEarly)
	slab           []types.Value // what is left of the cells copyRow carves views' rows from
}

type gnode struct {
	q         *plan.Query
	node      *dataflow.Node // q's aggregate node in the plan
	d         *Driver
	readers   []gedge  // nodes of the graph reading this one
	producers []*gnode // the nodes it reads
	in        [2]inbox // what waits to enter d, per input (inbox.go)
	two       bool     // a join of two views: its inputs interleave in one thread's order
	root      bool     // it reads a declared source
	index     int      // in Graph.nodes
	mark      [2]int64 // the last watermark marker put into in, per input
	input     int      // a root: the index of its source in Graph.sources
	// joined: a host graph's root applying the joined rows of its join,
	// which a host made (HostInput.Joined).
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

// Plan returns the physical plan of the graph's queries: each node of the
// graph is one of its aggregate nodes (with the join or decode node that
// feeds it), and each reader edge one of its edges.
func (g *Graph) Plan() *dataflow.Plan { return g.plan }

// Sources returns the graph's inputs: the declared sources it reads, the
// first the Push input, the second (a join of views over two sources)
// the PushTable input; in a segment graph, then the views whose rows the
// host brings (after a join root's second input, when it has one).
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
	return g.firstRootOf(i)
}

// firstRootOf is the first root of input i, without the slice rootsOf
// builds (the host asks for it for every record of a join of two inputs).
func (g *Graph) firstRootOf(i int) *gnode {
	for _, n := range g.roots {
		if n.input == i {
			return n
		}
	}
	return nil
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

// admit refuses a host push while anything waits before it (table: a
// push of the second input, which the join root admits as its table's:
// a temporal join's full buffer of events waits for table rows).
func (g *Graph) admit(table bool) error {
	if g.lone {
		return g.fatal // its driver's push admits itself: there is no inbox
	}
	if err := g.pump(); err != nil {
		return err
	}
	// A pump that ran to the end left nothing its nodes may apply (each
	// node's inbox fills only from the nodes before it, which it visited
	// first): only one stopped by backpressure needs the scan.
	if g.stalled && g.waiting() {
		return ErrBackpressure
	}
	for _, n := range g.roots {
		if g.ended[n.input] {
			continue // its input ended: nothing more comes to it
		}
		var err error
		if table && n == g.join {
			err = n.d.admit(1)
		} else {
			err = n.d.admit(0)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// each runs f on every root (the host's input goes to all of them) and
// returns the reporter's error; a fatal error stops it.
func (g *Graph) each(f func(d *Driver) error) error { return g.eachOf(0, f) }

// lonely is the outcome of a push on the driver of a graph of one node
// (lone), which is the graph's own: there is no inbox to admit, no step
// to order, and no other node whose skipped record the call could return
// (settleEvent), so the per-event path skips those layers (eachOf's lone
// case). A driver that failed (or a graph failed before) fails the graph.
func (g *Graph) lonely(err error) error {
	if err != nil && g.primary.d.fatal != nil {
		return g.fail(err)
	}
	return err
}

// eachOf is each for the roots of input i.
func (g *Graph) eachOf(i int, f func(d *Driver) error) error {
	if g.isFed(i) {
		return fmt.Errorf("drive: input %s of the graph of %s takes the view's rows", g.sources[i].Name, g.primary.q.Name)
	}
	if g.lone {
		// One node: no step orders its rows, no reader takes them.
		err := f(g.primary.d)
		if err != nil && g.primary.d.fatal != nil {
			return g.fail(err)
		}
		return err
	}
	var res error
	rep := g.reporterOf(i)
	g.begin(true)
	for _, n := range g.roots {
		if n.input != i {
			continue
		}
		g.setStep(n, g.step)
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
func (g *Graph) Push(raw []byte) (err error) {
	if g.lone && g.fatal == nil {
		return g.lonely(g.primary.d.Push(raw))
	}
	defer g.settleEvent(&err, 0, nil, false)
	if err := g.admit(false); err != nil {
		return err
	}
	if g.stepped {
		g.called(g.step+1, 0, nil, false)
	}
	return g.each(func(d *Driver) error { return d.Push(raw) })
}

// Feed hands one input record to every root, as Push does, tagged by the
// host: a root on several threads decodes it in a block on its shards
// (Driver.Feed). The reporter's outcomes reach Config.OnEventError with
// the tag, in input order.
func (g *Graph) Feed(raw []byte, tag int64) (err error) {
	if g.lone && g.fatal == nil {
		return g.lonely(g.primary.d.Feed(raw, tag))
	}
	defer g.settleEvent(&err, tag, raw, true)
	if err := g.admit(false); err != nil {
		return err
	}
	if g.stepped {
		g.called(g.step+1, tag, raw, true) // each begins the step
	}
	return g.each(func(d *Driver) error { return d.Feed(raw, tag) })
}

// ReportMalformedAt counts an input record the host could not hand over,
// and reports it with its tag (Driver.ReportMalformedAt).
func (g *Graph) ReportMalformedAt(tag int64, err error) error {
	if g.stepped {
		g.begin(false)
		g.called(g.step, tag, nil, true)
	}
	for _, n := range g.rootsOf(0) {
		if n == g.reporter {
			if rerr := n.d.ReportMalformedAt(tag, err); rerr != nil {
				return rerr
			}
			continue
		}
		n.d.ReportMalformed()
	}
	return nil
}

// PushKeyed decodes one input record and applies it to the one root
// with its group key as a router computed it (Driver.PushKeyed).
func (g *Graph) PushKeyed(raw, key []byte) (err error) {
	defer g.settleEvent(&err, 0, nil, false)
	if len(g.roots) != 1 {
		return fmt.Errorf("drive: a keyed push into a graph of %d roots", len(g.roots))
	}
	if err := g.admit(false); err != nil {
		return err
	}
	if g.stepped {
		g.called(g.step+1, 0, nil, false)
	}
	return g.each(func(d *Driver) error { return d.PushKeyed(raw, key) })
}

// Root returns the driver of the first root (the node reading the
// declared source); of a segment graph without one, the first node
// reading the rows of its first input.
func (g *Graph) Root() *Driver {
	if len(g.roots) == 0 {
		return g.fed[0][0].n.d
	}
	return g.roots[0].d
}

// PushRow applies one typed row of the declared source to every root.
func (g *Graph) PushRow(row []types.Value) (err error) {
	defer g.settleEvent(&err, 0, nil, false)
	if g.isFed(0) {
		return g.feedRow(0, row)
	}
	if err := g.admit(false); err != nil {
		return err
	}
	if g.roots[0].joined {
		return g.each(func(d *Driver) error { return d.ApplyRow(row) })
	}
	if g.stepped {
		g.called(g.step+1, 0, nil, false)
	}
	return g.each(func(d *Driver) error { return d.PushRow(row) })
}

// ReportMalformed counts an input record the host could not hand over.
func (g *Graph) ReportMalformed() {
	if g.stepped {
		g.begin(false)
		g.called(g.step, 0, nil, false)
	}
	for _, n := range g.rootsOf(0) {
		n.d.ReportMalformed()
	}
}

// Tick performs the early emissions due (every node's).
func (g *Graph) Tick() error { return g.all((*Driver).Tick) }

// EmitEarly publishes every node's changed groups now.
func (g *Graph) EmitEarly() error { return g.all((*Driver).EmitEarly) }

func (g *Graph) all(f func(*Driver) error) (err error) {
	defer g.settle(&err)
	if !g.lone {
		// What is in flight first, as one thread would have delivered
		// it to the readers (one node has none: its call is its
		// driver's).
		if err := g.flush(); err != nil {
			return err
		}
	}
	g.begin(false)
	g.inAll = true
	defer func() { g.inAll = false }()
	for _, n := range g.nodes {
		if n.backlog() > 0 {
			continue // its turn comes after its inbox
		}
		g.setStep(n, g.step)
		if err := f(n.d); err != nil && !g.skip(n, err) {
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

// Watermark is the primary's watermark.
func (g *Graph) Watermark() int64 { return g.primary.d.Watermark() }

// Next pops the primary's next buffered record.
func (g *Graph) Next() (changelog.Record, bool) { return g.primary.d.Next() }

// Refill renders queued records of the primary and moves waiting rows on
// until a record is buffered or nothing waits.
func (g *Graph) Refill() (bool, error) {
	// What it renders is Next's, which returns no error: a skipped
	// record is counted, as a driver's Refill counts it.
	defer func() { g.evalErr = nil }()
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
func (g *Graph) Flush() (err error) {
	defer g.settle(&err)
	return g.flush()
}

func (g *Graph) flush() error {
	for _, n := range g.nodes {
		if err := g.pump(); err != nil {
			return err
		}
		if n.backlog() > 0 {
			return nil // backpressure: the rest waits for Next
		}
		if err := n.d.Flush(); err != nil && !g.skip(n, err) {
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
