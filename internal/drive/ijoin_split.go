package drive

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"runtime"
	"runtime/pprof"
	"sync"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// An interval join on several threads (ijSplit): the in-memory exchange
// in front of the join routes each admitted row by its join key's bytes
// to one of K instances (exec.IntervalJoin, split by key: ijoin_split.go
// in exec), each on its own goroutine holding the rows of its keys; the
// watermarks and ends go to every instance at their place among the
// rows. The reader keeps the coordinator (exec.NewIntervalCoordinator):
// lateness, the key, the arrival numbers, the bound on held rows and the
// counters, in input order, exactly as one join. Every item gets a
// number (op); an instance's joined rows carry the op of the row that
// made them, and the reader merges the instances' by op into the
// aggregate: one join's order, since a row's matches all come from the
// instance of its key. The aggregate's watermark moves (the joined
// stream's, when an input's watermark moved it) are placed at their op
// among the joined rows.
//
// Bounds: a batch holds at most splitItems items; at most two batches are
// in flight (one being merged, one being joined): the reader's next
// dispatch waits for the older one's instances.
//
// The checkpoint entry is one join's (exec.IntervalJoin.AppendSplitState)
// and a restore splits the held rows by key (SplitHeld): a checkpoint
// taken on any number of threads restores on any other.

const splitItems = 1024

type ijKind uint8

const (
	ijRow ijKind = iota
	ijAdvance
	ijEnd
)

// ijItem is one item for an instance: a row (its key in the part's keys,
// seq its arrival number, 0 when not held), a watermark, an end.
type ijItem struct {
	kind       ijKind
	side       uint8
	key0, key1 int32
	op         uint64
	seq        uint64
	wm         int64
	row        []types.Value
}

// ijPart is an instance's share of a batch: its items, and the joined
// rows it made, outs giving each row's op and how many it made.
type ijPart struct {
	items  []ijItem
	keys   []byte
	outs   []ijOut
	joined [][]types.Value
	err    error // a panic of the instance
}

type ijOut struct {
	op uint64
	n  int
}

// ijBatch is one batch of the exchange; marks are the aggregate's
// watermark moves, each after the joined rows of the ops before its own.
type ijBatch struct {
	parts []ijPart
	marks []ijMark
	n     int
}

type ijMark struct {
	op uint64
	wm int64
}

// ijWorker is an instance on its goroutine.
type ijWorker struct {
	j    *exec.IntervalJoin
	idx  int
	in   chan *ijBatch
	done chan struct{}
	// failed: the instance panicked; it takes nothing more.
	failed bool
}

func (w *ijWorker) run() {
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("ubik", "join")))
	for b := range w.in {
		pt := &b.parts[w.idx]
		if !w.failed {
			pt.err = w.join(pt)
			w.failed = pt.err != nil
		}
		w.done <- struct{}{}
	}
}

// join applies the part's items; a panic is the driver's ErrInternal.
func (w *ijWorker) join(pt *ijPart) (err error) {
	defer Recover(&err)
	for i := range pt.items {
		it := &pt.items[i]
		switch it.kind {
		case ijRow:
			w.j.PushAt(int(it.side), it.row, pt.keys[it.key0:it.key1], it.seq)
			n := 0
			for w.j.Pending() > 0 {
				pt.joined = append(pt.joined, w.j.Take())
				n++
			}
			if n > 0 {
				pt.outs = append(pt.outs, ijOut{op: it.op, n: n})
			}
		case ijAdvance:
			w.j.Advance(int(it.side), it.wm)
		case ijEnd:
			w.j.End(int(it.side))
		}
	}
	return nil
}

// splits reports whether a driver of cfg runs its interval join on
// threads: its aggregate does (eligible), its watermarks move only by the
// host (a graph's reader), and nothing reads the joined rows or the
// aggregate's rows as they are made (the joined rows reach the aggregate
// a batch later). Incremental join entries (Kafka) stay on one thread.
func splits(cfg Config) bool {
	return cfg.Threads > 1 && cfg.ExternalWatermark && !cfg.IncrementalJoinState && cfg.OnJoined == nil && cfg.OnRow == nil && cfg.OnMark == nil
}

