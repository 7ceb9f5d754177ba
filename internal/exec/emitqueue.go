package exec

import (
	"container/heap"
	"errors"
	"math"
)

// The emission queue. Finalizing a window, closing sessions and an early
// flush queue work, not records: a work item names the groups to publish,
// and records are rendered from it only while the host has room for them
// (SetRoom; unlimited by default, so a host with a callback sink gets every
// record before the call returns, as before). The queue is FIFO, and a
// record published on a change (EMIT CHANGES) joins it whenever anything is
// queued, so the changelog's order never depends on the room.
//
// Nothing the queue references changes while it waits: Process refuses rows
// while work is queued (ErrQueued), a queued bucket is no longer reachable
// from the live windows (an event for it is late, by the watermark at the
// time it was pushed, as without a queue), a queued flush's groups change
// only through Process, and queued sessions are closed from the close heap,
// which only Process changes. AdvanceWatermark, EmitEarly and Finish only
// append, so they never need to refuse.

type workKind uint8

const (
	workGroup    workKind = iota // one group's provisional record (EMIT CHANGES)
	workBucket                   // a finalized aligned window: its groups' finals in creation order
	workFlush                    // an early flush: the dirty list it took
	workSessions                 // close every session whose end + lateness wm passes (all at maxWatermark)
)

type work struct {
	kind workKind
	next int // groups of the bucket or the list already done
	wm   int64
	g    *group
	b    *bucket
	list []*group
}

// SetRoom tells the operator that the host can take n more records now.
// Records beyond that stay queued, unrendered, until a later SetRoom and
// Drain. The default is unlimited.
func (o *Operator) SetRoom(n int) {
	if n < 0 {
		n = 0
	}
	o.limit = o.stats.RecordsOut + int64(n)
	if o.limit < 0 { // overflow
		o.limit = math.MaxInt64
	}
}

// Queued reports whether work waits in the emission queue.
func (o *Operator) Queued() bool { return o.workHead < len(o.work) }

// Drain renders queued records while the room lasts. A record whose HAVING
// or SELECT fails is skipped and counted; the first such *EvalError is
// returned after the rest were rendered. Any other error (from the Emit
// callback) stops it and is returned.
func (o *Operator) Drain() error { return o.pump() }

func (o *Operator) hasRoom() bool { return o.stats.RecordsOut < o.limit }

// emitChange publishes g's provisional record now, or queues it behind the
// work already queued or when the host has no room.
func (o *Operator) emitChange(g *group) error {
	if o.workHead == len(o.work) && o.hasRoom() {
		return o.emit(g, false)
	}
	o.work = append(o.work, work{kind: workGroup, g: g})
	return nil
}

// queueBucket queues the finals of a bucket already dropped from the live
// windows.
func (o *Operator) queueBucket(b *bucket) {
	o.work = append(o.work, work{kind: workBucket, b: b})
}

// queueSessions queues the closing of every session the watermark wm
// passes. Consecutive items merge: closing up to the later watermark
// closes the same sessions in the same (end, creation) order.
func (o *Operator) queueSessions(wm int64) {
	if o.closeHeap.Len() == 0 || wm != maxWatermark && satAdd(o.groupEnd(o.closeHeap.refs[0].g), o.lateness) > wm {
		// Nothing to close: the heap changes only by closing, and closing
		// only raises its first end.
		return
	}
	if n := len(o.work); n > o.workHead && o.work[n-1].kind == workSessions {
		o.work[n-1].wm = max(o.work[n-1].wm, wm)
		return
	}
	o.work = append(o.work, work{kind: workSessions, wm: wm})
}

// pump renders queued work in order while the host has room.
func (o *Operator) pump() error {
	var first error
	for o.workHead < len(o.work) && o.hasRoom() {
		w := &o.work[o.workHead]
		done, err := o.run(w, &first)
		if err != nil {
			return err
		}
		if !done {
			break
		}
		o.work[o.workHead] = work{}
		o.workHead++
	}
	if o.workHead == len(o.work) {
		o.work, o.workHead = o.work[:0], 0
	}
	return first
}

// run renders w while the host has room and reports whether w is done. An
// *EvalError of one record goes to *first (if it is the first) and the
// rest go on; any other error is returned.
func (o *Operator) run(w *work, first *error) (done bool, err error) {
	note := func(err error) error { return noteEval(err, first) }
	switch w.kind {
	case workGroup:
		if w.g.has(dead) {
			return true, nil
		}
		return true, note(o.emit(w.g, false))
	case workBucket:
		o.startBatch()
		defer o.endBatch()
		for w.next < w.b.n {
			if !o.hasRoom() {
				return false, nil
			}
			g := w.b.at(w.next)
			w.next++
			if err := note(o.finalize(g)); err != nil {
				return false, err
			}
		}
		return true, nil
	case workFlush:
		o.startBatch()
		defer o.endBatch()
		for w.next < len(w.list) {
			if !o.hasRoom() {
				return false, nil
			}
			g := w.list[w.next]
			w.list[w.next] = nil
			w.next++
			if g == nil { // finalized while on the list (Operator.finalize)
				continue
			}
			g.set(inDirty, false)
			if g.has(dead) || g.dirtyAt == 0 {
				continue
			}
			if err := note(o.emit(g, false)); err != nil {
				return false, err
			}
		}
		if o.dirty == nil {
			o.dirty = w.list[:0] // reuse the list's array
		}
		return true, nil
	case workSessions:
		for o.closeHeap.Len() > 0 {
			top := o.closeHeap.refs[0]
			if w.wm != maxWatermark && satAdd(o.groupEnd(top.g), o.lateness) > w.wm {
				return true, nil
			}
			if !o.hasRoom() {
				return false, nil
			}
			heap.Pop(&o.closeHeap)
			sg := top.sg
			for i, s := range sg.sessions {
				if s == top.g {
					sg.sessions = append(sg.sessions[:i], sg.sessions[i+1:]...)
					break
				}
			}
			if len(sg.sessions) == 0 {
				delete(o.sessions, sg.key)
			}
			if err := note(o.finalize(top.g)); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return true, nil
}

// noteEval keeps the first *EvalError in *first and returns nil for it;
// any other error is returned. (nil is checked first: errors.As would make
// its target escape, an allocation per record.)
func noteEval(err error, first *error) error {
	if err == nil {
		return nil
	}
	var ee *EvalError
	if !errors.As(err, &ee) {
		return err
	}
	if *first == nil {
		*first = err
	}
	return nil
}

// skip counts a record its HAVING or SELECT failed to render, tells
// Config.OnSkip, and returns err.
func (o *Operator) skip(err *EvalError, windowEnd int64) error {
	o.stats.EvalErrors++
	if o.cfg.OnSkip != nil {
		o.cfg.OnSkip(err, windowEnd)
	}
	return err
}
