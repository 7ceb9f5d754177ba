package drive

import (
	"cmp"
	"math"
	"slices"
	"weak"
)

// The outcomes of a graph of views whose nodes run on several threads,
// for a host that hears of its fed events (Config.OnEventError). On one
// thread a host's call is one step: the event's own outcome reaches the
// host as it is pushed, then the first record a reader skipped for an
// evaluation error as the inboxes were applied (a window of the reader
// whose HAVING or SELECT failed as its view's watermark finalized it),
// as the event's error (settleEvent). On several threads a reader
// renders its windows batches later, during a later call: so every node
// carries the host's step through its ops (stepped, as a join of two
// views does), a reader hands the records it skipped outside its pushes
// to the graph with their step (Driver.skipStep), and the graph holds
// every outcome, the reporter's too, until no node can still make one of
// an earlier step (release), then hands them to the host in one thread's
// order: by step, the event's own first, then a reader's first.
//
// A step that was not a fed event's: a call that is not a push returns
// its own (settle, as on one thread), an earlier one's, or a push's
// (Push, PushRow), are counted only.

// fedCall is one record the host handed to the graph's first input, in
// input order: the step of its call, its tag and bytes when fed.
type fedCall struct {
	step       uint64
	tag        int64
	fed        bool
	raw0, raw1 int32
}

// heldOut is an outcome the graph holds until its step is released: the
// reporter's (an event's own) or a reader's skipped record's (reader).
type heldOut struct {
	step   uint64
	reader bool
	tag    int64
	raw    []byte
	err    *EventError
	rerr   error // a reader's record's error
}

// outcomes is what a stepped graph keeps.
type outcomes struct {
	on    func(tag int64, raw []byte, err *EventError) // the host's Config.OnEventError
	calls []fedCall
	first int // the index in the input of calls[0]
	raw   []byte
	held  []heldOut
}

// stepOutcomes makes g a stepped graph when its nodes run on several
// threads and its host hears of its fed events: cfg is the primary's,
// c the reporter's, whose outcomes the graph takes.
func (g *Graph) stepOutcomes(cfg Config, host *HostInput) {
	if cfg.Threads <= 1 || cfg.OnEventError == nil || g.lone || host != nil || len(g.sources) != 1 || g.ordered {
		return
	}
	g.stepped = true
	g.outs.on = cfg.OnEventError
}

// outcomeHooks returns the reporter's OnEventError and the readers' skipStep,
// which hold the graph weakly (readerHooks says why).
func (g *Graph) outcomeHooks() (onEventError func(int64, []byte, *EventError), skipStep func(uint64, error)) {
	wg := weak.Make(g)
	onEventError = func(tag int64, raw []byte, err *EventError) {
		if g := wg.Value(); g != nil {
			g.ownOutcome(tag, raw, err)
		}
	}
	skipStep = func(step uint64, err error) {
		if g := wg.Value(); g != nil {
			g.readerSkip(step, err)
		}
	}
	return onEventError, skipStep
}

// called records a record handed to the first input in the host's call
// of step (fed: by Feed or ReportMalformedAt, with its tag).
func (g *Graph) called(step uint64, tag int64, raw []byte, fed bool) {
	o := &g.outs
	c := fedCall{step: step, tag: tag, fed: fed, raw0: int32(len(o.raw))}
	if fed {
		o.raw = append(o.raw, raw...)
	}
	c.raw1 = int32(len(o.raw))
	o.calls = append(o.calls, c)
}

// ownOutcome holds an outcome of the reporter: its Seq is the event's
// number in the input, so its call's.
func (g *Graph) ownOutcome(tag int64, raw []byte, err *EventError) {
	step := uint64(0) // not known: at once
	if c := g.callOf(err.Seq); c != nil {
		step = c.step
	}
	g.outs.held = append(g.outs.held, heldOut{step: step, tag: tag, raw: slices.Clone(raw), err: err})
}

