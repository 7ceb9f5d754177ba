package exec

import (
	"container/heap"
	"encoding/binary"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// dedupState drops later copies of an event within an event-time horizon
// (CREATE SOURCE ... WITH (dedup_key = 'event_id', dedup_within = '1 hour')).
// The first copy to arrive is the one that counts: the usage log keeps the
// earliest-ingested copy too, so streaming totals and the log agree.
//
// A key is remembered until the watermark passes its first copy's event time
// plus the horizon, so the state is bounded by the keys of one horizon. Keys
// are filed in expiry buckets (1/64 of the horizon wide) so eviction is a pop
// per bucket, not a scan.
type dedupState struct {
	col      int
	within   int64
	gran     int64
	seen     map[string]int64   // key -> event time of the first copy
	buckets  map[int64][]string // expiry bucket -> keys
	order    int64Heap          // live bucket ids
	bytes    int64
	peak     int64    // the most bytes at once
	added    []string // since the last checkpoint, once tracking
	evicted  []string
	tracking bool
	keyBuf   []byte
}

func newDedup(d *plan.Dedup) *dedupState {
	g := d.Within / 64
	if g < 1000 {
		g = 1000
	}
	return &dedupState{col: d.Col, within: d.Within, gran: g, seen: map[string]int64{}, buckets: map[int64][]string{}}
}

// DedupEntryBytes estimates one remembered key beyond its own bytes: the
// map entry, the time, and its slot in a bucket.
const DedupEntryBytes = 64

// admit reports whether the event reaches the query: false for a copy of
// a key seen within the horizon (dup) or for an event beyond the horizon,
// where a retry can no longer be told from a new event (beyond).
func (d *dedupState) admit(row []types.Value, ts, watermark int64) (dup, beyond bool) {
	v := row[d.col]
	if v.Null {
		return false, false // no key, nothing to deduplicate on
	}
	d.keyBuf = appendDistinctCell(d.keyBuf[:0], v)
	return d.admitKey(d.keyBuf, ts, watermark)
}

// admitKey is admit for the key bytes of a non-NULL key.
func (d *dedupState) admitKey(key []byte, ts, watermark int64) (dup, beyond bool) {
	if satAdd(ts, d.within) <= watermark {
		return false, true
	}
	if _, ok := d.seen[string(key)]; ok {
		return true, false
	}
	k := string(key)
	d.add(k, ts)
	if d.tracking {
		d.added = append(d.added, k)
	}
	return false, false
}

func (d *dedupState) add(k string, ts int64) {
	d.seen[k] = ts
	b := types.FloorDiv(satAdd(ts, d.within), d.gran)
	if _, ok := d.buckets[b]; !ok {
		heap.Push(&d.order, b)
	}
	d.buckets[b] = append(d.buckets[b], k)
	d.bytes += int64(len(k)) + DedupEntryBytes
	d.peak = max(d.peak, d.bytes)
}

// evict forgets every key whose horizon the watermark has passed.
func (d *dedupState) evict(watermark int64) {
	for d.order.Len() > 0 {
		b := d.order[0]
		if satAdd(b*d.gran, d.gran) > watermark { // some key of the bucket may still be live
			return
		}
		heap.Pop(&d.order)
		for _, k := range d.buckets[b] {
			if ts, ok := d.seen[k]; ok && satAdd(ts, d.within) <= watermark {
				delete(d.seen, k)
				d.bytes -= int64(len(k)) + DedupEntryBytes
				if d.tracking {
					d.evicted = append(d.evicted, k)
				}
			}
		}
		delete(d.buckets, b)
	}
}

// checkpoint writes the dedup entries: all, or those added and evicted
// since the last checkpoint. Entry key "d" + key, value: event time.
func (d *dedupState) checkpoint(full bool, put func(key, val []byte) error) error {
	var kb, vb []byte
	entry := func(k string, ts int64, del bool) error {
		kb = append(append(kb[:0], 'd'), k...)
		if del {
			return put(kb, nil)
		}
		vb = binary.AppendVarint(append(vb[:0], stateVersion), ts)
		return put(kb, vb)
	}
	if full {
		for k, ts := range d.seen {
			if err := entry(k, ts, false); err != nil {
				return err
			}
		}
	} else {
		for _, k := range d.evicted {
			if _, back := d.seen[k]; !back {
				if err := entry(k, 0, true); err != nil {
					return err
				}
			}
		}
		for _, k := range d.added {
			if ts, ok := d.seen[k]; ok {
				if err := entry(k, ts, false); err != nil {
					return err
				}
			}
		}
	}
	d.added, d.evicted = d.added[:0], d.evicted[:0]
	return nil
}
