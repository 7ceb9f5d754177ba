package drive

import (
	"errors"
	"math"
	"sort"
)

// The records a sharded aggregate skipped for an evaluation error (a
// HAVING or SELECT that failed to render a record, an aggregate that
// failed to fold an event): the shards tag each as the record would have
// been (shard.go), and the merge hands them over in one thread's order
// after their batch's records. Each reaches the host as one thread's
// would: one error per host call, the first in that order, the event's
// own error first.
//
//   - A record fed with a tag (Feed): Config.OnEventError, with the tag,
//     the record and the *EventError one thread reports for it. The other
//     outcomes of the records fed wait for the records before them too
//     (a block's until its merge; one fed one by one, held), so every
//     outcome reaches the host in input order.
//   - An event pushed without a tag (Push, PushRow): its records reach
//     Emit up to two batches after its push, and its *EventError is
//     returned, in input order, by a later push that has no error of its
//     own (one each); those still waiting at Close are counted only.
//   - A call that is not a push (AdvanceWatermark, Tick, EmitEarly,
//     CloseOpenWindows, Close) delivers every record before it returns,
//     so it returns the error of its own records, as one thread does.
//
// Behind a join the host's calls are the join's (joinEnv.pushed): a push
// of a record of either input takes the ops of the joined rows it makes
// and of the watermark they move, and is the call a skipped record of
// those ops is handed to, as above (a record of the second input is
// never fed: its error is returned by a later push of that input, as an
// event's by a later push of the first). A fed event's outcome is held
// only once the second input has ended: before, the
// host hears of the second input's records as it pushes them, and of
// the fed events' as they are pushed (their skipped records' as they are
// merged).

// evCall is the ops of one event at the head of the chain: its own, the
// watermark advance it caused, an early tick after it.
type evCall struct {
	op0, op1   uint64
	seq, tag   int64
	fed        bool  // by Feed: tag is the host's
	in         uint8 // the input it was pushed on (a join's second: 1)
	raw0, raw1 int32 // its record in sharded.evRaw, when fed and reported
}

// skipState is what a sharded aggregate keeps to hand skipped records over.
type skipState struct {
	calls   []evCall // the events whose ops may not be merged yet, by op, from head on
	head    int
	evRaw   []byte     // their records, when fed and reported
	pending [2][]error // the errors of events pushed without a tag, not returned yet, per input, in input order
	own     error      // the first error of the records of the call running now (not a push)
	last    uint64     // the first op of the event whose error was handed over last
	outs    []held     // the outcomes of events fed one by one, held until the ops before them are merged
}

// held is the outcome of an event fed one by one (direct), which reaches
// OnEventError once every op before at is merged: its own error comes
// before its records', after those of the events before it.
type held struct {
	at  uint64 // the event's first op, or the next op for one that took none (malformed)
	tag int64
	raw []byte // a copy; nil for a record the host could not hand over
	err *EventError
	ops bool // the event took ops from at on (it was not malformed)
}

// called records the ops of the event just taken at the head of the
// chain, from op0 on.
func (s *sharded) called(op0 uint64) {
	if s.head {
		s.record(op0, s.d.n.Events, s.d.raw, 0)
	}
}

// record records the ops from op0 on as those of the host's push of one
// record (raw), the seq-th of input in: an event at the head of the
// chain, or a record of a join's input.
func (s *sharded) record(op0 uint64, seq int64, raw []byte, in int) {
	d := s.d
	if op0 > s.p.op {
		return
	}
	c := evCall{op0: op0, op1: s.p.op, seq: seq, tag: d.feedTag, fed: d.feeding, in: uint8(in)}
	if c.fed && d.onEventError != nil {
		c.raw0 = int32(len(s.sk.evRaw))
		s.sk.evRaw = append(s.sk.evRaw, raw...)
		c.raw1 = int32(len(s.sk.evRaw))
	}
	s.sk.calls = append(s.sk.calls, c)
}

// onSkips takes the records the shards skipped applying b, in one
// thread's order (parOut.onSkips), and the admission outcomes of b's
// block waiting for them.
func (s *sharded) onSkips(b *batch, skips []skip) {
	k := &b.blk
	li := 0
	for _, sk := range skips {
		for ; li < len(k.later) && s.blockOp(k, int(k.later[li].idx)) <= sk.tag.op; li++ {
			s.reportLater(k, li)
		}
		s.reportHeld(sk.tag.op)
		s.handOver(b, sk.tag.op, sk.err)
	}
	for ; li < len(k.later); li++ {
		s.reportLater(k, li)
	}
	s.reportHeld(b.lastOp)
	s.trim(b.lastOp)
}

// hold keeps the outcome of an event fed one by one, whose first op is
// at (the next op when it took none), until the ops before it are merged
// (reportHeld). It reports whether it took err: an event's error, with a
// host to hear of it, on a sharded aggregate at the head of the chain.
func (s *sharded) hold(at uint64, tag int64, raw []byte, err error) bool {
	var ee *EventError
	if s.d.onEventError == nil || !errors.As(err, &ee) {
		return false
	}
	if raw != nil {
		raw = append([]byte(nil), raw...)
	}
	s.sk.outs = append(s.sk.outs, held{at: at, tag: tag, raw: raw, err: ee, ops: s.p.op >= at})
	return true
}

// reportHeld reports the held outcomes of the events from op on at most
// upTo, in input order.
func (s *sharded) reportHeld(upTo uint64) {
	n := 0
	for ; n < len(s.sk.outs) && s.sk.outs[n].at <= upTo; n++ {
		h := &s.sk.outs[n]
		if h.ops {
			s.sk.last = h.at // the first error of its call
		}
		s.d.onEventError(h.tag, h.raw, h.err)
	}
	if n > 0 {
		clear(s.sk.outs[:n])
		s.sk.outs = append(s.sk.outs[:0], s.sk.outs[n:]...)
	}
}

