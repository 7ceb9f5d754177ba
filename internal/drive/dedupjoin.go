package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// The input dedup of a temporal join's stream (dedup_key) runs in the
// join node before the join, as the plan places it (internal/dataflow:
// Decode -> Dedup -> TemporalJoin) and as the Kafka dedup stage runs it:
// the first copy of a key is the one that reaches the query, whether the
// join then joins it, drops it (an inner join's event without a version)
// or finds it late; a later copy is a duplicate wherever the first went.
// The horizon is measured against the stream's watermark, which a
// dropped copy's time still moves, as every decoded event's does
// (exec.TemporalJoin.Observe). The keys' entries keep their place in the
// checkpoint (between the aggregate's groups and its meta entry, whose
// Duplicates and DedupLate they add: dedupNode.metaPut), and a marker
// entry goes beside the join's: a state without it was written while the
// dedup ran after the join, keeping the keys of joined rows only and
// leaving the waiting events undecided, and is refused.

// joinDedupKey is the key of the marker entry.
const joinDedupKey = "jd"

// joinDedup is the dedup part of a temporal join node.
type joinDedup struct {
	dd       *dedupNode // nil without a dedup_key
	marked   bool       // the marker entry was restored
	unmarked bool       // a meta entry was restored (the marker may come later: entries come in any order)
}

// initDedup makes the node's dedup, if its stream declares a dedup_key;
// its dedup-late events are reported as the stream's.
func (t *temporalJoin) initDedup() {
	var late func(*exec.LateEvent)
	if t.late != nil {
		stream, hook := t.q.Join.Stream, t.late
		late = func(ev *exec.LateEvent) {
			ev.Source = stream
			hook(ev)
		}
	}
	t.dd = newDedupNode(t.q, late)
}

// dedup admits one stream event at the stream's watermark and reports
// whether it was dropped: a later copy (its time observed) or an event
// beyond the horizon.
func (t *temporalJoin) dedup(row []types.Value, raw []byte) bool {
	wm := t.j.StreamWatermark()
	t.dd.advance(wm)
	switch t.dd.admit(row, raw, wm) {
	case dedupCopy:
		if ts := row[t.q.Join.Stream.TimeCol]; !ts.Null {
			t.j.Observe(ts.I)
		}
		return true
	case dedupBeyond:
		return true
	}
	return false
}

// dedupPut writes the marker entry and returns the put of the
// aggregate's entries, the dedup's keys written before its meta entry
// (put itself without a dedup).
func (t *temporalJoin) dedupPut(full bool, put func(key, val []byte) error) (func(key, val []byte) error, error) {
	if t.dd == nil {
		return put, nil
	}
	t.dd.advance(t.j.StreamWatermark())
	if err := put([]byte(joinDedupKey), []byte{1}); err != nil {
		return nil, err
	}
	return t.dd.metaPut(full, put), nil
}

// restoreDedup loads one entry if it is the dedup's (true), and notes
// the meta entry, which a state without the marker is refused for
// (finishDedup).
func (t *temporalJoin) restoreDedup(key, val []byte) (bool, error) {
	if t.dd == nil {
		return false, nil
	}
	t.dd.st.Track() // the store holds the node's entries
	switch {
	case string(key) == joinDedupKey:
		if len(val) != 1 || val[0] != 1 {
			return true, fmt.Errorf("%w: bad dedup marker entry %q", ErrBadState, val)
		}
		t.marked = true
		return true, nil
	case t.dd.isEntry(key):
		return true, t.dd.restore(key, val)
	case string(key) == exec.MetaKey:
		t.unmarked = true
	}
	return false, nil
}

// finishDedup refuses a restored state whose meta entry came without the
// marker: an earlier version's, which deduplicated after the join.
func (t *temporalJoin) finishDedup() error {
	if t.dd == nil || !t.unmarked || t.marked {
		return nil
	}
	return fmt.Errorf("%w: the state of query %s was written while the input dedup of %s ran after the temporal join; the dedup now runs before it, and that state cannot be carried over: start the query over from an empty state (a file run: remove its state dir)",
		ErrBadState, t.q.Name, t.q.Join.Stream.Name)
}

// addDedupStats adds the dedup's counters and gauges to s; its keys are
// live state too.
func (t *temporalJoin) addDedupStats(s *exec.Stats) {
	if t.dd == nil {
		return
	}
	t.dd.addStats(s)
	s.StateBytes += s.DedupBytes
	s.StateBytesPeak += t.dd.st.Peak()
}
