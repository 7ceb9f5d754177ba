package drive

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/dataflow"
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
// goroutine. The reader is one of the threads: Config.Threads = K+1. On
// two cores that makes a two-stage pipeline (the reader decodes, one
// shard folds), with no goroutine contending for a core and no event
// crossing to the other core twice; K = Threads shards ran three busy
// goroutines on two cores for 1.6 times one thread's CPU.
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
// are in flight (one being merged, one being applied), or blocksInFlight
// on the block path (feed.go); a shard hands records over in chunks of at
// most chunkRecords, through a channel of outChunks, and blocks when the
// reader has not taken them. So a watermark jump that finalizes a million
// groups streams through, as with one thread.
//
// Why more on the block path: the reader and a shard are the two stages
// of a pipeline there (the reader decodes, the shard folds), and with
// one batch ahead each stage waits for the other at every block whenever
// either is held up (a goroutine's wake-up, a collection, another
// process on the core). Pushed events keep two: their records reach
// Emit at most two batches late.

const (
	batchEvents    = 1024
	chunkRecords   = 1024
	outChunks      = 16
	blocksInFlight = 4
)

type par struct {
	q        *plan.Query
	adm      *exec.Admission
	dedup    *dedupNode // nil without a dedup_key (no late hook: one refuses threads)
	shards   []*shard
	seed     maphash.Seed
	lateness int64
	delay    int64
	external bool
	perEvent uint64        // creation numbers per event (HOP: windows per event)
	seqBase  uint64        // above every restored creation number
	width    int           // cells per row
	cols     []int         // the columns the query reads: the only cells of a batch's rows not NULL
	nulls    []types.Value // a row of NULLs, what route copies a row's cells over
	strCols  []int         // the VARCHAR columns of cols: a row decoded in place may hold the decoder's strings there
	// out is where the merge delivers: held by the driver, only weakly
	// here (parOut). rows: Config.OnRow is set, so the shards carry each
	// record's projected row to the merge; marks: Config.OnMark is set.
	out      weak.Pointer[parOut]
	withRows bool
	marks    bool
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
	skips     []skip // collect's scratch

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

	cur      *batch
	inflight []*batch // sent to the shards, not yet merged: fewer than depth after a send
	sent     uint64   // batches sent (batch.seq)
	depth    int      // the most batches in flight
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
	case dataflow.GroupNeed(q).Kind != dataflow.Hash:
		// The plan places the aggregate's rows in one partition.
		return false, "the query has no GROUP BY key (one group)"
	}
	return true, ""
}

// parOut is where a sharded aggregate's merge delivers: the host's
// callbacks (Config.Emit, OnRow, OnMark). The driver holds it; the par
// only weakly. A host's callback often reaches the host's query and so
// the driver, and the par is what the driver's cleanup keeps (and what
// the shards' goroutines reach): a strong pointer would keep a driver
// dropped unclosed reachable for ever, its goroutines and state with it.
type parOut struct {
	emit   func(*changelog.Record) error
	onRow  func(row []types.Value) error
	onMark func(wm int64)
	// onSkips takes the records the shards skipped applying b (an
	// evaluation error each), in one thread's order, after b's records.
	onSkips func(b *batch, skips []skip)
}

