package drive

import (
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
