package drive

import (
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// The shards' side of the block path (feed.go): a block of input records,
// the outcome of each record that was not applied cleanly, and the worker
// that decodes, checks and keys a block's records into the shards' parts
// of its batch.

type outcomeKind uint8

const (
	outMalformed outcomeKind = iota // the decoder rejected the record
	outEval                         // the admission check failed (an evaluation error)
	outHeader                       // a header record (not an event)
	outReported                     // the host could not hand the record over (ReportMalformedAt)
)

// later is the outcome of a block's record for the host, which reaches it
// as the block is merged (shardskip.go).
type later struct {
	idx      int32
	err      error
	reported bool // the host could not hand the record over
}

// outcome is a record of a block that was not applied cleanly.
type outcome struct {
	idx  int32
	kind outcomeKind
	err  error
}

// block is a batch's input records on the block path.
type block struct {
	raw  []byte  // the records, back to back
	ends []int32 // each record's end in raw
	tags []int64 // the host's tags
	host []outcome
	base uint64 // record i has ops base+3i+1 (event), +2 (its advance), +3 (a flush after it)
	// Set as the block is sequenced: each record's sequence number among
	// the driver's events, and the outcomes the host has yet to hear of.
	seqs  []int64
	later []later

	// The worker's results.
	out      []outcome // every record not applied cleanly, by index (host's included)
	local    []advance // where the block-local watermark rises
	filtered int64
	maxTime  int64 // the block's largest event time (MinInt64: none)
	lastTime int64
	hasTime  bool
	err      error         // a worker's panic
	done     chan struct{} // closed once decoded
	// ticket is the block's job number while no goroutine has taken it
	// to decode it, 0 after: a job whose ticket no longer matches (the
	// reader took the block itself, and the batch may be in use again)
	// is stale.
	ticket atomic.Uint64

	// With a dedup_key, what the sequencer needs to decide each record's
	// first copy in input order: by record.
	info  []lineInfo
	dkeys []byte
}

// lineInfo is one decoded record of a block, for the dedup.
type lineInfo struct {
	part, item int32 // where it was routed (part -1: not routed)
	key0, key1 int32 // its dedup key in dkeys
	ts         int64
	decoded    bool
	hasKey     bool
	hasTS      bool
	filtered   bool
}

func (k *block) reset() {
	k.raw, k.ends, k.tags, k.host, k.out, k.local = k.raw[:0], k.ends[:0], k.tags[:0], k.host[:0], k.out[:0], k.local[:0]
	k.info, k.dkeys = k.info[:0], k.dkeys[:0]
	clear(k.later)
	k.seqs, k.later = k.seqs[:0], k.later[:0]
	k.base, k.filtered, k.maxTime, k.lastTime, k.hasTime, k.err, k.done = 0, 0, math.MinInt64, 0, false, nil, nil
}

// within reports whether s lies in buf.
func within(buf []byte, s string) bool {
	if len(buf) == 0 {
		return false
	}
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return p >= b && p+uintptr(len(s)) <= b+uintptr(len(buf))
}

// worker decodes blocks: one per shard's goroutine, and the host's.
type worker struct {
	p   *par
	dec *exec.Decoder
	adm *exec.Admission
	key []byte
	_   [cacheLine]byte // the workers are small and written for every event, each by its own goroutine: one to a line
}

// startBlocks turns the block path on: every shard's goroutine decodes
// blocks between its batches, and the reader decodes a block it waits for
// that none has taken yet.
func (p *par) startBlocks(blockEvents int) {
	if blockEvents < 1 {
		blockEvents = defaultBlockEvents
	}
	p.blockEvents = blockEvents
	n := len(p.shards)
	p.jobs = make(chan job, 2*n+2)
	for _, s := range p.shards {
		s.w = p.newWorker()
	}
	p.hostW = p.newWorker()
}

func (p *par) newWorker() *worker {
	return &worker{p: p, dec: exec.NewQueryDecoder(p.q), adm: exec.NewAdmission(p.q)}
}

// job is a block to decode, with the ticket it was submitted with.
type job struct {
	b      *batch
	ticket uint64
}

// take decodes the job's block unless another goroutine took it first.
func (w *worker) take(j job) bool {
	if w != w.p.hostW && w.p.testTake != nil {
		w.p.testTake()
	}
	if !j.b.blk.ticket.CompareAndSwap(j.ticket, 0) {
		return false
	}
	w.decode(j.b)
	close(j.b.blk.done)
	return true
}

func (w *worker) decode(b *batch) {
	k := &b.blk
	defer Recover(&k.err)
	inPlace := len(b.parts) == 1 && w.dec.Width() == w.p.width
	if inPlace {
		// One shard: each row is decoded in its place in the batch
		// (w.inPlace). Room for every row, so the cells do not move.
		pt := &b.parts[0]
		pt.cells = slices.Grow(pt.cells[:0], len(k.ends)*w.p.width)
		defer w.dec.UseRow(w.dec.UseRow(nil)) // the decoder's own row back after the block
	}
	tc := w.p.q.Source.TimeCol
	lt := localTime{maxT: math.MinInt64, wm: math.MinInt64}
	h := 0
	start := int32(0)
	for i, end := range k.ends {
		line := k.raw[start:end:end]
		start = end
		var li *lineInfo
		if w.p.dedup != nil {
			k.info = append(k.info, lineInfo{part: -1})
			li = &k.info[i]
		}
		if h < len(k.host) && k.host[h].idx == int32(i) {
			k.out = append(k.out, k.host[h])
			h++
			continue
		}
		at := -1
		if inPlace {
			at = w.inPlace(&b.parts[0])
		}
		row, err := w.dec.Decode(line)
		if at >= 0 && (len(row) != w.p.width || &row[0] != &b.parts[0].cells[at]) {
			// Not decoded in its place (a deriver's row, an error):
			// routed as a copy, if at all.
			b.parts[0].cells, at = b.parts[0].cells[:at], -1
		}
		if err != nil {
			k.out = append(k.out, outcome{idx: int32(i), kind: outMalformed, err: err})
			continue
		}
		if row == nil {
			k.out = append(k.out, outcome{idx: int32(i), kind: outHeader})
			continue
		}
		op := k.base + opsPerRecord*uint64(i) + 1
		if li != nil {
			w.dedupInfo(k, li, row, tc)
		}
		w.place(b, i, li, op, lt.wm, row, at)
		// Every decoded event's time counts, whatever failed to
		// evaluate (as exec.Operator and par.observe).
		if tc >= 0 && !row[tc].Null {
			lt.observe(w.p, k, op, row[tc].I)
		}
	}
	k.maxTime = lt.maxT
}

// localTime is a block's own maximum event time and the block-local
// watermark it gives.
type localTime struct{ maxT, wm int64 }

// observe records an event's time: where the block's maximum rises, the
// block-local watermark rises with it (from the op after the event's).
func (lt *localTime) observe(p *par, k *block, op uint64, ts int64) {
	k.lastTime, k.hasTime = ts, true
	if ts <= lt.maxT {
		return
	}
	lt.maxT = ts
	if !p.external {
		lt.wm = exec.SatAdd(ts, -p.delay)
		k.local = append(k.local, advance{op: op + 1, wm: lt.wm})
	}
}

// dedupInfo records what the sequencer needs to admit record i in input
// order: its dedup key and event time.
func (w *worker) dedupInfo(k *block, li *lineInfo, row []types.Value, tc int) {
	li.decoded = true
	li.key0 = int32(len(k.dkeys))
	k.dkeys, li.hasKey = w.p.dedup.appendKey(k.dkeys, row)
	li.key1 = int32(len(k.dkeys))
	if tc >= 0 && !row[tc].Null {
		li.ts, li.hasTS = row[tc].I, true
	}
}

// inPlace, with one shard, makes the decoder write the next row in its
// place in the shard's part pt (at the index it returns), so the row is
// not copied there. With several shards the key, which picks the part,
// is known only once the row is decoded.
func (w *worker) inPlace(pt *part) int {
	at, n := len(pt.cells), w.p.width
	if cap(pt.cells)-at < n {
		pt.cells = slices.Grow(pt.cells, n)
	}
	pt.cells = pt.cells[:at+n]
	w.dec.UseRow(pt.cells[at : at+n : at+n])
	return at
}

// own copies into the part's strs each string of the row decoded in place
// at at that does not lie in raw (the decoder unescaped it into its own
// buffer, which the next record reuses).
func (w *worker) own(pt *part, at int, raw []byte) {
	for _, j := range w.p.strCols {
		c := &pt.cells[at+j]
		if len(c.S) > 0 && !within(raw, c.S) {
			pt.fixes = append(pt.fixes, int32(at+j), int32(len(pt.strs)), int32(len(c.S)))
			pt.strs = append(pt.strs, c.S...)
			c.S = ""
		}
	}
}

// place checks and keys record i's row and routes it to its shard's part
// of the batch (or records its evaluation error, or counts it filtered).
// at >= 0: the row lies in the part at at (inPlace), where it stays if
// it is routed.
func (w *worker) place(b *batch, i int, li *lineInfo, op uint64, wm int64, row []types.Value, at int) {
	k := &b.blk
	key, pass, err := w.adm.Check(w.key[:0], row)
	if at >= 0 && (err != nil || !pass) {
		b.parts[0].cells = b.parts[0].cells[:at] // not routed: its place is the next row's
	}
	switch {
	case err != nil:
		k.out = append(k.out, outcome{idx: int32(i), kind: outEval, err: err})
	case !pass:
		k.filtered++
		if li != nil {
			li.filtered = true
		}
	default:
		w.key = key
		b.events++
		pi := 0
		if at >= 0 {
			w.own(&b.parts[0], at, k.raw)
			b.parts[0].enter(op, wm, at, key)
		} else {
			pi = w.p.route(b, op, wm, row, key, k.raw)
		}
		if li != nil {
			li.part, li.item = int32(pi), int32(len(b.parts[pi].items)-1)
		}
	}
}