// ijSplit is the reader's side of an interval join on threads.
type ijSplit struct {
	coord    *exec.IntervalJoin
	workers  []*ijWorker
	parts    []*exec.IntervalJoin // the workers' instances
	seed     maphash.Seed
	cur      *ijBatch
	inflight *ijBatch
	spare    []*ijBatch
	op       uint64
	aggWM    int64 // the aggregate's watermark as the last mark scheduled it
	matches  int64 // joined rows merged
	stopped  bool
	halt     *ijHalt
	heads    []ijHead // the merge's scratch
}

type ijHead struct{ out, row int }

// newSplit returns the exchange and threads instances of q's join, whose
// goroutines stop when owner is unreachable or the join finishes.
func newSplit(t *intervalJoin, threads, maxHeld int, owner *Driver) (*ijSplit, error) {
	coord, err := exec.NewIntervalCoordinator(t.q)
	if err != nil {
		return nil, err
	}
	coord.SetMaxHeld(maxHeld)
	sp := &ijSplit{coord: coord, seed: maphash.MakeSeed(), aggWM: math.MinInt64, heads: make([]ijHead, threads)}
	for i := 0; i < threads; i++ {
		j, err := exec.NewIntervalJoin(t.q, true)
		if err != nil {
			return nil, err
		}
		w := &ijWorker{j: j, idx: i, in: make(chan *ijBatch, 1), done: make(chan struct{}, 1)}
		sp.workers, sp.parts = append(sp.workers, w), append(sp.parts, j)
		go w.run()
	}
	sp.cur = sp.newBatch()
	sp.halt = &ijHalt{ws: sp.workers}
	runtime.AddCleanup(owner, (*ijHalt).stop, sp.halt)
	return sp, nil
}

// ijHalt ends the instances' goroutines once: at finish, or when the
// driver is dropped unclosed (it holds nothing that reaches the driver).
type ijHalt struct {
	once sync.Once
	ws   []*ijWorker
}

func (h *ijHalt) stop() {
	h.once.Do(func() {
		for _, w := range h.ws {
			close(w.in)
		}
	})
}

func (sp *ijSplit) newBatch() *ijBatch {
	if n := len(sp.spare); n > 0 {
		b := sp.spare[n-1]
		sp.spare = sp.spare[:n-1]
		return b
	}
	return &ijBatch{parts: make([]ijPart, len(sp.workers))}
}

// pick is the instance of a key.
func (sp *ijSplit) pick(key []byte) int {
	return int(maphash.Bytes(sp.seed, key) % uint64(len(sp.workers)))
}

// route hands an admitted row (the join's own) to the instance of key.
func (sp *ijSplit) route(side int, row []types.Value, key []byte, seq uint64) {
	sp.op++
	pt := &sp.cur.parts[sp.pick(key)]
	k0 := int32(len(pt.keys))
	pt.keys = append(pt.keys, key...)
	pt.items = append(pt.items, ijItem{kind: ijRow, side: uint8(side), key0: k0, key1: int32(len(pt.keys)), op: sp.op, seq: seq, row: row})
	sp.cur.n++
}

// broadcast hands a watermark or an end of side to every instance.
func (sp *ijSplit) broadcast(kind ijKind, side int, wm int64) {
	sp.op++
	for i := range sp.cur.parts {
		pt := &sp.cur.parts[i]
		pt.items = append(pt.items, ijItem{kind: kind, side: uint8(side), op: sp.op, wm: wm})
	}
	sp.cur.n++
}

// markAgg schedules the aggregate's watermark move to the joined stream's
// watermark, after the joined rows so far, when that moved it.
func (sp *ijSplit) markAgg(aggWM int64) {
	wm := sp.coord.OutputWatermark()
	if wm > max(sp.aggWM, aggWM) && wm != math.MaxInt64 && wm != math.MinInt64 {
		sp.aggWM = wm
		sp.cur.marks = append(sp.cur.marks, ijMark{op: sp.op, wm: wm})
	}
}

// ownRow returns a row the instance may hold: the cells copied unless
// owned, every string copied (a view's strings share its groups' slabs;
// a decoded row's, the decoder's buffer).
func ownRow(row []types.Value, owned bool) []types.Value {
	if !owned {
		return types.CloneRow(row)
	}
	return types.OwnStrings(row)
}

// dispatch hands the current batch to the instances and merges the one
// before it into the join's aggregate (apply, advance).
func (sp *ijSplit) dispatch(t *intervalJoin) error {
	b := sp.cur
	sp.cur = sp.newBatch()
	for _, w := range sp.workers {
		w.in <- b
	}
	prev := sp.inflight
	sp.inflight = b
	if prev != nil {
		return sp.collect(t, prev)
	}
	return nil
}

