package drive

import (
	"errors"
	"fmt"
	"math"

	"github.com/ubiksql/ubik/internal/types"
)

// The order of the rows between the nodes of a graph (the in-memory
// exchange). On one thread, a node's inbox is filled in the order of the
// host's calls: each call is a step; in a step the roots the call reaches
// deliver first (in the graph's order), then every other node as the
// inboxes are applied in topological order. A node on several threads
// delivers its rows batches later, so rows of one step can reach a
// reader after rows of later steps from another node. A reader with one
// input does not mind (its input's order is its producer's own); a join of
// two views matches rows in the order its two inputs interleave, so each
// item carries the step and place one thread would have given it, and the
// join takes the items of its two inputs in that order, and only those of
// steps no producer can still deliver to (front).

// gitem is one item of an inbox: a view's row, a watermark marker, a
// close.
type gitem struct {
	kind  gitemKind
	side  uint8 // the input of a join of two views it is for
	phase uint8 // 0: delivered by a root's call from the host; 1: while inboxes were applied
	// owned: row is the graph's own copy of a view's row: a join may
	// hold its cells without copying them.
	owned bool
	row   []types.Value
	wm    int64
	step  uint64 // the host call (step) one thread would have delivered it in
	from  int32  // the producer's index in Graph.nodes
	seq   uint64 // arrival order: a producer's items keep theirs
}

