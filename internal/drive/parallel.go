package drive

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Parallelism inside one query (Config.Threads). The driver's own
// goroutine stays the reader: it decodes, counts, runs the input dedup
// (exec.Dedup: the first copy is decided in input order), checks each event as
// one operator would before touching state (exec.Admission: WHERE, the
// group key, the aggregates' FILTERs and arguments, the window time), so
// a bad event is reported by the push that carried it; it keeps the
// watermark (a function of the decoded event times alone) and decides the
// early ticks by the processing clock at the same input positions as one
// thread would. Events go, in batches, to K shards: each an
// exec.Operator holding the groups whose key hashes to it, on its own
// goroutine.
//
// Every input step gets a number (op): an event, a watermark advance, a
// flush, the end of the input. A shard applies the watermark lazily (the
// latest before each of its events, and at the end of every batch): only
// the windows of its own groups can close, and an event of its own is
// late by the watermark of the step before it, exactly as in one
// operator. Each record a shard renders is tagged with what orders it in
// one operator's changelog:
//
//   - a change record (EMIT CHANGES): the op of its event;
//   - a final: the op of the first advance whose watermark passes its
//     window's end plus the allowed lateness (a shard may apply several
//     advances at once), then the window end and the group's creation
//     number (one operator finalizes windows by start, each bucket's
//     groups in creation order, and sessions by (end, creation));
//   - an early flush: the op of the flush, then the op of the event that
//     first dirtied the group since the last flush (one operator's dirty
//     list is in that order; groups restored dirty come first, by
//     creation number).
//
// Creation numbers are global: before each event a shard sets its
// operator's counter from the event's op (exec.Operator.SetSeq), so
// numbers order across shards as one operator's do, before and after a
// restore. Each shard's records are in tag order; the reader k-way merges
// them by tag and hands them to Config.Emit on its own goroutine, so the
// changelog is byte for byte the one thread's.
//
// Bounds: a batch holds at most batchEvents events; at most two batches
// are in flight (one being merged, one being applied); a shard hands
// records over in chunks of at most chunkRecords, through a channel of
// outChunks, and blocks when the reader has not taken them. So a
// watermark jump that finalizes a million groups streams through, as with
// one thread.

const (
	batchEvents  = 1024
	chunkRecords = 1024
	outChunks    = 4
)

// tag orders a record among the records of every shard.
type tag struct {
	op    uint64
	class uint8 // 0 change, 1 final, 2 flush
	a     int64
	b     uint64
}

func (t tag) less(u tag) bool {
	if t.op != u.op {
		return t.op < u.op
	}
	if t.class != u.class {
		return t.class < u.class
	}
	if t.a != u.a {
		return t.a < u.a
	}
	return t.b < u.b
}

// opStep is the host's step from op on.
type opStep struct {
	op, step uint64
}

type advance struct {
	op uint64
	wm int64
}

const (
	itemEvent uint8 = iota
	itemFlush
	itemFinish
	itemSkip // a dropped copy of a dedup key (feed.go)
)

type item struct {
	kind uint8
	op   uint64
	wm   int64 // the watermark before this step
	row  int32 // offset in part.cells
	key0 int32 // key in part.keys
	key1 int32
}

// part is one shard's share of a batch. Cells are copies of the decoded
// rows; string cells point into strs (the decoder's strings alias its
// input, which the host reuses), set by fix before the shard reads them.
type part struct {
	items []item
	cells []types.Value
	strs  []byte
	fixes []int32 // cells whose S is in strs: cell index, offset, length
	keys  []byte
}

func (pt *part) reset() {
	pt.items, pt.cells, pt.strs, pt.fixes, pt.keys = pt.items[:0], pt.cells[:0], pt.strs[:0], pt.fixes[:0], pt.keys[:0]
}

// fix points the string cells into strs (the batch is sealed: strs no
// longer grows).
func (pt *part) fix() {
	for i := 0; i+2 < len(pt.fixes); i += 3 {
		c, off, n := pt.fixes[i], pt.fixes[i+1], pt.fixes[i+2]
		pt.cells[c].S = unsafe.String(&pt.strs[off], int(n))
	}
}

