package drive

import (
	"math"
	"runtime"
	"slices"
)

// The merge of the sharded aggregate (sharded.go): the reader takes a
// batch's records from every shard and delivers them by tag, so the
// changelog is byte for byte the one thread's.

// collect merges the shards' records of b into the changelog.
func (p *par) collect(b *batch) error {
	m := merge{p: p, out: p.out.Value(), heads: make([]mergeHead, len(p.shards)), marks: b.marks, steps: b.steps}
	if m.out == nil {
		p.discard = true // the driver is gone (its cleanup stops the shards)
	}
	for i, s := range p.shards {
		for end := nanotime() + spinNanos; !s.ready(b) && nanotime() < end; {
			runtime.Gosched() // a short poll before parking (shard.spin)
		}
		for !s.ready(b) {
			<-s.poke
		}
		m.heads[i].c = <-s.out
	}
	var first error
	for {
		h := m.next()
		if h == nil {
			break
		}
		r, key0, row0 := &h.c.recs[h.i], h.key0, h.row0
		h.i, h.key0, h.row0 = h.i+1, r.val1, r.row1
		if first == nil && !p.discard {
			first = m.deliver(h.c, r, key0, row0)
		}
	}
	if first == nil && !p.discard {
		m.marksUpTo(math.MaxUint64)
	}
	p.outWM = max(p.outWM, b.endWM)
	skips := p.skips[:0]
	for i, h := range m.heads {
		p.lastStats[i] = h.c.stats
		if h.c.err != nil && first == nil {
			first = h.c.err
		}
		skips = append(skips, h.c.skips...)
		p.shards[i].recycle(h.c)
	}
	if first == nil && !p.discard && m.out.onSkips != nil {
		slices.SortStableFunc(skips, func(a, b skip) int { return a.tag.cmp(b.tag) })
		m.out.onSkips(b, skips)
	}
	clear(skips)
	p.skips = skips[:0]
	p.recycle(b)
	if first != nil {
		p.discard = true
	}
	return first
}

// ready reports whether s has applied b, or filled its records channel
// (it then waits for the merge).
func (s *shard) ready(b *batch) bool {
	return s.applied.Load() >= b.seq || len(s.out) == cap(s.out)
}

// recycle empties a merged batch for reuse.
func (p *par) recycle(b *batch) {
	for i := range b.parts {
		b.parts[i].reset()
	}
	b.advances, b.marks, b.steps, b.events, b.startWM = b.advances[:0], b.marks[:0], b.steps[:0], 0, math.MinInt64
	b.blk.reset()
	p.spare = append(p.spare, b)
}

// merge is the k-way merge of one batch's records by tag, with the
// batch's call ends (marks) and steps between them.
type merge struct {
	p     *par
	out   *parOut // nil once the driver is gone
	heads []mergeHead
	marks []advance
	steps []opStep
}

// mergeHead is a shard's next record: in chunk c at i, its key from
// key0 in c.bytes and its row from row0 in c.cells (where the record
// before it ends).
type mergeHead struct {
	c          *chunk
	i          int
	key0, row0 int32
}

// next returns the head holding the least tag, nil when every shard's
// records of the batch are merged.
func (m *merge) next() *mergeHead {
	if len(m.heads) == 1 {
		return m.nextOne()
	}
	best := -1
	for i := range m.heads {
		h := &m.heads[i]
		for h.i >= len(h.c.recs) && !h.c.done {
			m.p.shards[i].recycle(h.c)
			h.c, h.i, h.key0, h.row0 = <-m.p.shards[i].out, 0, 0, 0
		}
		if h.i < len(h.c.recs) && (best < 0 || h.c.recs[h.i].less(&m.heads[best].c.recs[m.heads[best].i])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return &m.heads[best]
}

// nextOne is next with one shard, whose records are in order.
func (m *merge) nextOne() *mergeHead {
	h := &m.heads[0]
	for h.i >= len(h.c.recs) {
		if h.c.done {
			return nil
		}
		m.p.shards[0].recycle(h.c)
		h.c, h.i, h.key0, h.row0 = <-m.p.shards[0].out, 0, 0, 0
	}
	return h
}

// deliver hands record r of c, whose key starts at key0 and row at row0
// (and, first, its row) to the host, after the marks of the calls
// before it.
func (m *merge) deliver(c *chunk, r *outRec, key0, row0 int32) error {
	p := m.p
	m.marksUpTo(r.op)
	m.stepOf(r.op)
	p.rec.Key = c.bytes[key0:r.key1:r.key1]
	p.rec.Value = c.bytes[r.key1:r.val1:r.val1]
	p.rec.Meta.Final, p.rec.Meta.Revision = r.final, r.revision
	p.rec.Meta.WindowStart, p.rec.Meta.WindowEnd = r.winStart, r.winEnd
	if m.out.onRow != nil {
		if err := m.out.onRow(c.cells[row0:r.row1:r.row1]); err != nil {
			return err
		}
	}
	return m.out.emit(&p.rec)
}

// marksUpTo hands the host the marks of the calls that ended before op.
func (m *merge) marksUpTo(op uint64) {
	for len(m.marks) > 0 && m.marks[0].op < op {
		m.stepOf(m.marks[0].op)
		m.out.onMark(m.marks[0].wm)
		m.marks = m.marks[1:]
	}
}

// stepOf sets outStep to the step of op (ops come in order).
func (m *merge) stepOf(op uint64) {
	for len(m.steps) > 1 && m.steps[1].op <= op {
		m.steps = m.steps[1:]
	}
	if len(m.steps) > 0 {
		m.p.outStep = m.steps[0].step
	}
}
