package drive

import (
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/ubiksql/ubik/internal/exec"
)

// The block path of a sharded aggregate (Driver.Feed): its decode node,
// blockFeed, which the driver feeds as it would feed records one by one
// (direct), so the driver has no mode for it. The host's goroutine
// copies each input record into the block being filled; a full block is
// decoded by a worker (the host's goroutine's, or, when a shard's
// goroutine waits for work, that shard's: each has its own decoder and
// admission check, and a shard takes a block between two batches, a batch
// to apply going first), which decodes the block's records, checks
// and keys them (exec.Admission), and splits them into the shards' parts
// of the block's batch, every string cell pointing into the block's own
// bytes (copied only when the decoder unescaped it). Blocks are then
// sequenced in input order on the host's goroutine: the counters, the
// outcome of every record that was not applied cleanly (Config.OnEventError,
// with the host's tag), the watermark and the early ticks, and the batch is
// dispatched to the shards and merged as any other (sharded.go).
//
// The watermark stays a function of the decoded event times in input
// order: a worker records where its block's own maximum event time rises
// (the block-local watermark, with the op of the rise), and each item
// carries the block-local watermark before it; the sequencer knows the
// watermark before the block (batch.startWM), keeps the rises above it
// as the batch's advances, and a shard applies max(item's, startWM)
// before each step, which is exactly the watermark one thread would have
// then. Ops are reserved when a record is fed, three per record (its
// event, the advance it causes, an early flush after it), so they order
// every step as before; an early tick the sequencer decides after record
// i inserts a flush with record i's third op into every part.
//
// With a dedup_key the first copy of a key is decided in input order,
// before anything else (as par.push does): the worker also records each
// record's dedup key, time and where it routed it, and the sequencer
// admits the records one by one, marks a dropped copy's item skipped,
// and computes the watermark itself (a copy beyond the horizon does not
// move it), setting each kept item's.
//
// A sharded aggregate at the head of the chain decodes in blocks when its
// input is JSON lines read by the driver's own decoder and the watermark
// is its own (not external); otherwise the driver's feeder is direct and
// Feed is Push.
// Bounds: a block holds at most Config.BlockEvents records (and is cut
// after 1 MiB of them); at most 2 blocks per shard plus 2 wait to be
// sequenced; past that, or while the jobs queue is full (of the jobs of
// blocks the host's goroutine decoded itself, which stay queued until a
// shard drains them), Feed sequences the oldest first, decoding it itself
// when no shard has taken it: every shard may be blocked on the merge,
// which only the host's goroutine runs, so waiting for one, or for room
// in the queue, could never end.
//
// Who decodes: the host's goroutine decodes each block as it is filled,
// unless a shard's goroutine waits for work (nothing to apply: shard.waiting)
// or, the only shard, is about to (par.shardWaits), and only then is the
// block queued for the shards. So with the fold the slower stage (q5 on
// two threads) the shard only folds, and the reader decodes; with the
// reader the slower (std, or more shards) the shards take decoding over
// as they run out of batches. Shards that took every block decoded
// each block's bytes on a core other than the one that wrote them, and
// the reader waited for them: two threads cost 1.6 times one thread's
// CPU for 1.07 times its speed. Rather than goroutines of their own
// decoding: 2K+1 goroutines handing every block over twice cost half
// again the CPU of one thread (each block's bytes and rows crossing cores
// twice, a wake-up at each hand-off).

const (
	defaultBlockEvents = 4096
	blockBytes         = 1 << 20
	opsPerRecord       = 3
)

