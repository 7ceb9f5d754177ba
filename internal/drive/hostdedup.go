package drive

import (
	"fmt"
	"hash/fnv"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A source's input dedup (dedup_key) as a stage of its own, for a host
// that places the events by their dedup key before deduplicating them
// and routes the survivors by their group key after (the Kafka runtime,
// following the plan's Dedup node): every copy of a key meets in one
// partition, so the first copy counts there whatever group the copies
// fall in, as a file run's dedup decides on its reader.

// DedupRouter decodes each record and places it by its dedup key, under
// the identity the dedup node uses (dedupNode.appendKey).
type DedupRouter struct {
	in    decodeNode
	dd    *dedupNode // only its key is read
	last  []types.Value
	n     Counts
	taken Counts
}

// NewDedupRouter returns the router of q's events by their dedup key
// (q's source, or its temporal join's stream, declares one). Only
// cfg.Decoder is read.
func NewDedupRouter(q *plan.Query, cfg Config) (*DedupRouter, error) {
	if q.IJoin != nil || q.Source.Dedup == nil {
		return nil, fmt.Errorf("drive: query %s reads no declared source with a dedup key", q.Name)
	}
	r, err := newRouter(q, cfg.Decoder, -1)
	if err != nil {
		return nil, err
	}
	dr := &DedupRouter{dd: newDedupNode(q, nil)}
	dr.in = decodeNode{dec: r.in.dec, src: q.Source, n: &dr.n}
	return dr, nil
}

// Route decodes one record and appends its placing bytes to dst: its
// dedup key's identity, or for a NULL key (never a copy: any partition
// will do) a hash of the record. A nil key and a nil error is a CSV
// header record; a bad event is an *EventError, counted.
func (r *DedupRouter) Route(dst, raw []byte) ([]byte, error) {
	row, err := r.in.decode(raw)
	r.last = row
	if err != nil {
		if fatalInput(err) {
			return nil, err
		}
		return nil, &EventError{Seq: r.n.Events, Err: err}
	}
	if row == nil {
		return nil, nil
	}
	return r.Place(dst, raw, row)
}

// Place appends the placing bytes of row, raw decoded elsewhere, to dst
// (Placer.Place): a dedup key evaluates without error.
func (r *DedupRouter) Place(dst, raw []byte, row []types.Value) ([]byte, error) {
	key, ok := r.dd.appendKey(append(dst, 1), row)
	if !ok {
		h := fnv.New64a()
		h.Write(raw)
		return h.Sum(append(dst, 0)), nil
	}
	return key, nil
}

// Decoded is the row the last Route decoded (Placer.Decoded).
func (r *DedupRouter) Decoded() []types.Value { return r.last }

// Mark is Router.Mark: the last event's time less the watermark delay.
func (r *DedupRouter) Mark() (int64, bool) { return r.in.mark, r.in.marked }

// TakeCounts returns what the counters gained since the previous call.
func (r *DedupRouter) TakeCounts() Counts {
	delta := r.n.minus(r.taken)
	r.taken = r.n
	return delta
}

// HostDedup is the dedup of one partition of the dedup key's placement:
// it decodes each event, hands it to the dedup node (dedup.go) at the
// watermark its host moves, and gives a survivor's group key
// (exec.GroupKeys) for the aggregate's placement (a temporal join's
// grouped by its stream: NewRouter's; none for a join grouped by the
// table, which joins where the events are). It checkpoints the node's
// keys, then a meta entry of its own: watermark, counters (at the places
// an operator's meta entry has them) and the host's position.
type HostDedup struct {
	in    decodeNode
	dd    *dedupNode
	place *Router // the survivors' placement
	last  []types.Value
	n     Counts
	taken Counts
}

// NewHostDedup returns the dedup of q's source (q reads a declared
// source with a dedup key). cfg.Decoder decodes the records; cfg.Late
// receives the events beyond the horizon.
func NewHostDedup(q *plan.Query, cfg Config) (*HostDedup, error) {
	r, err := NewDedupRouter(q, cfg)
	if err != nil {
		return nil, err
	}
	var place *Router // nil: a temporal join's stream that needs no placement (the join is where it is)
	if q.Join == nil || dataflow.StreamGrouped(q) {
		if place, err = NewRouter(q, cfg); err != nil {
			return nil, err
		}
	}
	h := &HostDedup{dd: newDedupNode(q, cfg.Late), place: place}
	h.in = decodeNode{dec: r.in.dec, src: q.Source, n: &h.n}
	return h, nil
}

// Push decodes one record and admits it. For the first copy of its key
// (or an event without one) it appends the event's group key to dst (if
// it is placed) and reports routed; a duplicate or a dedup-late event is dropped and
// counted. An event whose group key fails to evaluate is an *EventError
// (counted in EvalErrors).
func (h *HostDedup) Push(dst, raw []byte) (key []byte, routed bool, err error) {
	row, err := h.in.decode(raw)
	h.last = row
	if err != nil || row == nil {
		if err != nil && !fatalInput(err) {
			err = &EventError{Seq: h.n.Events, Err: err}
		}
		return nil, false, err
	}
	if h.dd.admit(row, raw, h.dd.wm) != dedupKeep {
		h.n.Applied++ // the dedup is the query's first step: the event reached it
		return nil, false, nil
	}
	if h.place == nil {
		return dst, true, nil
	}
	key, err = h.place.place(dst, raw, row)
	if err != nil {
		h.n.EvalErrors++
		return nil, false, &EventError{Seq: h.n.Events, Err: err}
	}
	return key, true, nil
}

// Decoded is the row the last Push decoded (nil if it failed), valid
// until the decoder's next record: a host placing a survivor on several
// exchanges hands it to their Placer.Place.
func (h *HostDedup) Decoded() []types.Value { return h.last }

// AdvanceWatermark moves the dedup's watermark to wm (never back) and
// forgets the keys it passed.
func (h *HostDedup) AdvanceWatermark(wm int64) { h.dd.advance(wm) }

// Watermark is the dedup's watermark.
func (h *HostDedup) Watermark() int64 { return h.dd.wm }

// Stats returns the Stats counters Duplicates and DedupLate (running
// totals) and the gauges DedupKeys and DedupBytes.
func (h *HostDedup) Stats() (dups, late, keys, bytes int64) {
	var s exec.Stats
	h.dd.addStats(&s)
	return s.Duplicates, s.DedupLate, s.DedupKeys, s.DedupBytes
}

// TakeCounts returns what the input counters gained since the previous
// call (the host keeps those its placement did not count already).
func (h *HostDedup) TakeCounts() Counts {
	delta := h.n.minus(h.taken)
	h.taken = h.n
	return delta
}

// Checkpoint writes the keys added and forgotten since the last call
// (all of them the first time, or when full), then the meta entry:
// watermark, counters and the host's position.
func (h *HostDedup) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := h.dd.checkpoint(full, put); err != nil {
		return err
	}
	m := exec.Meta{Watermark: h.dd.wm, Position: position}
	h.dd.addMeta(&m)
	return put([]byte(exec.MetaKey), exec.AppendMeta(nil, m))
}

// Restore loads one checkpoint entry into a dedup that has taken
// nothing yet, and returns the host position from the meta entry.
func (h *HostDedup) Restore(key, val []byte) (position []byte, err error) {
	if string(key) == exec.MetaKey {
		m, err := exec.ParseMeta(val)
		if err != nil {
			return nil, err
		}
		h.dd.wm, h.dd.dups, h.dd.beyond = m.Watermark, m.Counters[7], m.Counters[8]
		return m.Position, nil
	}
	return nil, h.dd.restore(key, val)
}

// MetaKey is the key of the meta entry.
func (h *HostDedup) MetaKey() []byte { return []byte(exec.MetaKey) }