// callOf is the record of the seq-th event of the first input (nil if
// forgotten): events are the records but a CSV header, which comes first.
func (g *Graph) callOf(seq int64) *fedCall {
	o := &g.outs
	i := int(seq-1+g.reporter.d.n.Headers) - o.first
	if i < 0 || i >= len(o.calls) {
		return nil
	}
	return &o.calls[i]
}

// readerSkip holds a record a reader skipped outside its pushes, made in
// step: the first of each step is the step's.
func (g *Graph) readerSkip(step uint64, err error) {
	o := &g.outs
	for i := len(o.held) - 1; i >= 0; i-- {
		if h := &o.held[i]; h.reader && h.step == step {
			return
		}
	}
	o.held = append(o.held, heldOut{step: step, reader: true, rerr: err})
}

// release hands the host the outcomes of the steps no node can still
// make one of, in one thread's order; every one once the graph is
// closed. A reader's record of the call running now is the call's
// (returned, as settle does).
func (g *Graph) release(all bool) {
	o := &g.outs
	if len(o.held) == 0 {
		g.forget(all)
		return
	}
	front := uint64(math.MaxUint64)
	if !all {
		front = g.frontAll()
	}
	slices.SortStableFunc(o.held, func(a, b heldOut) int {
		switch {
		case a.step != b.step:
			return cmp.Compare(a.step, b.step)
		case a.reader != b.reader && !a.reader:
			return -1
		case a.reader != b.reader:
			return 1
		}
		return 0
	})
	n := 0
	for ; n < len(o.held) && o.held[n].step < front; n++ {
		g.hand(&o.held[n])
	}
	clear(o.held[:n])
	o.held = append(o.held[:0], o.held[n:]...)
	g.forget(all)
}

// hand gives one held outcome to the host.
func (g *Graph) hand(h *heldOut) {
	if !h.reader {
		g.outs.on(h.tag, h.raw, h.err)
		return
	}
	o := &g.outs
	i := sortSearchCalls(o.calls, h.step)
	if i == len(o.calls) || o.calls[i].step != h.step || !o.calls[i].fed {
		if h.step == g.step && g.evalErr == nil {
			g.evalErr = h.rerr // the call's own, as on one thread
		}
		return // else counted only
	}
	c := &o.calls[i]
	seq := int64(o.first+i+1) - g.reporter.d.n.Headers
	o.on(c.tag, o.raw[c.raw0:c.raw1:c.raw1], &EventError{Seq: seq, Err: h.rerr})
}

// forget drops the records of the steps whose outcomes are all handed
// over, once most of what is kept is theirs.
func (g *Graph) forget(all bool) {
	o := &g.outs
	keep := uint64(math.MaxUint64)
	if !all {
		keep = g.frontAll()
	}
	if len(o.held) > 0 {
		keep = min(keep, o.held[0].step)
	}
	i := sortSearchCalls(o.calls, keep)
	if i < 4096 || 2*i < len(o.calls) {
		return
	}
	cut := o.calls[i-1].raw1
	o.raw = append(o.raw[:0], o.raw[cut:]...)
	o.calls = append(o.calls[:0], o.calls[i:]...)
	for j := range o.calls {
		o.calls[j].raw0 -= cut
		o.calls[j].raw1 -= cut
	}
	o.first += i
}

// frontAll is the first step some node may still make an outcome of: the
// earliest step of its ops not merged, and of the items in its inboxes.
func (g *Graph) frontAll() uint64 {
	f := uint64(math.MaxUint64)
	for _, n := range g.nodes {
		f = min(f, n.d.PendingStep())
		for _, q := range n.in[:] {
			if q.len() > 0 {
				f = min(f, q.peek().step)
			}
		}
	}
	return f
}

// sortSearchCalls is the first call of a step at or after step.
func sortSearchCalls(calls []fedCall, step uint64) int {
	i, _ := slices.BinarySearchFunc(calls, step, func(c fedCall, s uint64) int { return cmp.Compare(c.step, s) })
	return i
}