// feeder is how a driver takes the records of Feed, with the host's tags:
// decoded one by one on the driver's goroutine and pushed to the head of
// the chain (direct), or, when the head is a sharded aggregate that
// decodes its own input, in blocks on the shards' goroutines (blockFeed,
// the aggregate's decode node). The driver calls its feeder and never
// asks which it has.
type feeder interface {
	feed(raw []byte, tag int64) error
	// reportAt counts an event the host could not hand over, and
	// reports err for it with the tag, in input order.
	reportAt(tag int64, err error) error
	// drain sequences every record fed so far: any call that delivers
	// records starts with it.
	drain() error
	// outcome hands a fed record's error (err, not nil) to
	// Config.OnEventError, or returns it when it is not one event's or
	// there is no callback; on the block path an outcome comes as its
	// block is sequenced, so a later error of the call is counted only.
	outcome(err error, tag int64, raw []byte) error
}

// Feed hands over one input record, as Push does, with a tag of the
// host's (a line number). Its outcome, when it is not applied cleanly (it
// is malformed, or fails to evaluate), reaches Config.OnEventError with
// the tag, the record and the *EventError Push would return, in input
// order; without the callback it is only counted. On a parallel driver
// the callback may run during a later Feed or any call that delivers
// records (Flush, Tick, EmitEarly, AdvanceWatermark, CloseOpenWindows,
// Close, Checkpoint), which first sequence every record fed: an outcome
// waits for the records of the events before it, whose rendering may
// fail too (shardskip.go). On one thread with Config.BlockEvents the same
// holds for a block of records (feed_solo.go); otherwise Feed is Push,
// and the callback runs before it returns.
// raw is copied. The error returned is fatal.
func (d *Driver) Feed(raw []byte, tag int64) error { return d.feeder.feed(raw, tag) }

// ReportMalformedAt counts one event the host could not even hand over
// (a line too long to read), as ReportMalformed, and reports err for it
// through Config.OnEventError with the tag, in input order (the record is
// nil).
func (d *Driver) ReportMalformedAt(tag int64, err error) error { return d.feeder.reportAt(tag, err) }

// direct is the feeder of a driver that decodes on its own goroutine:
// Feed is Push.
type direct struct{ d *Driver }

func (x direct) feed(raw []byte, tag int64) error {
	d := x.d
	if d.fatal != nil {
		return d.fatal
	}
	if _, ok := d.agg.(*sharded); !ok {
		// One thread: the outcome is known when Push returns, and the
		// bookkeeping below, for the shards' skipped records, is not
		// needed on this per-event path.
		return x.outcome(d.Push(raw), tag, raw)
	}
	s := heldBy(d)
	var at uint64
	if s != nil {
		at = s.p.op + 1
	}
	d.feeding, d.feedTag = true, tag
	err := d.Push(raw)
	d.feeding = false
	if s != nil && s.hold(at, tag, raw, err) {
		// On several threads its outcome waits for the records of the
		// events before it (shardskip.go).
		return nil
	}
	return x.outcome(err, tag, raw)
}

func (x direct) reportAt(tag int64, err error) error {
	d := x.d
	d.ReportMalformed()
	ee := &EventError{Seq: d.n.Events, Err: err}
	if s := heldBy(d); s != nil && s.hold(s.p.op+1, tag, nil, ee) {
		return nil
	}
	if d.onEventError != nil {
		d.onEventError(tag, nil, ee)
	}
	return nil
}

func (x direct) drain() error { return nil }

func (x direct) outcome(err error, tag int64, raw []byte) error {
	if err == nil {
		return nil // before ee, which errors.As moves to the heap
	}
	var ee *EventError
	if x.d.onEventError != nil && errors.As(err, &ee) {
		x.d.onEventError(tag, raw, ee)
		return nil
	}
	return err
}

// blockFeed is the decode node of a sharded aggregate that reads its
// query's own JSON lines: the records of Feed go to the shards'
// goroutines in blocks, and are sequenced in input order into the
// driver's counters and the aggregate's batches.
type blockFeed struct {
	d *Driver
	s *sharded
	p *par
}

