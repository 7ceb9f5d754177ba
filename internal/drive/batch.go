package drive

import (
	"fmt"
	"unsafe"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// What passes between a sharded aggregate's reader and its shards: a batch
// of steps split into the shards' parts, and the tagged records a shard
// renders back, in chunks (sharded.go).

// tag orders a record among the records of every shard.
type tag struct {
	op    uint64
	class uint8 // 0 change, 1 final, 2 flush
	a     int64
	b     uint64
}

func (t tag) cmp(u tag) int {
	switch {
	case t.less(u):
		return -1
	case u.less(t):
		return 1
	}
	return 0
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
	lastOp   uint64 // the reader's last op when it sent the batch
	seq      uint64 // its number among the batches sent (par.sent)
	blk      block  // a block of input records decoded by a worker (feed.go); empty otherwise
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

// outRec is one record of a chunk: its tag's fields, the metadata that
// varies by record (the operator's name, windowing and window positions
// are the same for every record: par.rec keeps them), and where its bytes
// and row end. A record's key starts where the record before it in the
// chunk ends (its value and row where its key and the row before end).
// Flat and free of pointers, it fills one cache line: a shard writes one
// for every record and the reader reads it on the other core, and the
// collector neither scans the chunk nor bars the shard's writes to it.
type outRec struct {
	op         uint64
	a          int64
	b          uint64
	revision   uint64
	winStart   int64
	winEnd     int64
	key1, val1 int32
	row1       int32 // the projected row in chunk.cells (par.onRow)
	class      uint8
	final      bool
}

// less orders r before u by their tags (tag.less).
func (r *outRec) less(u *outRec) bool {
	if r.op != u.op {
		return r.op < u.op
	}
	if r.class != u.class {
		return r.class < u.class
	}
	if r.a != u.a {
		return r.a < u.a
	}
	return r.b < u.b
}

// chunk is a run of a shard's records. The last chunk of a batch has
// done set, the shard's stats after the batch, its fatal error, and the
// records it skipped over the batch.
type chunk struct {
	recs  []outRec
	bytes []byte
	cells []types.Value
	done  bool
	stats exec.Stats
	err   error
	skips []skip
}

// skip is a record a shard skipped for an evaluation error (a HAVING or
// SELECT that failed to render it, an aggregate that failed to fold its
// event), tagged as the record would have been: the merge hands it to
// the host's call that one thread would have returned it from.
type skip struct {
	tag tag
	err *exec.EvalError
}

// advance moves the watermark (no shard needs to hear of it now: each
// applies it before its next step).
func (p *par) advance(wm int64) {
	if wm <= p.wm {
		return
	}
	p.wm = wm
	if p.dedup != nil {
		p.dedup.advance(wm)
	}
	p.cur.advances = append(p.cur.advances, advance{op: p.nextOp(), wm: wm})
}

// MarkCall ends a call of a host that reads the watermark after every
// call: on several threads, the watermark reaches Config.OnMark in the
// merged stream; on one thread it does nothing (read Watermark).
func (d *Driver) MarkCall() { d.agg.mark() }

// SetStep tells a driver on several threads the step of the host's calls
// that follow (a graph's, inbox.go): its records and rows carry it, as
// OutStep, when they reach Emit, OnRow and OnMark.
func (d *Driver) SetStep(s uint64) { d.agg.setStep(s) }

// OutStep is the step of the call that made the record, row or marker
// being delivered (a driver on several threads).
func (d *Driver) OutStep() uint64 { return d.agg.outStep() }

// PendingStep is the earliest step whose records a driver on several
// threads has not all delivered (math.MaxUint64: none; one thread
// delivers as it goes).
func (d *Driver) PendingStep() uint64 { return d.agg.pendingStep() }

// Sharded reports whether the driver's aggregate runs on several threads.
func (d *Driver) Sharded() bool { return d.agg.threads() > 1 }