// sync joins and merges every item so far.
func (sp *ijSplit) sync(t *intervalJoin) error {
	if sp.stopped {
		return nil
	}
	var err error
	if b := sp.cur; b.n > 0 || len(b.marks) > 0 {
		err = sp.dispatch(t)
	}
	if b := sp.inflight; b != nil {
		sp.inflight = nil
		if cerr := sp.collect(t, b); err == nil {
			err = cerr
		}
	}
	return err
}

// collect waits for b's instances and merges their joined rows by op,
// with b's marks, into the aggregate.
func (sp *ijSplit) collect(t *intervalJoin, b *ijBatch) error {
	for _, w := range sp.workers {
		<-w.done
	}
	clear(sp.heads)
	marks := b.marks
	var err error
	for i := range b.parts {
		if perr := b.parts[i].err; perr != nil && err == nil {
			err = t.fail(perr)
		}
	}
	for err == nil {
		best, op := -1, uint64(math.MaxUint64)
		for i := range b.parts {
			if h := sp.heads[i]; h.out < len(b.parts[i].outs) && b.parts[i].outs[h.out].op < op {
				best, op = i, b.parts[i].outs[h.out].op
			}
		}
		for len(marks) > 0 && marks[0].op < op && err == nil {
			err = t.advanceAgg(marks[0].wm)
			marks = marks[1:]
		}
		if best < 0 || err != nil {
			break
		}
		h, pt := &sp.heads[best], &b.parts[best]
		for _, row := range pt.joined[h.row : h.row+pt.outs[h.out].n] {
			if err = t.apply(row); err != nil {
				break
			}
			sp.matches++
		}
		h.row += pt.outs[h.out].n
		h.out++
	}
	sp.recycle(b)
	return err
}

func (sp *ijSplit) recycle(b *ijBatch) {
	for i := range b.parts {
		pt := &b.parts[i]
		clear(pt.items)
		clear(pt.joined)
		pt.items, pt.keys, pt.outs, pt.joined, pt.err = pt.items[:0], pt.keys[:0], pt.outs[:0], pt.joined[:0], nil
	}
	b.marks, b.n = b.marks[:0], 0
	sp.spare = append(sp.spare, b)
}

// stop ends the instances' goroutines (after sync).
func (sp *ijSplit) stop() {
	if !sp.stopped {
		sp.stopped = true
		sp.halt.stop()
	}
}

// The interval join's calls on threads (ijoin.go calls them when t.sp is
// set).

// pushSplit is pushRow on threads: the coordinator admits the row, the
// exchange routes it.
func (t *intervalJoin) pushSplit(side int, row []types.Value, raw []byte, owned bool) error {
	sp := t.sp
	key, seq, late, err := sp.coord.Admit(side, row)
	if errors.Is(err, exec.ErrIntervalJoinFull) {
		return t.fail(err) // the row was not taken: the host cannot go on
	}
	if err != nil {
		t.evalErrs++
		return t.sideErr(side, err)
	}
	t.taken(side, row, raw, late)
	if late || key == nil {
		return nil
	}
	sp.route(side, ownRow(row, owned), key, seq)
	if sp.cur.n >= splitItems {
		return sp.dispatch(t)
	}
	return nil
}

// advanceSplit and endSplit are advance and end on threads.
func (t *intervalJoin) advanceSplit(side int, wm int64) error {
	if wm <= t.sp.coord.Watermark(side) {
		return nil
	}
	t.sp.coord.Advance(side, wm)
	t.sp.broadcast(ijAdvance, side, wm)
	t.sp.markAgg(t.agg.watermark())
	return nil
}

func (t *intervalJoin) endSplit(side int) {
	if t.sp.coord.Ended(side) {
		return
	}
	t.sp.coord.End(side)
	t.sp.broadcast(ijEnd, side, 0)
	t.sp.markAgg(t.agg.watermark())
}

// finishSplit is finish on threads: both inputs end, every joined row is
// applied, the instances stop, the aggregate finishes.
func (t *intervalJoin) finishSplit() error {
	if t.finished {
		return nil
	}
	t.endSplit(0)
	t.endSplit(1)
	t.closing = true
	err := t.sp.sync(t)
	t.sp.stop()
	if err != nil {
		return err
	}
	t.finished = true
	return t.finishAgg()
}
