package drive

import (
	"context"
	"errors"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
)

// The shard side of a sharded aggregate (sharded.go): each shard applies
// its part of every batch on its own goroutine and renders its records,
// tagged with what orders them on one thread.

type shard struct {
	p    *par
	idx  int
	op   *exec.Operator
	in   chan *batch
	out  chan *chunk
	free chan *chunk
	// waiting: the shard has no batch to apply, so a block may go to it
	// to decode (feed.go). Set by the shard as it starts to wait, cleared
	// as it stops and by the reader as it hands it a batch (the shard may
	// not have run yet, and would find a block and the batch both ready).
	waiting atomic.Bool
	// applied counts the batches applied, whose records are all in out;
	// poke wakes the reader as one is, or as out fills (s.hand): the
	// reader merges a batch then, not chunk by chunk as the shard renders
	// it (each chunk a wake-up that left the two goroutines taking turns
	// on one core while the other idled).
	applied atomic.Uint64
	poke    chan struct{}
	_       [cacheLine]byte // the reader reads the fields above; the shard writes the fields below for every event

	b         *batch
	curOp     uint64
	tags      []uint64 // per entry of the operator's dirty list: the op that first dirtied it (0: restored)
	flushTags []uint64
	c         *chunk
	err       error
	skips     []skip          // the records skipped over the batch, in the order rendered
	lastSkip  *exec.EvalError // the last one, which the operator's call may return as well
	w         *worker         // the block path's decoder (feed.go); nil without it
	// The last final's window end (plus lateness) and its op in s.b:
	// a watermark advance finalizes windows in runs of the same end, so
	// most finals need no search of the batch's advances (finalOp).
	lastFinal   int64
	lastFinalOp uint64
	_           [cacheLine]byte
}

// run applies the batches the reader sends, and between them decodes
// the blocks of the block path (feed.go): a batch to apply goes first, so
// the oldest work moves on and the records it renders reach the merge.
func (s *shard) run() {
	defer s.p.wg.Done()
	// A CPU profile tells the shards' samples from the reader's.
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("ubik", "shard")))
	jobs := s.p.jobs // nil without the block path: never ready
	for {
		select {
		case b, ok := <-s.in:
			if !ok {
				return
			}
			s.apply(b)
			continue
		default:
		}
		// Nothing to apply: the reader may hand this goroutine the next
		// block to decode (feed.go).
		s.waiting.Store(true)
		s.spin(jobs)
		select {
		case b, ok := <-s.in:
			s.waiting.Store(false)
			if !ok {
				return
			}
			s.apply(b)
		case b, ok := <-jobs:
			s.waiting.Store(false)
			if !ok {
				jobs = nil
				continue
			}
			s.w.take(b)
		}
	}
}

// spinNanos bounds how long a goroutine of a sharded aggregate polls for
// the other stage's hand-off before it parks. On a virtual machine a
// parked goroutine's core halts, and waking it takes 0.1 ms at the
// median, and milliseconds under load (bench/results/2026-12-07-threads-std-q5-stalls.md),
// while the reader cuts a block or the shard applies one every 1 to 3 ms:
// a short poll takes most hand-offs without a wake-up.
const spinNanos = 50_000

// spin polls for a batch to apply or a block to decode, for at most
// spinNanos, yielding the core to any other goroutine in between.
func (s *shard) spin(jobs chan job) {
	for end := nanotime() + spinNanos; len(s.in) == 0 && len(jobs) == 0 && nanotime() < end; {
		runtime.Gosched()
	}
}

func (s *shard) recycle(c *chunk) {
	clear(c.cells)
	clear(c.skips)
	c.recs, c.bytes, c.cells, c.done, c.err, c.skips = c.recs[:0], c.bytes[:0], c.cells[:0], false, nil, c.skips[:0]
	select {
	case s.free <- c:
	default:
	}
}

func (s *shard) chunk() *chunk {
	select {
	case c := <-s.free:
		return c
	default:
		return &chunk{}
	}
}

// apply takes one batch's steps, then hands over its last chunk.
func (s *shard) apply(b *batch) {
	s.b, s.lastFinalOp = b, 0
	s.c = s.chunk()
	s.renderInto(s.c)
	if s.err == nil {
		s.err = s.steps(b)
	}
	c := s.c
	c.done, c.err, c.stats = true, s.err, s.op.Stats()
	c.skips, s.skips = append(c.skips[:0], s.skips...), s.skips[:0]
	s.c = nil
	s.op.RenderInto(nil) // nothing renders into c once the reader has it
	s.hand(c)
	s.applied.Add(1)
	s.wake()
}

// hand gives the reader a chunk, waking it first when out is full (the
// shard then waits for the merge).
func (s *shard) hand(c *chunk) {
	if len(s.out) == cap(s.out) {
		s.wake()
	}
	s.out <- c
}

func (s *shard) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

