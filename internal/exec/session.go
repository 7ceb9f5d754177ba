package exec

import (
	"container/heap"
	"errors"

	"github.com/ubiksql/ubik/internal/types"
)

// sessionGroup holds the open sessions of one group key, sorted by start and
// pairwise disjoint.
type sessionGroup struct {
	key      string
	sessions []*group
}

// processSession assigns the row to a session of its group. A new event
// opens [ts, ts+gap); every open session it touches (Flink's rule: windows
// that overlap or meet) merges with it into one. Because a session's start can
// move on a merge, sessions publish only when they close (the planner
// rejects EMIT EARLY for them).
func (o *Operator) processSession(row []types.Value) error {
	ts, ok := o.eventTime(row)
	if !ok {
		o.stats.EvalErrors++
		return &EvalError{Where: "window", Err: errors.New("window time column is NULL")}
	}
	gap := o.q.Window.Gap
	if ts > types.MaxTimestamp-gap {
		o.stats.EvalErrors++
		return &EvalError{Where: "window", Err: errWindowRange{ts}}
	}
	sg := o.sessions[string(o.keyBuf)]
	start, end := ts, ts+gap
	lo, hi := 0, 0 // sessions[lo:hi] merge with the new window
	if sg != nil {
		for lo < len(sg.sessions) && o.groupEnd(sg.sessions[lo]) < start {
			lo++
		}
		hi = lo
		for hi < len(sg.sessions) && sg.sessions[hi].start <= end {
			if sg.sessions[hi].start < start {
				start = sg.sessions[hi].start
			}
			end = max(end, o.groupEnd(sg.sessions[hi]))
			hi++
		}
	}
	if satAdd(end, o.lateness) <= o.watermark {
		o.stats.Late++
		if o.cfg.Late != nil {
			o.cfg.Late(&LateEvent{Row: row, Key: o.lateKey(start, end), Windowed: true, EventTime: ts, WindowStart: start, WindowEnd: end, Watermark: o.watermark,
				Reason: "session already closed"})
		}
		return nil
	}
	if sg == nil {
		sg = &sessionGroup{key: string(o.keyBuf)}
		o.sessions[sg.key] = sg
	}
	var target *group
	if hi > lo {
		target = sg.sessions[lo]
		for _, other := range sg.sessions[lo+1 : hi] {
			if err := o.mergeGroups(target, other); err != nil {
				return err
			}
			if other.revision > target.revision {
				target.revision = other.revision
			}
			heap.Remove(&o.closeHeap, int(other.heapIndex))
			o.dropGroup(other)
		}
		target.start = start
		o.setSessionEnd(target, end)
		sg.sessions = append(sg.sessions[:lo+1], sg.sessions[hi:]...)
		heap.Fix(&o.closeHeap, int(target.heapIndex))
	} else {
		g := o.newSessionGroup(start, end)
		target = g
		sg.sessions = append(sg.sessions, nil)
		copy(sg.sessions[lo+1:], sg.sessions[lo:])
		sg.sessions[lo] = g
		heap.Push(&o.closeHeap, sessionRef{g: g, sg: sg})
	}
	if err := o.updateAggs(target); err != nil {
		return err
	}
	return o.changed(target)
}

// mergeGroups folds other's aggregate state into target's.
func (o *Operator) mergeGroups(target, other *group) error {
	l := o.layout
	tw, ow := target.words(l.stride), other.words(l.stride)
	before := l.extraBytes(tw)
	for i, k := range l.kernels {
		a, b := k.unpack(l.words(tw, i)), k.unpack(l.words(ow, i))
		err := a.merge(b)
		k.pack(l.words(tw, i), a)
		if err != nil {
			return &EvalError{Where: "aggregate " + o.q.Aggs[i].Name, Err: err}
		}
	}
	o.addBytes(int64(l.extraBytes(tw) - before))
	return nil
}

const maxWatermark = int64(^uint64(0) >> 1)

type sessionRef struct {
	g  *group
	sg *sessionGroup
}

// sessionHeap orders open sessions by end, then creation, keeping each
// group's heapIndex current so merges can fix or remove entries in O(log n).
type sessionHeap struct {
	refs   []sessionRef
	stride int // aggregate words per group; the session end follows them
}

func (h *sessionHeap) end(g *group) int64 { return int64(g.words(h.stride + 1)[h.stride]) }

func (h *sessionHeap) Len() int { return len(h.refs) }
func (h *sessionHeap) Less(i, j int) bool {
	a, b := h.refs[i].g, h.refs[j].g
	if ea, eb := h.end(a), h.end(b); ea != eb {
		return ea < eb
	}
	return a.seq < b.seq
}
func (h *sessionHeap) Swap(i, j int) {
	h.refs[i], h.refs[j] = h.refs[j], h.refs[i]
	h.refs[i].g.heapIndex = int32(i)
	h.refs[j].g.heapIndex = int32(j)
}
func (h *sessionHeap) Push(x any) {
	r := x.(sessionRef)
	r.g.heapIndex = int32(len(h.refs))
	h.refs = append(h.refs, r)
}
func (h *sessionHeap) Pop() any {
	n := len(h.refs)
	r := h.refs[n-1]
	h.refs = h.refs[:n-1]
	r.g.heapIndex = -1
	return r
}