func (f *blockFeed) feed(raw []byte, tag int64) error {
	if err := f.d.admit(0); err != nil {
		return err
	}
	b := f.blockAppend(raw, tag)
	if len(b.blk.ends) >= f.p.blockEvents || len(b.blk.raw) >= blockBytes {
		return f.submit()
	}
	return nil
}

func (f *blockFeed) reportAt(tag int64, err error) error {
	if f.d.fatal != nil {
		return f.d.fatal
	}
	b := f.blockAppend(nil, tag)
	k := &b.blk
	k.host = append(k.host, outcome{idx: int32(len(k.ends) - 1), kind: outReported, err: err})
	if len(k.ends) >= f.p.blockEvents {
		return f.submit()
	}
	return nil
}

// outcome: a record's outcome reached the host as its block was
// sequenced; one a later step of the call made is counted only (a block
// does not know which of its records a graph's reader failed for).
func (f *blockFeed) outcome(error, int64, []byte) error { return nil }

func (f *blockFeed) blockAppend(raw []byte, tag int64) *batch {
	p := f.p
	b := p.fill
	if b == nil {
		b = p.newBatch()
		b.blk.base = p.op
		p.fill = b
	}
	if n := len(b.steps); n == 0 || b.steps[n-1].step != p.step {
		// The record's ops are of the host's step now (a graph's).
		b.steps = append(b.steps, opStep{op: p.op + 1, step: p.step})
	}
	p.op += opsPerRecord
	k := &b.blk
	k.raw = append(k.raw, raw...)
	k.ends = append(k.ends, int32(len(k.raw)))
	k.tags = append(k.tags, tag)
	return b
}

// submit hands the block being filled to the shards, then sequences the
// blocks already decoded.
func (f *blockFeed) submit() error {
	p := f.p
	b := p.fill
	p.fill = nil
	for len(p.pending) >= cap(p.jobs) {
		if err := f.sequenceNext(); err != nil {
			return err
		}
	}
	// A shard blocked on its records merges first, not after this
	// block is decoded.
	for len(p.inflight) > 0 && p.outFull() {
		if err := f.s.parErr(p.collectOldest()); err != nil {
			return err
		}
	}
	b.blk.done = make(chan struct{})
	p.pending = append(p.pending, b) // pending before any merge: its steps are (pendingStep)
	// The blocks decoded go first (b is not): their batches give the
	// shards work.
	if err := f.sequenceDone(); err != nil {
		return err
	}
	if !p.shardWaits() {
		// No shard waits for work: this goroutine decodes the block,
		// and the shards fold.
		p.hostW.decode(b)
		close(b.blk.done)
		p.hostTook.Add(1)
		return f.sequenceDone()
	}
	p.tickets++
	b.blk.ticket.Store(p.tickets)
	for !p.offer(job{b, p.tickets}) {
		// The queue is full of the jobs of blocks this goroutine decoded
		// itself, which only a shard drains, and the shards may all wait
		// for the merge, which only this goroutine runs: sequencing the
		// oldest block (decoding it here if need be) moves the merge.
		if err := f.sequenceNext(); err != nil {
			return err
		}
		if len(p.pending) == 0 {
			return nil // b itself, decoded here: its job is not needed
		}
	}
	return f.sequenceDone()
}