func (s *shard) steps(b *batch) (err error) {
	defer Recover(&err)
	pt := &b.parts[s.idx]
	width := s.p.width
	for _, it := range pt.items {
		if it.kind == itemSkip {
			continue
		}
		if s.p.testStep != nil {
			s.p.testStep(s.idx, it.op)
		}
		if err := s.advance(max(it.wm, b.startWM)); err != nil {
			return err
		}
		s.curOp = it.op
		switch it.kind {
		case itemEvent:
			s.op.SetSeq(s.p.seqBase + it.op*s.p.perEvent)
			row := pt.cells[it.row : int(it.row)+width : int(it.row)+width]
			err := s.op.ProcessAdmitted(row, pt.keys[it.key0:it.key1], s.p.adm)
			if err != nil && !Skipped(err) {
				return err
			}
			if err != nil {
				s.ownSkip(err, it.op)
			}
			for len(s.tags) < s.op.DirtyLen() {
				s.tags = append(s.tags, it.op)
			}
		case itemFlush, itemFinish:
			s.tags, s.flushTags = s.flushTags[:0], s.tags
			if it.kind == itemFlush {
				err = s.op.EmitEarly()
			} else {
				err = s.op.Finish()
			}
			if err != nil && !Skipped(err) {
				return err
			}
		}
	}
	return s.advance(b.endWM)
}

// ownSkip keeps the evaluation error of the event at op, when it is the
// event's own (an aggregate failed to fold it): its rendering's came
// through onSkip. Kept apart so the error's variable, which errors.As
// moves to the heap, is made only for an event that failed.
func (s *shard) ownSkip(err error, op uint64) {
	var ee *exec.EvalError
	if errors.As(err, &ee) && ee != s.lastSkip {
		s.skips = append(s.skips, skip{tag: tag{op: op}, err: ee})
	}
}

func (s *shard) advance(wm int64) error {
	if wm <= s.op.Watermark() {
		return nil
	}
	if err := s.op.AdvanceWatermark(wm); err != nil && !Skipped(err) {
		return err
	}
	return nil
}

// tagNow is the tag of the record being rendered, of a window ending at
// windowEnd.
func (s *shard) tagNow(windowEnd int64) tag {
	kind, seq, idx := s.op.EmitOrder()
	switch kind {
	case exec.EmitOnFinal:
		return tag{op: s.finalOp(exec.SatAdd(windowEnd, s.p.lateness)), class: 1, a: windowEnd, b: seq}
	case exec.EmitOnFlush:
		t := tag{op: s.curOp, class: 2, a: int64(s.flushTags[idx])}
		if t.a == 0 {
			t.b = seq // restored dirty: by creation, before any new one
		}
		return t
	}
	return tag{op: s.curOp}
}

// onSkip is the shard operator's OnSkip: the skipped record, tagged,
// goes to the merge with the batch's last chunk.
func (s *shard) onSkip(err *exec.EvalError, windowEnd int64) {
	s.lastSkip = err
	s.skips = append(s.skips, skip{tag: s.tagNow(windowEnd), err: err})
}

// finalOp is s.b.finalOp(t), remembered for the last t of the batch.
func (s *shard) finalOp(t int64) uint64 {
	if s.lastFinalOp == 0 || s.lastFinal != t {
		s.lastFinal, s.lastFinalOp = t, s.b.finalOp(t)
	}
	return s.lastFinalOp
}

// onRecord is the shard operator's Emit: the record, tagged, joins the
// chunk; a full chunk goes to the reader (blocking while it has
// outChunks it has not taken).
func (s *shard) onRecord(r *changelog.Record) error {
	t := s.tagNow(r.Meta.WindowEnd)
	c := s.c
	c.bytes = appendAt(c.bytes, r.Key)
	key1 := int32(len(c.bytes))
	c.bytes = appendAt(c.bytes, r.Value)
	var row1 int32
	if s.p.withRows {
		// The row's strings are the operator's own, never reused: the
		// cells are copied, the strings shared.
		c.cells = append(c.cells, s.op.EmittedRow()...)
		row1 = int32(len(c.cells))
	}
	m := &r.Meta
	c.recs = append(c.recs, outRec{op: t.op, a: t.a, b: t.b, revision: m.Revision, winStart: m.WindowStart, winEnd: m.WindowEnd,
		key1: key1, val1: int32(len(c.bytes)), row1: row1, class: t.class, final: m.Final})
	if len(c.recs) >= chunkRecords {
		s.hand(c)
		s.c = s.chunk()
	}
	s.renderInto(s.c)
	return nil
}

// renderRoom is the spare capacity a chunk's bytes keep for the operator
// to render the next record in (RenderInto): a larger record is copied.
const renderRoom = 1024

// renderInto has the operator render its next record in c's spare
// capacity, so that onRecord finds it in place.
func (s *shard) renderInto(c *chunk) {
	if cap(c.bytes)-len(c.bytes) < renderRoom {
		c.bytes = slices.Grow(c.bytes, renderRoom)
	}
	s.op.RenderInto(c.bytes)
}

// appendAt appends b to buf, and only extends buf when b already lies
// there, rendered in its spare capacity (renderInto).
func appendAt(buf, b []byte) []byte {
	n := len(buf)
	if len(b) <= cap(buf)-n && unsafe.Pointer(unsafe.SliceData(b)) == unsafe.Add(unsafe.Pointer(unsafe.SliceData(buf)), n) {
		return buf[:n+len(b)]
	}
	return append(buf, b...)
}
