package drive

import (
	"fmt"
	"math"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// dedupNode is a source's input dedup (dedup_key, dedup_within: the
// plan's dataflow.Dedup), the one implementation every runtime uses: it
// keeps the first copy of each key within the horizon, drops a later copy
// (a duplicate) and an event beyond the horizon, where a retry can no
// longer be told from a new event (dedup-late, reported late), and
// forgets the keys the watermark passes. In process it stands in front of
// the aggregate (dedupAgg, dedupagg.go; a sharded aggregate's reader and
// block sequencer, sharded.go and feed.go), or of a temporal join, which
// it precedes as the plan places it (dedupjoin.go); over Kafka it is a
// stage of its own (HostDedup, hostdedup.go). Its keys are a dedupState; its
// counters (Duplicates, DedupLate) and its state's gauges (DedupKeys,
// DedupBytes) keep the meaning Stats gives them wherever it runs.
type dedupNode struct {
	st  dedupState
	src *plan.Source
	// The fields above are what a sharded aggregate's decoding goroutines
	// read for every record (appendKey); the ones below its reader writes.
	_ [cacheLine]byte
	// wm is the watermark the keys were last evicted at.
	wm   int64
	late func(*exec.LateEvent) // nil: dedup-late events are not reported
	// dups and beyond count the events dropped as copies and beyond the
	// horizon.
	dups, beyond int64
}

// dedupState is what a dedup node keeps: the keys seen within the
// horizon, filed by expiry (exec.Dedup). AppendKey only reads the
// configuration, so decoding goroutines may call it while the node
// admits.
type dedupState interface {
	Admit(row []types.Value, watermark int64) (dup, beyond bool)
	AppendKey(dst []byte, row []types.Value) ([]byte, bool)
	AdmitKey(key []byte, hasKey bool, ts, watermark int64) (dup, beyond bool)
	Evict(watermark int64)
	Keys() int64
	Bytes() int64
	Peak() int64
	// Checkpoint writes the keys' entries ("d" + key: the first copy's
	// event time), Restore loads one, IsEntry tells them.
	Checkpoint(full bool, put func(key, val []byte) error) error
	IsEntry(key []byte) bool
	Restore(key, val []byte) error
	// Track starts tracking changes: a restored store holds the entries.
	Track()
}

// dedupVerdict is what the node decides for one event.
type dedupVerdict uint8

const (
	dedupKeep   dedupVerdict = iota // the first copy, or an event without a key: it goes on
	dedupCopy                       // a later copy within the horizon: dropped
	dedupBeyond                     // beyond the horizon: dropped, dedup-late
)

// newDedupNode returns the dedup of q's source, nil if it declares no
// dedup_key. late receives the dedup-late events (nil: none).
func newDedupNode(q *plan.Query, late func(*exec.LateEvent)) *dedupNode {
	st := exec.NewDedup(q)
	if st == nil {
		return nil
	}
	return &dedupNode{st: st, src: q.Source, wm: math.MinInt64, late: late}
}

// newAggDedup is the dedup node in front of q's aggregate (newDedupNode),
// none for a temporal join's query: its join node deduplicates the
// stream before joining it.
func newAggDedup(q *plan.Query, late func(*exec.LateEvent)) *dedupNode {
	if q.Join != nil {
		return nil
	}
	return newDedupNode(q, late)
}

// admit decides one decoded event (raw its record, for the late hook)
// against wm, the watermark of the node's place, and counts a dropped
// one.
func (n *dedupNode) admit(row []types.Value, raw []byte, wm int64) dedupVerdict {
	dup, beyond := n.st.Admit(row, wm)
	return n.count(dup, beyond, row, raw, wm)
}

// admitKey is admit for an event decoded elsewhere: its dedup key as
// appendKey gave it (hasKey false: a NULL key) and its time. A dedup-late
// event is counted, not reported.
func (n *dedupNode) admitKey(key []byte, hasKey bool, ts, wm int64) dedupVerdict {
	dup, beyond := n.st.AdmitKey(key, hasKey, ts, wm)
	return n.count(dup, beyond, nil, nil, wm)
}

// appendKey appends the bytes of row's dedup key to dst (false: a NULL
// key, never a copy). Safe beside the node's other calls.
func (n *dedupNode) appendKey(dst []byte, row []types.Value) ([]byte, bool) {
	return n.st.AppendKey(dst, row)
}

func (n *dedupNode) count(dup, beyond bool, row []types.Value, raw []byte, wm int64) dedupVerdict {
	switch {
	case dup:
		n.dups++
		return dedupCopy
	case beyond:
		n.beyond++
		if n.late != nil && row != nil {
			tc := n.src.TimeCol
			n.late(&exec.LateEvent{Row: row, EventTime: row[tc].I, Watermark: wm, Event: raw, Source: n.src,
				Reason: "beyond the dedup horizon: a retry can no longer be told from a new event"})
		}
		return dedupBeyond
	}
	return dedupKeep
}

// advance forgets the keys whose horizon wm passes (if wm is later than
// the last call's), and returns how much the state's bytes changed.
func (n *dedupNode) advance(wm int64) int64 {
	if wm <= n.wm {
		return 0
	}
	n.wm = wm
	before := n.st.Bytes()
	n.st.Evict(wm)
	return n.st.Bytes() - before
}

// dropped is how many events the node dropped (none without a node):
// they reached the query, so they count among its rows.
func (n *dedupNode) dropped() int64 {
	if n == nil {
		return 0
	}
	return n.dups + n.beyond
}

// addStats adds the node's counters and its state's gauges to s.
func (n *dedupNode) addStats(s *exec.Stats) {
	s.Duplicates += n.dups
	s.DedupLate += n.beyond
	s.DedupKeys, s.DedupBytes = n.st.Keys(), n.st.Bytes()
}

// addMeta adds the node's counters to a checkpoint's meta entry.
func (n *dedupNode) addMeta(m *exec.Meta) {
	m.Counters[7] += n.dups
	m.Counters[8] += n.beyond
}

// checkpoint writes the keys added and forgotten since the last call (all
// of them the first time, or when full).
func (n *dedupNode) checkpoint(full bool, put func(key, val []byte) error) error {
	return n.st.Checkpoint(full, put)
}

// isEntry reports whether key is one of the node's entries.
func (n *dedupNode) isEntry(key []byte) bool { return n.st.IsEntry(key) }

// restore loads one of the node's entries.
func (n *dedupNode) restore(key, val []byte) error {
	if !n.st.IsEntry(key) {
		return fmt.Errorf("%w: entry %q is not a dedup key's", ErrBadState, key)
	}
	return n.st.Restore(key, val)
}