// sequenceDone sequences the oldest blocks while they are decoded.
func (f *blockFeed) sequenceDone() error {
	p := f.p
	for len(p.pending) > 0 {
		select {
		case <-p.pending[0].blk.done:
			if err := f.sequenceNext(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// shardWaits reports whether a shard waits for work (a block to decode),
// or, with one shard, is about to: it has at most one batch left to
// apply and no block offered to it that it has not taken. A block offered
// then is decoded between its batches, rather than after it parked and
// this goroutine woke it (a wake-up costs 0.1 to 2 ms on a virtual
// machine, most of a block's decoding), so the stages stay balanced.
func (p *par) shardWaits() bool {
	for _, s := range p.shards {
		if s.waiting.Load() {
			return true
		}
	}
	if len(p.shards) != 1 || p.sent-p.shards[0].applied.Load() > 1 {
		return false
	}
	for _, b := range p.pending {
		if b.blk.ticket.Load() != 0 {
			return false // one offered, not taken yet
		}
	}
	return true
}

// offer queues j for the shards unless the queue is full.
func (p *par) offer(j job) bool {
	select {
	case p.jobs <- j:
		return true
	default:
		return false
	}
}

// drain sequences every record fed so far: any other call of a parallel
// driver starts with it.
func (f *blockFeed) drain() error {
	d, p := f.d, f.p
	if p.fill == nil && len(p.pending) == 0 {
		return nil
	}
	if d.fatal != nil {
		return d.fatal
	}
	if p.fill != nil {
		if err := f.submit(); err != nil {
			return err
		}
	}
	for len(p.pending) > 0 {
		if err := f.sequenceNext(); err != nil {
			return err
		}
	}
	return nil
}

// sequenceNext takes the oldest block, once decoded, in input order: its
// counters, outcomes, watermark and ticks, then its batch to the shards.
func (f *blockFeed) sequenceNext() error {
	d, p := f.d, f.p
	b := p.pending[0]
	// Decoding it here beats waiting, and takes the place of a shard
	// busy elsewhere (blocked on the merge, which only this goroutine
	// runs).
	if t := b.blk.ticket.Load(); t != 0 && p.hostW.take(job{b, t}) {
		p.hostTook.Add(1)
	}
	<-b.blk.done
	p.pending = append(p.pending[:0], p.pending[1:]...)
	k := &b.blk
	if d.fatal != nil {
		return d.fatal
	}
	if k.err != nil {
		d.fatal = k.err
		return k.err
	}
	// Steps queued before the block (PushRow, a flush) go first.
	if c := p.cur; c.events > 0 || len(c.advances) > 0 || len(c.marks) > 0 {
		if err := p.dispatch(); err != nil {
			return f.s.parErr(err)
		}
	}
	b.startWM = p.wm
	localWM := int64(math.MinInt64)
	ai, oi := 0, 0
	start := int32(0)
	var flushes []advance
	for i, end := range k.ends {
		d.n.Records++
		evOp := k.base + opsPerRecord*uint64(i) + 1
		var oc *outcome
		if oi < len(k.out) && k.out[oi].idx == int32(i) {
			oc = &k.out[oi]
			oi++
		}
		if p.dedup != nil && k.info[i].decoded {
			if !f.admitCopy(b, i, evOp) {
				oc = nil // no check ran on a dropped copy
			}
			localWM = p.wm
		}
		applied, err := f.count(k, i, k.raw[start:end:end], oc)
		if err != nil {
			return err
		}
		k.seqs = append(k.seqs, d.n.Events)
		start = end
		for p.dedup == nil && ai < len(k.local) && k.local[ai].op <= evOp+1 {
			localWM = k.local[ai].wm
			ai++
		}
		if wm := max(b.startWM, localWM); p.marks && wm > p.lastMark {
			// The end of the record's call, for a graph's readers.
			p.lastMark = wm
			b.marks = append(b.marks, advance{op: evOp + 2, wm: wm})
		}
		if applied && f.tickDue() {
			// Inserted after the loop: the dedup marks items by index.
			flushes = append(flushes, advance{op: evOp + 2, wm: localWM})
		}
	}
	f.seal(b, flushes)
	return f.s.parErr(p.send(b))
}

// admitCopy runs the input dedup on record i of block b, in input order
// as par.push does, and moves the watermark by its time. It reports
// whether the record goes on (false: a dropped copy, its item skipped).
func (f *blockFeed) admitCopy(b *batch, i int, evOp uint64) bool {
	p, k := f.p, &b.blk
	li := &k.info[i]
	var it *item
	if li.part >= 0 {
		it = &b.parts[li.part].items[li.item]
	}
	v := p.dedup.admitKey(k.dkeys[li.key0:li.key1], li.hasKey, li.ts, p.wm)
	switch {
	case v != dedupKeep:
		if it != nil {
			it.kind = itemSkip
		}
	case li.filtered:
		p.filtered++
	case it != nil:
		it.wm = p.wm
	}
	if v != dedupBeyond && li.hasTS && li.ts > p.maxTime {
		p.maxTime = li.ts
		if wm := exec.SatAdd(li.ts, -p.delay); wm > p.wm {
			p.wm = wm
			p.dedup.advance(wm)
			b.advances = append(b.advances, advance{op: evOp + 1, wm: wm})
		}
	}
	return v == dedupKeep
}

// count adds record i of block k (raw) to the counters and reports its
// outcome oc to the host. applied is false for a header or a malformed
// record; a header that does not fit or an error that is not one event's
// is fatal.
func (f *blockFeed) count(k *block, i int, raw []byte, oc *outcome) (applied bool, err error) {
	d, p := f.d, f.p
	if oc == nil {
		d.n.Events++
		d.n.Applied++
		p.rows++
		return true, nil
	}
	switch oc.kind {
	case outHeader:
		d.n.Headers++
		return false, nil
	case outMalformed, outReported:
		var he *exec.HeaderError
		if errors.As(oc.err, &he) {
			d.fatal = oc.err
			return false, oc.err
		}
		d.n.Events++
		d.n.Malformed++
		f.report(k, i, oc.err, oc.kind == outReported)
		return false, nil
	}
	// outEval
	var ee *exec.EvalError
	if !errors.As(oc.err, &ee) {
		d.fatal = oc.err
		return false, oc.err
	}
	d.n.Events++
	d.n.Applied++
	p.rows++
	p.evalErrs++
	f.report(k, i, oc.err, false)
	return true, nil
}

// tickDue reports whether an early flush is due after an applied event,
// the processing clock read every tickEvery events as Driver.apply does.
func (f *blockFeed) tickDue() bool {
	d := f.d
	if d.every <= 0 || d.hostTicks {
		return false
	}
	d.sinceTick++
	if d.sinceTick < tickEvery {
		return false
	}
	d.sinceTick = 0
	now := d.now()
	if now.Before(d.nextEarly) {
		return false
	}
	d.nextEarly = now.Add(d.every)
	return true
}

// seal completes a sequenced block's batch: its early flushes, and without
// a dedup its watermark rises and counters.
func (f *blockFeed) seal(b *batch, flushes []advance) {
	d, p, k := f.d, f.p, &b.blk
	for _, fl := range flushes {
		b.insertFlush(fl.op, fl.wm)
	}
	if p.dedup == nil {
		p.filtered += k.filtered
		for _, a := range k.local {
			if a.wm > p.wm {
				b.advances = append(b.advances, a)
				p.wm = a.wm
			}
		}
		p.maxTime = max(p.maxTime, k.maxTime)
	}
	if k.hasTime {
		d.in.mark, d.in.marked = k.lastTime-d.q.Source.WatermarkDelay, true
	}
}

// report keeps record i's outcome for the host: it reaches it as the
// block is merged, in input order with the records the shards skipped
// (shardskip.go).
func (f *blockFeed) report(k *block, i int, err error, reported bool) {
	if f.d.onEventError != nil {
		k.later = append(k.later, later{idx: int32(i), err: err, reported: reported})
	}
}

// insertFlush adds an early flush at op to every part (after the steps
// before it), with wm the block-local watermark then.
func (b *batch) insertFlush(op uint64, wm int64) {
	for i := range b.parts {
		pt := &b.parts[i]
		j := sort.Search(len(pt.items), func(j int) bool { return pt.items[j].op > op })
		pt.items = slices.Insert(pt.items, j, item{kind: itemFlush, op: op, wm: wm})
	}
	b.events++
}