func newPar(q *plan.Query, cfg Config, out *parOut, threads int, blocks bool) (*par, error) {
	p := &par{q: q, adm: exec.NewAdmission(q), dedup: newAggDedup(q, nil), seed: maphash.MakeSeed(), lateness: q.Emit.AllowedLateness,
		delay: q.Source.WatermarkDelay, external: cfg.ExternalWatermark || q.IJoin != nil, perEvent: 1, seqBase: 1,
		width: len(q.Source.Columns), out: weak.Make(out), withRows: out.onRow != nil, marks: out.onMark != nil, wm: math.MinInt64, outWM: math.MinInt64,
		lastMark: math.MinInt64, maxTime: math.MinInt64}
	if q.Window != nil {
		p.perEvent = uint64(q.Window.WindowsPerEvent())
	}
	for i, c := range q.Source.Columns {
		if q.UsedColumns == nil || q.UsedColumns[i] {
			p.cols = append(p.cols, i)
		}
		p.nulls = append(p.nulls, types.NullOf(c.Type))
		if c.Type.Kind == types.KindVarchar && (q.UsedColumns == nil || q.UsedColumns[i]) {
			p.strCols = append(p.strCols, i)
		}
	}
	sq := exec.NoFilter(q)
	base := nanotime()
	p.depth = 2
	if blocks {
		p.depth = blocksInFlight
	}
	for i := 0; i < threads; i++ {
		s := &shard{p: p, idx: i, in: make(chan *batch, p.depth-1), out: make(chan *chunk, outChunks), free: make(chan *chunk, outChunks+2), poke: make(chan struct{}, 1)}
		op, err := exec.New(sq, exec.Config{Emit: s.onRecord, OnSkip: s.onSkip, ExternalWatermark: true,
			// Latency only: the ticks are the reader's (Config.Now).
			Nanotime: func() int64 { return nanotime() - base + 1 }})
		if err != nil {
			return nil, err
		}
		s.op = op
		p.shards = append(p.shards, s)
	}
	p.rec.Meta = p.shards[0].op.RecordMeta()
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

// pendingStep is the earliest step of an op not yet merged: in flight,
// in a block fed and not yet sequenced, or in the batch being filled.
func (p *par) pendingStep() uint64 {
	for _, b := range [...]*batch{p.firstInflight(), p.firstPending(), p.fill, p.cur} {
		if b != nil && len(b.steps) > 0 {
			return b.steps[0].step
		}
	}
	return math.MaxUint64
}

func (p *par) firstInflight() *batch {
	if len(p.inflight) == 0 {
		return nil
	}
	return p.inflight[0]
}

func (p *par) firstPending() *batch {
	if len(p.pending) == 0 {
		return nil
	}
	return p.pending[0]
}

// push takes one decoded event: the reader's share of apply.
func (p *par) push(row []types.Value) error {
	p.rows++
	op := p.nextOp()
	if p.dedup != nil {
		switch p.dedup.admit(row, nil, p.wm) {
		case dedupCopy:
			p.observe(row)
			return p.dispatchIfFull()
		case dedupBeyond:
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
// with wm the watermark before it: a copy of its row's columns the query
// reads, NULL elsewhere, which the shard hands to its operator where it
// lies. A string cell is copied unless it lies in raw (a block's records,
// which live as long as the batch).
func (p *par) route(b *batch, op uint64, wm int64, row []types.Value, key, raw []byte) int {
	pi := 0
	if len(p.shards) > 1 {
		pi = int(maphash.Bytes(p.seed, key) % uint64(len(p.shards)))
	}
	pt := &b.parts[pi]
	at := len(pt.cells)
	pt.cells = append(pt.cells, p.nulls...)
	for _, j := range p.cols {
		c := row[j]
		if len(c.S) > 0 && !within(raw, c.S) {
			pt.fixes = append(pt.fixes, int32(at+j), int32(len(pt.strs)), int32(len(c.S)))
			pt.strs = append(pt.strs, c.S...)
			c.S = ""
		}
		pt.cells[at+j] = c
	}
	pt.enter(op, wm, at, key)
	return pi
}

// enter adds the item of an event whose row is the part's cells from at
// (copied there by route, or decoded in place: feed_block.go).
func (pt *part) enter(op uint64, wm int64, at int, key []byte) {
	it := item{kind: itemEvent, op: op, wm: wm, row: int32(at), key0: int32(len(pt.keys))}
	pt.keys = append(pt.keys, key...)
	it.key1 = int32(len(pt.keys))
	pt.items = append(pt.items, it)
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
	b.endWM, b.lastOp = p.wm, p.op
	for i := range b.parts {
		b.parts[i].fix()
	}
	p.sent++
	b.seq = p.sent
	for _, s := range p.shards {
		s.in <- b
		s.waiting.Store(false)
	}
	p.inflight = append(p.inflight, b)
	if len(p.inflight) < p.depth && !p.outFull() {
		return nil
	}
	return p.collectOldest()
}

// outFull reports whether a shard's records fill its channel to the
// merge: the shard blocks on it until the reader merges, so the batches in
// flight must not wait for more to be sent (a batch may render more
// records than the channel holds: HOP's finals, an early flush).
func (p *par) outFull() bool {
	for _, s := range p.shards {
		if len(s.out) == cap(s.out) {
			return true
		}
	}
	return false
}

// collectOldest merges the oldest batch in flight.
func (p *par) collectOldest() error {
	b := p.inflight[0]
	p.inflight = append(p.inflight[:0], p.inflight[1:]...)
	return p.collect(b)
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
	for len(p.inflight) > 0 {
		if cerr := p.collectOldest(); err == nil {
			err = cerr
		}
	}
	return err
}

// mark ends a call of the host: its watermark reaches onMark after the
// call's records, when it moved.
func (p *par) mark() {
	if !p.marks || p.wm <= p.lastMark || p.jobs != nil && (p.fill != nil || len(p.pending) > 0) {
		// Unmoved; or the call fed a record, whose mark its block's
		// sequencing sets (feed.go).
		return
	}
	p.lastMark = p.wm
	p.noteStep()
	p.cur.marks = append(p.cur.marks, advance{op: p.op, wm: p.wm})
}

// stop ends the shards' goroutines, after the batch in flight.
func (p *par) stop() {
	if p.stopped {
		return
	}
	for len(p.inflight) > 0 {
		_ = p.collectOldest()
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

// The shard side.

// cleanup stops the goroutines of a driver its host dropped.
func (p *par) cleanup() {
	p.discard = true
	p.stop()
}