// before reports whether a comes before b in one thread's order.
func (a *gitem) before(b *gitem) bool {
	if a.step != b.step {
		return a.step < b.step
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	if a.from != b.from {
		return a.from < b.from
	}
	return a.seq < b.seq
}

// inbox is a FIFO of items.
type inbox struct {
	items []gitem
	head  int
}

func (q *inbox) len() int      { return len(q.items) - q.head }
func (q *inbox) peek() *gitem  { return &q.items[q.head] }
func (q *inbox) push(it gitem) { q.items = append(q.items, it) }

func (q *inbox) pop() {
	q.items[q.head] = gitem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// backlog is the number of items waiting in n's inboxes.
func (n *gnode) backlog() int { return n.in[0].len() + n.in[1].len() }

// next returns the item n applies next (and the inbox holding it), nil
// when none may be applied now. front bounds the steps a join of two views
// may take (math.MaxUint64: any).
func (n *gnode) next(front uint64) (*gitem, *inbox) {
	a, b := &n.in[0], &n.in[1]
	if !n.two {
		if a.len() == 0 {
			return nil, nil
		}
		return a.peek(), a
	}
	q := a
	switch {
	case a.len() == 0 && b.len() == 0:
		return nil, nil
	case a.len() == 0 || b.len() > 0 && b.peek().before(a.peek()):
		q = b
	}
	if it := q.peek(); it.step < front {
		return it, q
	}
	return nil, nil
}

// front is the first step whose items n may still deliver to its readers
// (math.MaxUint64: every item of every step so far is delivered): the
// earliest step of its rows in flight, of the items in its inboxes, and,
// through its own input, of its producers.
func (g *Graph) front(n *gnode) uint64 {
	f := n.d.PendingStep()
	for _, q := range n.in[:] {
		for i := q.head; i < len(q.items); i++ {
			f = min(f, q.items[i].step)
		}
	}
	for _, p := range n.producers {
		f = min(f, g.front(p))
	}
	return f
}

// joinFront is the front of a join of two views: the least of its
// producers' (a node with one input takes its items in order).
func (g *Graph) joinFront(n *gnode) uint64 {
	if !n.two {
		return math.MaxUint64
	}
	f := uint64(math.MaxUint64)
	for _, p := range n.producers {
		f = min(f, g.front(p))
	}
	return f
}

// item returns an item of n's output, with the step and place one thread
// would have given it.
func (g *Graph) item(n *gnode, kind gitemKind, wm int64) gitem {
	step, phase := g.cur, uint8(1)
	if n.d.Sharded() {
		step = n.d.OutStep()
		if n.root && !(g.inAll && step == g.step) {
			phase = 0
		}
	} else if n.root && g.rootCall {
		phase = 0
	}
	return gitem{kind: kind, wm: wm, step: step, phase: phase, from: int32(n.index)}
}

// deliver appends it to reader r's inbox.
func (g *Graph) deliver(r gedge, it gitem) {
	it.side, it.seq = uint8(r.side), g.seq
	g.seq++
	r.n.in[r.side].push(it)
}

// begin starts a step: a host call reaching the roots (rootCall) or every
// node (Tick, EmitEarly).
func (g *Graph) begin(rootCall bool) {
	g.step++
	g.cur, g.rootCall = g.step, rootCall
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
	if g.fatal != nil || g.lone {
		return g.fatal
	}
	g.stalled = true
	for _, n := range g.nodes {
		if n.backlog() == 0 {
			continue // nothing waits (no item reaches n while it applies its own)
		}
		front := g.joinFront(n)
		for {
			it, q := n.next(front)
			if it == nil {
				break
			}
			g.cur = it.step
			g.setStep(n, it.step)
			act, err := n.apply(it)
			if errors.Is(err, ErrBackpressure) {
				return nil // the item waits for Next (stalled)
			}
			kind := it.kind
			q.pop()
			if err != nil && !g.skip(n, err) {
				return g.fail(fmt.Errorf("query %s: %w", n.q.Name, err))
			}
			g.marked(n)
			if kind >= itemCloseOpen && act {
				g.pass(n, kind)
			}
		}
	}
	g.stalled = false
	return nil
}

// apply hands one item to n's driver. act reports whether a close acted:
// a join of two views closes once both inputs' closes came.
func (n *gnode) apply(it *gitem) (act bool, err error) {
	two := n.q.IJoin != nil // a join of two views: the item's input
	switch it.kind {
	case itemRow:
		if two {
			return true, n.d.pushViewRow(int(it.side), it.row, it.owned)
		}
		return true, n.d.PushRow(it.row)
	case itemWatermark:
		if two && it.side == 1 {
			return true, n.d.AdvanceInput(1, it.wm)
		}
		return true, n.d.AdvanceWatermark(it.wm)
	case itemCloseOpen:
		if two {
			n.closedOpen[it.side] = true
			// An input that has ended has no open window left.
			if !((n.closedOpen[0] || n.closed[0]) && (n.closedOpen[1] || n.closed[1])) {
				return false, nil
			}
			n.closedOpen = [2]bool{}
		}
		return true, n.d.CloseOpenWindows()
	}
	// itemClose
	if two {
		n.closed[it.side] = true
		if !(n.closed[0] && n.closed[1]) {
			if it.side == 1 {
				return false, n.d.EndInput(1)
			}
			return false, n.d.first.end(0) // delivering nothing yet
		}
	}
	return true, n.d.Close()
}

// skip reports whether err is an error of one row or record that the
// node counted and went past (a SELECT that failed for one group); the
// first of a host call is the call's (settle).
func (g *Graph) skip(n *gnode, err error) bool {
	var ee *EventError
	if !errors.As(err, &ee) && !Skipped(err) || n.d.fatal != nil {
		return false
	}
	if g.evalErr == nil && ee == nil {
		// A record's (an event's error is the host's event's alone:
		// a view's row that fails at its reader is counted there).
		g.evalErr = err
	}
	return true
}

// settle ends a host call: deferred, it returns the first record the call
// skipped for an evaluation error when nothing else failed, so a call on
// a graph returns what the same call on a driver returns, whichever node
// rendered the record (a view's window, applied as its rows move on).
func (g *Graph) settle(err *error) {
	if g.stepped {
		g.release(g.closed())
	}
	if *err == nil {
		*err = g.evalErr
	}
	g.evalErr = nil
}

// settleEvent is settle for a push: a record it skipped is its event's
// error, as a driver's push returns it (an *EventError of the reporter's
// event); fed (Feed), it goes where a driver's Feed sends it
// (its feeder's outcome), which a driver on several threads, whose events are
// decoded in blocks, cannot tell apart: there it is counted only.
func (g *Graph) settleEvent(err *error, tag int64, raw []byte, fed bool) {
	if g.stepped {
		g.release(false)
	}
	e := g.evalErr
	g.evalErr = nil
	if *err != nil || e == nil {
		return
	}
	d := g.reporter.d
	ee := &EventError{Seq: d.n.Events, Err: e}
	if !fed {
		*err = ee
		return
	}
	*err = d.feeder.outcome(ee, tag, raw)
}

// setStep gives n's driver the step of the calls that follow, when a join
// of two views orders its inputs by them (ordered).
func (g *Graph) setStep(n *gnode, step uint64) {
	if g.ordered || g.stepped {
		n.d.SetStep(step)
	}
}