// blockOp is the op of record i of block k.
func (s *sharded) blockOp(k *block, i int) uint64 { return k.base + opsPerRecord*uint64(i) + 1 }

// reportLater reports the admission outcome li of block k, the first
// error of its record's call.
func (s *sharded) reportLater(k *block, li int) {
	l := &k.later[li]
	s.sk.last = s.blockOp(k, int(l.idx))
	if d := s.d; d.onEventError != nil {
		d.onEventError(k.tags[l.idx], k.record(int(l.idx), l.reported), &EventError{Seq: k.seqs[l.idx], Err: l.err})
	}
}

// handOver hands the error of a record skipped at op to the host's call
// that one thread would have returned it from.
func (s *sharded) handOver(b *batch, op uint64, err error) {
	d, k := s.d, &b.blk
	if n := uint64(len(k.ends)); n > 0 && op > k.base && op <= k.base+opsPerRecord*n {
		i := int((op - k.base - 1) / opsPerRecord)
		if s.blockOp(k, i) == s.sk.last {
			return // not the first of its call
		}
		s.sk.last = s.blockOp(k, i)
		if d.onEventError != nil {
			d.onEventError(k.tags[i], k.record(i, false), &EventError{Seq: k.seqs[i], Err: err})
		}
		return
	}
	calls := s.sk.calls[s.sk.head:]
	j := sort.Search(len(calls), func(j int) bool { return calls[j].op1 >= op })
	if j == len(calls) || calls[j].op0 > op {
		if d.skipStep != nil {
			// A graph's reader: the graph holds it for the host's call
			// that made it (graph_outcome.go).
			d.skipStep(stepAt(b, op), err)
			return
		}
		// The call running now, which is not a push: it returns it.
		if s.sk.own == nil {
			s.sk.own = err
		}
		return
	}
	if c := &calls[j]; c.op0 != s.sk.last {
		s.sk.last = c.op0
		switch {
		case !c.fed:
			s.sk.pending[c.in] = append(s.sk.pending[c.in], &EventError{Seq: c.seq, Err: err})
		case d.onEventError != nil:
			d.onEventError(c.tag, s.sk.evRaw[c.raw0:c.raw1:c.raw1], &EventError{Seq: c.seq, Err: err})
		}
	}
}

// trim forgets the events whose ops were all merged (op at most last):
// they are dropped from the front, and the slices compacted only once
// most of them are dead, so an event is copied about once in all.
func (s *sharded) trim(last uint64) {
	calls := s.sk.calls[s.sk.head:]
	s.sk.head += sort.Search(len(calls), func(j int) bool { return calls[j].op1 > last })
	if s.sk.head < 4096 || 2*s.sk.head < len(s.sk.calls) {
		return
	}
	live := s.sk.calls[s.sk.head:]
	cut := int32(len(s.sk.evRaw))
	for _, c := range live {
		if c.raw1 > c.raw0 {
			cut = c.raw0
			break
		}
	}
	s.sk.evRaw = append(s.sk.evRaw[:0], s.sk.evRaw[cut:]...)
	s.sk.calls, s.sk.head = append(s.sk.calls[:0], live...), 0
	for i := range s.sk.calls {
		if c := &s.sk.calls[i]; c.raw1 > c.raw0 {
			c.raw0, c.raw1 = c.raw0-cut, c.raw1-cut
		}
	}
}

// callEnd is the outcome of a host's call on the aggregate: its fatal error,
// else the first error of its own records, else (when the call can
// return one on one thread) the error of an event pushed before.
func (s *sharded) callEnd(err error, pending bool) error {
	if !pending && !s.p.busy() {
		s.reportHeld(math.MaxUint64) // every op is merged
	}
	own := s.sk.own
	s.sk.own = nil
	switch {
	case err != nil && !Skipped(err):
		return err
	case err != nil:
		return err
	case own != nil:
		return own
	case pending:
		return s.popPending(0)
	}
	return nil
}

// popPending returns the first error of an event pushed on input in
// that no later push of it has returned yet (nil: none).
func (s *sharded) popPending(in int) error {
	q := s.sk.pending[in]
	if len(q) == 0 {
		return nil
	}
	err := q[0]
	q[0] = nil
	s.sk.pending[in] = q[1:]
	return err
}

// record is the input record i of k, nil for one the host could not hand
// over (reported).
func (k *block) record(i int, reported bool) []byte {
	if reported {
		return nil
	}
	start := int32(0)
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.raw[start:k.ends[i]:k.ends[i]]
}

// busy reports whether ops wait to be merged.
func (p *par) busy() bool {
	c := p.cur
	return len(p.inflight) > 0 || p.fill != nil || len(p.pending) > 0 || c.events > 0 || len(c.advances) > 0 || len(c.marks) > 0
}

// heldBy is the sharded aggregate that holds the outcomes of the events
// fed one by one, nil when they go to the host as the event is pushed
// (one thread; a host that interleaves two inputs, RecordWatermark, or a
// join's second input not ended: the pushes of that input return their
// outcomes, so the order of the two inputs' outcomes is the host's own).
func heldBy(d *Driver) *sharded {
	if s, ok := d.agg.(*sharded); ok && s.holds && (s.head || d.first.ended(1)) {
		return s
	}
	return nil
}

// stepAt is the host's step of op of b.
func stepAt(b *batch, op uint64) uint64 {
	i := sort.Search(len(b.steps), func(i int) bool { return b.steps[i].op > op })
	if i == 0 {
		return 0
	}
	return b.steps[i-1].step
}