type batch struct {
	advances []advance // every advance of the batch, by op (the end of the input as +inf)
	marks    []advance // the ends of the host's calls that moved the watermark (par.mark), by op
	steps    []opStep  // where the host's step changes, by op (par.step)
	parts    []part
	startWM  int64 // the watermark before the batch: a block's items carry only their block's (feed.go)
	endWM    int64 // the watermark after the batch
	events   int
	blk      block // a block of input records decoded by a worker (feed.go); empty otherwise
}

// finalOp is the op of the first advance of the batch that passes t.
func (b *batch) finalOp(t int64) uint64 {
	lo, hi := 0, len(b.advances)
	for lo < hi {
		m := (lo + hi) / 2
		if b.advances[m].wm >= t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == len(b.advances) {
		panic(fmt.Sprintf("drive: a window closing at %d finalized with no advance of the batch passing it", t))
	}
	return b.advances[lo].op
}

type outRec struct {
	tag              tag
	meta             changelog.Meta
	key0, key1, val1 int32
	row0, row1       int32 // the projected row in chunk.cells (par.onRow)
}

// chunk is a run of a shard's records. The last chunk of a batch has
// done set, the shard's stats after the batch, and its fatal error.
type chunk struct {
	recs  []outRec
	bytes []byte
	cells []types.Value
	done  bool
	stats exec.Stats
	err   error
}

type shard struct {
	p    *par
	idx  int
	op   *exec.Operator
	in   chan *batch
	out  chan *chunk
	free chan *chunk
	_    [cacheLine]byte // the reader reads the channels above; the shard writes the fields below for every event

	b         *batch
	curOp     uint64
	tags      []uint64 // per entry of the operator's dirty list: the op that first dirtied it (0: restored)
	flushTags []uint64
	c         *chunk
	err       error
	w         *worker       // the block path's decoder (feed.go); nil without it
	row       []types.Value // the row handed to the operator: the batch's cells spread over the columns, NULL elsewhere
	_         [cacheLine]byte
}

type par struct {
	q        *plan.Query
	adm      *exec.Admission
	dedup    *exec.Dedup // nil without a dedup_key
	shards   []*shard
	seed     maphash.Seed
	lateness int64
	delay    int64
	external bool
	perEvent uint64 // creation numbers per event (HOP: windows per event)
	seqBase  uint64 // above every restored creation number
	width    int    // cells per row
	cols     []int  // the columns the query reads: the only cells a batch carries
	emit     func(*changelog.Record) error
	// onRow, if set, receives each record's projected row before the
	// record (Config.OnRow): the shards carry it to the merge.
	onRow    func(row []types.Value) error
	onMark   func(wm int64)
	testStep func(shard int, op uint64) // tests only: called before each step of a shard
	testTake func()                     // tests only: called before a shard's goroutine takes a block
	// The fields above are what the shards' goroutines read for every
	// event; the ones below the reader writes (p.op for every line fed).
	// The pad keeps them off one cache line, which would otherwise move
	// between the cores at every line.
	_         [cacheLine]byte
	wg        sync.WaitGroup
	stopped   bool
	discard   bool // the host is gone (or failed): records are dropped
	keyBuf    []byte
	rec       changelog.Record
	lastStats []exec.Stats

	// The block path (feed.go): nil jobs without one.
	jobs        chan job     // blocks to decode, for the shards' goroutines
	tickets     uint64       // the last job's ticket
	hostTook    atomic.Int64 // blocks the reader decoded itself (tests)
	hostW       *worker      // the reader's decoder, for a block no shard took yet
	pending     []*batch     // blocks handed to the shards to decode, in input order, not yet sequenced
	fill        *batch       // the block being filled
	blockEvents int
	ckey        []byte // sequencing scratch

	op       uint64
	wm       int64
	outWM    int64  // the watermark whose records are all merged: the last merged batch's end
	lastMark int64  // the watermark of the last call boundary recorded (mark)
	step     uint64 // the host's step (Driver.SetStep): the ops from now on are its
	outStep  uint64 // the step of the record, row or marker being delivered
	maxTime  int64
	rows     int64
	filtered int64
	evalErrs int64
	dups     int64
	beyond   int64
	copies   int64 // copies turned away before the shards (countCopy): duplicates, not rows

	cur      *batch
	inflight *batch
	spare    []*batch
	_        [cacheLine]byte // nor with whatever the allocator puts after it
}

// cacheLine is a padding that keeps what one goroutine writes off the
// cache lines another goroutine reads (two 64-byte lines: the adjacent
// line prefetcher moves pairs).
const cacheLine = 128

// eligible reports whether the driver can run q on threads shards, and
// why not.
func eligible(q *plan.Query, cfg Config) (bool, string) {
	switch {
	case cfg.Emit == nil:
		return false, "records are pulled with Next (a bounded buffer)"
	case cfg.Late != nil:
		return false, "a late-event hook receives events in input order"
	case cfg.Strict:
		return false, "strict mode stops at the first failing event"
	case !exec.Sharded(q):
		return false, "the query has no GROUP BY key (one group)"
	}
	return true, ""
}

func newPar(q *plan.Query, cfg Config, threads int, blocks bool) (*par, error) {
	p := &par{q: q, adm: exec.NewAdmission(q), dedup: exec.NewDedup(q), seed: maphash.MakeSeed(), lateness: q.Emit.AllowedLateness,
		delay: q.Source.WatermarkDelay, external: cfg.ExternalWatermark || q.IJoin != nil, perEvent: 1, seqBase: 1,
		width: len(q.Source.Columns), emit: cfg.Emit, onRow: cfg.OnRow, onMark: cfg.OnMark, wm: math.MinInt64, outWM: math.MinInt64,
		lastMark: math.MinInt64, maxTime: math.MinInt64}
	if q.Window != nil {
		p.perEvent = uint64(q.Window.WindowsPerEvent())
	}
	for i := 0; i < p.width; i++ {
		if q.UsedColumns == nil || q.UsedColumns[i] {
			p.cols = append(p.cols, i)
		}
	}
	sq := exec.NoFilter(q)
	start := time.Now()
	for i := 0; i < threads; i++ {
		s := &shard{p: p, idx: i, in: make(chan *batch, 1), out: make(chan *chunk, outChunks), free: make(chan *chunk, outChunks+2)}
		op, err := exec.New(sq, exec.Config{Emit: s.onRecord, ExternalWatermark: true,
			// Latency only: the ticks are the reader's (Config.Now).
			Nanotime: func() int64 { return int64(time.Since(start)) + 1 }})
		if err != nil {
			return nil, err
		}
		s.op = op
		s.row = make([]types.Value, p.width)
		for j, c := range q.Source.Columns {
			s.row[j] = types.NullOf(c.Type)
		}
		p.shards = append(p.shards, s)
	}
	p.lastStats = make([]exec.Stats, threads)
	for i := range p.lastStats {
		p.lastStats[i] = p.shards[i].op.Stats()
	}
	p.cur = p.newBatch()
	if blocks {
		p.startBlocks(cfg.BlockEvents)
	}
	for _, s := range p.shards {
		p.wg.Add(1)
		go s.run()
	}
	return p, nil
}

func (p *par) newBatch() *batch {
	if n := len(p.spare); n > 0 {
		b := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return b
	}
	return &batch{parts: make([]part, len(p.shards)), startWM: math.MinInt64}
}

func (p *par) nextOp() uint64 {
	p.op++
	p.noteStep()
	return p.op
}

// noteStep records in the current batch that the ops from p.op on are of
// the host's step p.step, when that changed.
func (p *par) noteStep() {
	b := p.cur
	if n := len(b.steps); n == 0 || b.steps[n-1].step != p.step {
		b.steps = append(b.steps, opStep{op: p.op, step: p.step})
	}
}

// pendingStep is the earliest step of an op not yet merged.
func (p *par) pendingStep() uint64 {
	if b := p.inflight; b != nil && len(b.steps) > 0 {
		return b.steps[0].step
	}
	if b := p.cur; len(b.steps) > 0 {
		return b.steps[0].step
	}
	return math.MaxUint64
}

// push takes one decoded event: the reader's share of apply.
func (p *par) push(row []types.Value) error {
	p.rows++
	op := p.nextOp()
	if p.dedup != nil {
		switch dup, beyond := p.dedup.Admit(row, p.wm); {
		case dup:
			p.dups++
			p.observe(row)
			return p.dispatchIfFull()
		case beyond:
			p.beyond++
			return p.dispatchIfFull()
		}
	}
	key, pass, err := p.adm.Check(p.keyBuf[:0], row)
	switch {
	case err != nil:
		p.evalErrs++
	case !pass:
		p.filtered++
	default:
		p.keyBuf = key
		p.cur.events++
		p.route(p.cur, op, p.wm, row, key, nil)
	}
	p.observe(row)
	if derr := p.dispatchIfFull(); derr != nil {
		return derr
	}
	return err
}

func (p *par) dispatchIfFull() error {
	if p.cur.events >= batchEvents {
		return p.dispatch()
	}
	return nil
}

// route adds an event to the part of b of the shard its key hashes to,
// with wm the watermark before it. A string cell is copied unless it lies
// in raw (a block's records, which live as long as the batch).
func (p *par) route(b *batch, op uint64, wm int64, row []types.Value, key, raw []byte) int {
	pi := int(maphash.Bytes(p.seed, key) % uint64(len(p.shards)))
	pt := &b.parts[pi]
	it := item{kind: itemEvent, op: op, wm: wm, row: int32(len(pt.cells)), key0: int32(len(pt.keys))}
	pt.keys = append(pt.keys, key...)
	it.key1 = int32(len(pt.keys))
	for _, j := range p.cols {
		c := row[j]
		if len(c.S) > 0 && !within(raw, c.S) {
			pt.fixes = append(pt.fixes, int32(len(pt.cells)), int32(len(pt.strs)), int32(len(c.S)))
			pt.strs = append(pt.strs, c.S...)
			c.S = ""
		}
		pt.cells = append(pt.cells, c)
	}
	pt.items = append(pt.items, it)
	return pi
}

// observe advances the watermark by the event's time, as exec.Operator
// does (for every decoded event, whatever fails to evaluate).
func (p *par) observe(row []types.Value) {
	tc := p.q.Source.TimeCol
	if tc < 0 || row[tc].Null {
		return
	}
	ts := row[tc].I
	if ts <= p.maxTime {
		return
	}
	p.maxTime = ts
	if !p.external {
		p.advance(exec.SatAdd(ts, -p.delay))
	}
}

// advance moves the watermark (no shard needs to hear of it now: each
// applies it before its next step).
func (p *par) advance(wm int64) {
	if wm <= p.wm {
		return
	}
	p.wm = wm
	if p.dedup != nil {
		p.dedup.Evict(wm)
	}
	p.cur.advances = append(p.cur.advances, advance{op: p.nextOp(), wm: wm})
}

// broadcast adds a step every shard takes at the same position.
func (p *par) broadcast(kind uint8) {
	op := p.nextOp()
	if kind == itemFinish {
		p.cur.advances = append(p.cur.advances, advance{op: op, wm: math.MaxInt64})
	}
	for i := range p.cur.parts {
		pt := &p.cur.parts[i]
		pt.items = append(pt.items, item{kind: kind, op: op, wm: p.wm})
	}
	p.cur.events++ // a step counts toward the batch's bound
}

// flush is an early flush at this position.
func (p *par) flush() error {
	p.broadcast(itemFlush)
	if p.cur.events >= batchEvents {
		return p.dispatch()
	}
	return nil
}

// dispatch hands the current batch to the shards and merges the one
// before it.
func (p *par) dispatch() error {
	b := p.cur
	p.cur = p.newBatch()
	return p.send(b)
}

// send hands b to the shards and merges the batch before it.
func (p *par) send(b *batch) error {
	b.endWM = p.wm
	for i := range b.parts {
		b.parts[i].fix()
	}
	for _, s := range p.shards {
		s.in <- b
	}
	prev := p.inflight
	p.inflight = b
	if prev != nil {
		return p.collect(prev)
	}
	return nil
}

// sync applies and merges everything pushed so far.
func (p *par) sync() error {
	if p.stopped {
		return nil
	}
	var err error
	if b := p.cur; b.events > 0 || len(b.advances) > 0 || len(b.marks) > 0 {
		err = p.dispatch()
	}
	if b := p.inflight; b != nil {
		p.inflight = nil
		if cerr := p.collect(b); err == nil {
			err = cerr
		}
	}
	return err
}

// collect merges the shards' records of b into the changelog.
func (p *par) collect(b *batch) error {
	type head struct {
		c *chunk
		i int
	}
	heads := make([]head, len(p.shards))
	for i, s := range p.shards {
		heads[i].c = <-s.out
	}
	var first error
	marks, steps := b.marks, b.steps
	// stepOf sets outStep to the step of op (ops come in order).
	stepOf := func(op uint64) {
		for len(steps) > 1 && steps[1].op <= op {
			steps = steps[1:]
		}
		if len(steps) > 0 {
			p.outStep = steps[0].step
		}
	}
	for {
		best := -1
		for i := range heads {
			h := &heads[i]
			for h.i >= len(h.c.recs) && !h.c.done {
				p.shards[i].recycle(h.c)
				h.c, h.i = <-p.shards[i].out, 0
			}
			if h.i < len(h.c.recs) && (best < 0 || h.c.recs[h.i].tag.less(heads[best].c.recs[heads[best].i].tag)) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		h := &heads[best]
		r := &h.c.recs[h.i]
		h.i++
		if first != nil || p.discard {
			continue
		}
		for len(marks) > 0 && marks[0].op < r.tag.op {
			stepOf(marks[0].op)
			p.onMark(marks[0].wm)
			marks = marks[1:]
		}
		stepOf(r.tag.op)
		p.rec.Key = h.c.bytes[r.key0:r.key1:r.key1]
		p.rec.Value = h.c.bytes[r.key1:r.val1:r.val1]
		p.rec.Meta = r.meta
		if p.onRow != nil {
			if err := p.onRow(h.c.cells[r.row0:r.row1:r.row1]); err != nil {
				first = err
				continue
			}
		}
		if err := p.emit(&p.rec); err != nil {
			first = err
		}
	}
	if first == nil && !p.discard {
		for _, m := range marks {
			stepOf(m.op)
			p.onMark(m.wm)
		}
	}
	p.outWM = max(p.outWM, b.endWM)
	for i, h := range heads {
		p.lastStats[i] = h.c.stats
		if h.c.err != nil && first == nil {
			first = h.c.err
		}
		p.shards[i].recycle(h.c)
	}
	for i := range b.parts {
		b.parts[i].reset()
	}
	b.advances, b.marks, b.steps, b.events, b.startWM = b.advances[:0], b.marks[:0], b.steps[:0], 0, math.MinInt64
	b.blk.reset()
	p.spare = append(p.spare, b)
	if first != nil {
		p.discard = true
	}
	return first
}

// mark ends a call of the host: its watermark reaches onMark after the
// call's records, when it moved.
func (p *par) mark() {
	if p.onMark == nil || p.wm <= p.lastMark {
		return
	}
	p.lastMark = p.wm
	p.noteStep()
	p.cur.marks = append(p.cur.marks, advance{op: p.op, wm: p.wm})
}

// countCopy is aggregate.countCopy: the dedup runs on the reader.
func (p *par) countCopy(row []types.Value) bool {
	if p.dedup == nil || !p.dedup.IsCopy(row, p.wm) {
		return false
	}
	p.copies++
	return true
}

// stop ends the shards' goroutines, after the batch in flight.
func (p *par) stop() {
	if p.stopped {
		return
	}
	if b := p.inflight; b != nil {
		p.inflight = nil
		_ = p.collect(b)
	}
	p.stopped = true
	for _, s := range p.shards {
		close(s.in)
	}
	if p.jobs != nil {
		close(p.jobs)
	}
	p.wg.Wait()
}

// finish ends the input: every shard finalizes what it holds.
func (p *par) finish() error {
	p.broadcast(itemFinish)
	err := p.sync()
	p.stop()
	return err
}

// closeOpenWindows is Driver.CloseOpenWindows over the shards.
func (p *par) closeOpenWindows() error {
	if err := p.sync(); err != nil {
		return err
	}
	wm := p.wm
	for _, s := range p.shards {
		wm = max(wm, s.op.CloseWatermark())
	}
	p.advance(wm)
	p.broadcast(itemFlush)
	return p.sync()
}

func (p *par) stats() exec.Stats {
	var s exec.Stats
	for _, t := range p.lastStats {
		s.Rows += t.Rows
		s.Filtered += t.Filtered
		s.EvalErrors += t.EvalErrors
		s.Late += t.Late
		s.Duplicates += t.Duplicates // restored counters
		s.DedupLate += t.DedupLate
		s.RecordsOut += t.RecordsOut
		s.HavingSuppressed += t.HavingSuppressed
		s.UnchangedSuppressed += t.UnchangedSuppressed
		s.WindowsFinalized += t.WindowsFinalized
		s.LiveGroups += t.LiveGroups
		s.LiveGroupsPeak += t.LiveGroupsPeak
		s.StateBytes += t.StateBytes
		s.StateBytesPeak += t.StateBytesPeak
		s.LatencyP50 = max(s.LatencyP50, t.LatencyP50)
		s.LatencyP99 = max(s.LatencyP99, t.LatencyP99)
		s.LatencyMax = max(s.LatencyMax, t.LatencyMax)
		s.LatencyCount += t.LatencyCount
	}
	s.Rows += p.filtered + p.evalErrs + p.dups + p.beyond // the shards count the rows routed to them
	s.Filtered += p.filtered
	s.EvalErrors += p.evalErrs
	s.Duplicates += p.dups + p.copies
	s.DedupLate += p.beyond
	if p.dedup != nil {
		s.DedupKeys, s.DedupBytes = p.dedup.Keys(), p.dedup.Bytes()
		// The dedup keys are live state too; the peak, like the shards'
		// sum, bounds the real one from above.
		s.StateBytes += s.DedupBytes
		s.StateBytesPeak += p.dedup.Peak()
	}
	s.Watermark = p.wm
	s.MaxEventTime = p.maxTime
	return s
}

// checkpoint writes every shard's entries and one meta entry.
func (p *par) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := p.sync(); err != nil {
		return err
	}
	m := exec.Meta{Watermark: p.wm, MaxEventTime: p.maxTime, Position: position}
	for _, s := range p.shards {
		err := s.op.Checkpoint(full, nil, func(k, v []byte) error {
			if string(k) != exec.MetaKey {
				return put(k, v)
			}
			sm, err := exec.ParseMeta(v)
			if err != nil {
				return err
			}
			m.Seq = max(m.Seq, sm.Seq)
			for i, c := range sm.Counters {
				m.Counters[i] += c
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if p.dedup != nil {
		if err := p.dedup.Checkpoint(full, put); err != nil {
			return err
		}
	}
	m.Counters[0] += p.filtered + p.evalErrs + p.dups + p.beyond // Rows: the shards count only the rows routed to them
	m.Counters[1] += p.filtered
	m.Counters[2] += p.evalErrs
	m.Counters[7] += p.dups + p.copies
	m.Counters[8] += p.beyond
	m.Seq = max(m.Seq, p.seqBase+p.op*p.perEvent)
	return put([]byte(exec.MetaKey), exec.AppendMeta(nil, m))
}

// restore routes one checkpoint entry to the shard that holds its group
// (the meta entry to all: its counters to the first only).
func (p *par) restore(key, val []byte) ([]byte, error) {
	if string(key) == exec.MetaKey && len(val) > 0 {
		m, err := exec.ParseMeta(val)
		if err != nil {
			return nil, err
		}
		p.wm, p.outWM, p.maxTime = m.Watermark, m.Watermark, m.MaxEventTime
		z := m
		z.Counters = [exec.MetaCounters]int64{}
		z.Position = nil
		for i, s := range p.shards {
			mv := exec.AppendMeta(nil, z)
			if i == 0 {
				mv = val
			}
			if _, err := s.op.Restore(key, mv); err != nil {
				return nil, err
			}
		}
		return m.Position, nil
	}
	if p.dedup != nil && p.dedup.IsEntry(key) {
		return nil, p.dedup.Restore(key, val)
	}
	s := p.shards[0]
	if gk, ok := exec.EntryGroupKey(key); ok {
		s = p.shards[maphash.Bytes(p.seed, gk)%uint64(len(p.shards))]
	}
	return s.op.Restore(key, val)
}

func (p *par) finishRestore() {
	p.lastMark = math.MinInt64 // the host's readers start without a marker
	for i, s := range p.shards {
		s.op.FinishRestore()
		p.seqBase = max(p.seqBase, s.op.Seq()+1)
		s.tags = s.tags[:0]
		for range s.op.DirtyLen() {
			s.tags = append(s.tags, 0)
		}
		p.lastStats[i] = s.op.Stats()
	}
}

// The shard side.

// run applies the batches the reader sends, and between them decodes
// the blocks of the block path (feed.go): a batch to apply goes first, so
// the oldest work moves on and the records it renders reach the merge.
func (s *shard) run() {
	defer s.p.wg.Done()
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
		select {
		case b, ok := <-s.in:
			if !ok {
				return
			}
			s.apply(b)
		case b, ok := <-jobs:
			if !ok {
				jobs = nil
				continue
			}
			s.w.take(b)
		}
	}
}

func (s *shard) recycle(c *chunk) {
	clear(c.cells)
	c.recs, c.bytes, c.cells, c.done, c.err = c.recs[:0], c.bytes[:0], c.cells[:0], false, nil
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
	s.b = b
	s.c = s.chunk()
	if s.err == nil {
		s.err = s.steps(b)
	}
	c := s.c
	c.done, c.err, c.stats = true, s.err, s.op.Stats()
	s.c = nil
	s.out <- c
}

func (s *shard) steps(b *batch) (err error) {
	defer Recover(&err)
	pt := &b.parts[s.idx]
	cols := s.p.cols
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
			for j, c := range pt.cells[it.row : int(it.row)+len(cols)] {
				s.row[cols[j]] = c
			}
			err := s.op.ProcessAdmitted(s.row, pt.keys[it.key0:it.key1], s.p.adm)
			if err != nil && !Skipped(err) {
				return err
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

func (s *shard) advance(wm int64) error {
	if wm <= s.op.Watermark() {
		return nil
	}
	if err := s.op.AdvanceWatermark(wm); err != nil && !Skipped(err) {
		return err
	}
	return nil
}

// onRecord is the shard operator's Emit: the record, tagged, joins the
// chunk; a full chunk goes to the reader (blocking while it has
// outChunks it has not taken).
func (s *shard) onRecord(r *changelog.Record) error {
	kind, seq, idx := s.op.EmitOrder()
	var t tag
	switch kind {
	case exec.EmitOnChange:
		t = tag{op: s.curOp}
	case exec.EmitOnFinal:
		t = tag{op: s.b.finalOp(exec.SatAdd(r.Meta.WindowEnd, s.p.lateness)), class: 1, a: r.Meta.WindowEnd, b: seq}
	case exec.EmitOnFlush:
		t = tag{op: s.curOp, class: 2, a: int64(s.flushTags[idx])}
		if t.a == 0 {
			t.b = seq // restored dirty: by creation, before any new one
		}
	}
	c := s.c
	or := outRec{tag: t, meta: r.Meta, key0: int32(len(c.bytes))}
	c.bytes = append(c.bytes, r.Key...)
	or.key1 = int32(len(c.bytes))
	c.bytes = append(c.bytes, r.Value...)
	or.val1 = int32(len(c.bytes))
	if s.p.onRow != nil {
		// The row's strings are the operator's own, never reused: the
		// cells are copied, the strings shared.
		or.row0 = int32(len(c.cells))
		c.cells = append(c.cells, s.op.EmittedRow()...)
		or.row1 = int32(len(c.cells))
	}
	c.recs = append(c.recs, or)
	if len(c.recs) >= chunkRecords {
		s.out <- c
		s.c = s.chunk()
	}
	return nil
}

// cleanup stops the goroutines of a driver its host dropped.
func (p *par) cleanup() {
	p.discard = true
	p.stop()
}
