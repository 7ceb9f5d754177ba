package exec

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"sort"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// State checkpoints. The operator's state is a set of entries: one per live
// (group, window), plus one meta entry (watermark, counters, and an opaque
// position the host stores with it, such as an input offset). A host writes
// them to a file (full checkpoint) or to a compacted topic (incremental: only
// the entries changed since the previous checkpoint, a nil value for an
// entry that no longer exists). Restoring the entries into a fresh operator
// for the same query resumes it exactly: revisions continue and no window is
// finalized twice.
//
// Entry keys: "m" for the meta entry; "g" + 8-byte window start + the
// group's binary key for a group. The value encoding starts with a format
// version byte that only moves forward.

const stateVersion = 1

// opStateVersion is the format of the operator's group and meta entries:
// version 2 added the hash of a group's last published value (without it
// a restart would publish an unchanged value again, or suppress a changed
// one) and the UnchangedSuppressed counter. Version 1 entries are still
// read: their groups publish their next record whatever its value, as
// version 1 did.
const opStateVersion = 2

// MetaKey is the key of the meta entry (a constant: a byte slice here
// would be package-level state anyone could change).
const MetaKey = "m"

// Checkpoint calls put for each state entry: every entry when full is set,
// otherwise only the entries changed since the previous Checkpoint (value
// nil for a deleted entry). The meta entry, carrying position, comes last.
// While records are queued it returns ErrQueued and writes nothing: a
// queued window is no longer live state and not yet published, so a
// checkpoint taken then would lose it.
func (o *Operator) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if o.Queued() {
		return ErrQueued
	}
	var kb, vb []byte
	if !o.tracking {
		// Changes are tracked only once a host checkpoints (otherwise the
		// change lists would grow without bound); the first checkpoint
		// therefore writes everything.
		full = true
		o.tracking = true
	}
	if full {
		for _, g := range o.liveGroups() {
			kb, vb = o.groupEntry(kb[:0], vb[:0], g)
			if err := put(kb, vb); err != nil {
				return err
			}
			g.set(written, true)
			g.set(ckptDirty, false)
		}
	} else {
		for _, k := range o.ckptDeleted {
			if err := put([]byte(k), nil); err != nil {
				return err
			}
		}
		for _, g := range o.ckptChanged {
			g.set(ckptDirty, false)
			if g.has(dead) {
				continue
			}
			kb, vb = o.groupEntry(kb[:0], vb[:0], g)
			if err := put(kb, vb); err != nil {
				return err
			}
			g.set(written, true)
		}
	}
	o.ckptDeleted = o.ckptDeleted[:0]
	clear(o.ckptChanged)
	o.ckptChanged = o.ckptChanged[:0]
	return put([]byte(MetaKey), o.metaEntry(position))
}

// markCkpt records that g changed since the last checkpoint.
func (o *Operator) markCkpt(g *group) {
	if o.tracking && !g.has(ckptDirty) {
		g.set(ckptDirty, true)
		o.ckptChanged = append(o.ckptChanged, g)
	}
}

// liveGroups lists every live group in a deterministic order.
func (o *Operator) liveGroups() []*group {
	var out []*group
	switch {
	case o.cont != nil:
		_ = o.cont.each(func(g *group) error { out = append(out, g); return nil })
	case o.buckets != nil:
		starts := make([]int64, 0, len(o.buckets))
		for s := range o.buckets {
			starts = append(starts, s)
		}
		sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
		for _, s := range starts {
			_ = o.buckets[s].each(func(g *group) error { out = append(out, g); return nil })
		}
	case o.sessions != nil:
		for _, r := range o.closeHeap.refs {
			out = append(out, r.g)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	}
	return out
}

// appendStateKey appends the checkpoint entry key of a group: its
// creation number, which never changes (a session's start moves when
// sessions merge), then its binary group key.
func appendStateKey(kb []byte, seq uint64, mapKey string) []byte {
	kb = append(kb, 'g')
	kb = binary.BigEndian.AppendUint64(kb, seq)
	return append(kb, mapKey...)
}

func (o *Operator) groupEntry(kb, vb []byte, g *group) ([]byte, []byte) {
	return o.groupEntryVersion(kb, vb, g, opStateVersion)
}

// groupEntryVersion writes g's entry in the given format: a version 1
// entry has no last published value.
func (o *Operator) groupEntryVersion(kb, vb []byte, g *group, version byte) ([]byte, []byte) {
	kb = appendStateKey(kb, g.seq, g.mapKey)
	vb = append(vb, version)
	vb = binary.AppendVarint(vb, g.start)
	vb = binary.AppendVarint(vb, o.groupEnd(g))
	vb = binary.AppendUvarint(vb, g.revision)
	vb = binary.AppendUvarint(vb, g.seq)
	if g.dirtyAt != 0 {
		vb = append(vb, 1)
	} else {
		vb = append(vb, 0)
	}
	switch {
	case version < opStateVersion:
	case g.has(published):
		vb = binary.LittleEndian.AppendUint64(append(vb, 1), o.lastValue(g))
	default:
		vb = append(vb, 0)
	}
	o.cellsOut = decodeKeyBytes(g.mapKey, o.keyTypes, o.cellsOut[:0])
	vb = binary.AppendUvarint(vb, uint64(len(o.cellsOut)))
	for _, c := range o.cellsOut {
		vb = appendValue(vb, c) // informative: restore decodes the cells from the key
	}
	l := o.layout
	w := g.words(l.stride)
	vb = binary.AppendUvarint(vb, uint64(len(l.kernels)))
	for i, k := range l.kernels {
		vb = k.unpack(l.words(w, i)).appendState(vb)
	}
	return kb, vb
}

func (o *Operator) metaEntry(position []byte) []byte {
	s := &o.stats
	return AppendMeta(nil, Meta{Watermark: o.watermark, MaxEventTime: o.maxEventTime, Seq: o.seq,
		Counters: [MetaCounters]int64{s.Rows, s.Filtered, s.EvalErrors, s.Late, s.RecordsOut, s.HavingSuppressed,
			s.WindowsFinalized, s.Duplicates, s.DedupLate, s.UnchangedSuppressed},
		Position: position})
}

// Restore loads one checkpoint entry into an operator that has processed
// nothing yet, and returns the host position when the entry is the meta
// entry. Call FinishRestore after the last entry.
func (o *Operator) Restore(key, val []byte) (position []byte, err error) {
	if o.stats.Rows != 0 || o.restored {
		return nil, fmt.Errorf("%w: restore into an operator that already ran", ErrBadState)
	}
	// A restored operator continues a store that already holds entries:
	// every later change must be tracked, deletes included.
	o.tracking = true
	if len(val) == 0 {
		return nil, nil // a deleted entry
	}
	version := val[0]
	if version != stateVersion && version != opStateVersion {
		return nil, fmt.Errorf("%w: unknown state version %d", ErrBadState, val[0])
	}
	r := &reader{b: val[1:]}
	if string(key) == MetaKey {
		return o.restoreMeta(val)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty entry key", ErrBadState)
	}
	if key[0] == 'd' && len(key) > 1 {
		if version != stateVersion {
			return nil, fmt.Errorf("%w: unknown dedup entry version %d", ErrBadState, version)
		}
		// The input dedup's entries are its own (Dedup.Restore): the
		// operator runs without it.
		return nil, fmt.Errorf("%w: a dedup entry, but the source declares no dedup_key", ErrBadState)
	}
	if len(key) < 9 || key[0] != 'g' {
		return nil, fmt.Errorf("%w: unknown entry key %q", ErrBadState, key)
	}
	if !validGroupKey(key[9:], o.keyTypes) {
		return nil, fmt.Errorf("%w: entry %q: the key is not one of this query's group keys", ErrBadState, key)
	}
	g := &group{mapKey: string(key[9:]), heapIndex: -1, flags: written}
	g.wp = &make([]uint64, o.layout.stride+1)[0] // + a session's end or the value hash
	if o.hashWord {
		g.hashOff = uint16(o.layout.stride)
	}
	g.start = r.varint()
	end := r.varint()
	switch {
	case o.sessions != nil:
		o.setSessionEnd(g, end)
	case o.buckets != nil && end != g.start+o.q.Window.Size:
		return nil, fmt.Errorf("%w: a window [%d, %d) is not one of this query's", ErrBadState, g.start, end)
	}
	g.revision = r.uvarint()
	g.seq = r.uvarint()
	// New groups are numbered after every restored one even if the meta
	// entry (which carries the counter) is missing or older: a reused
	// number would key a new entry like a restored one and overwrite it.
	o.seq = max(o.seq, g.seq)
	if r.byte1() == 1 {
		g.dirtyAt = 1
	}
	var last uint64
	if version >= 2 && r.byte1() == 1 {
		last = r.u64()
		g.set(published, true)
	}
	nc := r.uvarint()
	if nc != uint64(len(o.keyExprs)) {
		return nil, fmt.Errorf("%w: group has %d key cells, the query %d", ErrBadState, nc, len(o.keyExprs))
	}
	for i := uint64(0); i < nc; i++ {
		r.value()
	}
	na := r.uvarint()
	if na != uint64(len(o.q.Aggs)) {
		return nil, fmt.Errorf("%w: group has %d aggregates, the query %d", ErrBadState, na, len(o.q.Aggs))
	}
	l := o.layout
	w := g.words(l.stride)
	for i, k := range l.kernels {
		s := k.fresh()
		if err := s.readState(r); err != nil {
			return nil, err
		}
		k.pack(l.words(w, i), s)
	}
	if r.err != nil {
		return nil, r.err
	}
	if g.has(published) {
		o.setLastValue(g, last)
	}
	// What the entry says must be what the group is: a value that reads
	// but would be written otherwise (trailing bytes, a count that does
	// not fit its aggregate, a window the query has not) is refused.
	if kb, vb := o.groupEntryVersion(nil, nil, g, version); !bytes.Equal(kb, key) || !bytes.Equal(vb, val) {
		if o.sideHashes != nil {
			delete(o.sideHashes, g)
		}
		return nil, fmt.Errorf("%w: entry %q does not hold a state of this query (it would be written back otherwise)", ErrBadState, key)
	}
	o.place(g)
	return nil, nil
}

// restoreMeta loads the meta entry: the clocks, the group counter and the
// counters, which must be as the operator writes them (counts are never
// negative, nothing trails the position).
func (o *Operator) restoreMeta(val []byte) ([]byte, error) {
	m, err := ParseMeta(val) // checks the entry is as the operator writes it
	if err != nil {
		return nil, err
	}
	o.watermark, o.maxEventTime = m.Watermark, m.MaxEventTime
	o.seq = max(o.seq, m.Seq) // a group entry restored first may already have raised it
	s := &o.stats
	for i, p := range []*int64{&s.Rows, &s.Filtered, &s.EvalErrors, &s.Late, &s.RecordsOut, &s.HavingSuppressed, &s.WindowsFinalized, &s.Duplicates, &s.DedupLate, &s.UnchangedSuppressed} {
		*p = m.Counters[i]
	}
	s.Watermark = o.watermark
	o.restoredRows = s.Rows
	s.Rows = 0 // Restore may be called for more entries; Process checks Rows.
	return m.Position, nil
}

// place inserts a restored group into the operator's structures. Groups
// of buckets wait in pending: a bucket stores its groups in creation
// order, which FinishRestore knows only once every entry is read.
func (o *Operator) place(g *group) {
	o.stats.LiveGroups++
	o.addBytes(o.groupBytes + int64(len(g.mapKey)) + int64(o.layout.extraBytes(g.words(o.layout.stride))))
	switch {
	case o.cont != nil, o.buckets != nil:
		o.pending = append(o.pending, g)
	case o.sessions != nil:
		sg := o.sessions[g.mapKey]
		if sg == nil {
			sg = &sessionGroup{key: g.mapKey}
			o.sessions[g.mapKey] = sg
		}
		sg.sessions = append(sg.sessions, g)
		heap.Push(&o.closeHeap, sessionRef{g: g, sg: sg})
	}
}

// FinishRestore orders the restored state as the original run had it.
func (o *Operator) FinishRestore() {
	bySeq := func(gs []*group) {
		sort.Slice(gs, func(i, j int) bool { return gs[i].seq < gs[j].seq })
	}
	bySeq(o.pending)
	for _, g := range o.pending {
		b := o.cont
		if b == nil {
			b = o.bucketAt(g.start, o.groupEnd(g))
		}
		ng := b.add([]byte(g.mapKey), maphash.String(o.seed, g.mapKey))
		key, w, off := ng.mapKey, ng.wp, ng.hashOff
		*ng = *g
		ng.mapKey, ng.wp, ng.hashOff = key, w, off
		copy(ng.words(o.layout.stride), g.words(o.layout.stride))
		if o.hashWord {
			*ng.hashWord() = *g.hashWord()
		}
		if h, ok := o.sideHashes[g]; ok {
			delete(o.sideHashes, g)
			o.sideHashes[ng] = h
		}
	}
	o.pending = nil
	if o.sessions != nil {
		for _, sg := range o.sessions {
			sort.Slice(sg.sessions, func(i, j int) bool { return sg.sessions[i].start < sg.sessions[j].start })
		}
	}
	all := o.liveGroups()
	bySeq(all)
	for _, g := range all {
		if g.dirtyAt != 0 && o.q.Emit.Mode == plan.EmitEarly {
			g.dirtyAt = o.cfg.Nanotime()
			g.set(inDirty, true)
			o.dirty = append(o.dirty, g)
		}
	}
	if o.stats.LiveGroups > o.stats.LiveGroupsPeak {
		o.stats.LiveGroupsPeak = o.stats.LiveGroups
	}
	o.stats.Rows = o.restoredRows
	o.restored = true
}

func appendValue(b []byte, v types.Value) []byte {
	b = append(b, byte(v.Kind), v.Scale)
	if v.Null {
		return append(b, 1)
	}
	b = append(b, 0)
	switch v.Kind {
	case types.KindVarchar:
		b = binary.AppendUvarint(b, uint64(len(v.S)))
		return append(b, v.S...)
	case types.KindDouble:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.F))
	}
	b = binary.AppendVarint(b, v.I)
	return binary.AppendVarint(b, v.Hi)
}

// reader decodes state bytes; the first error sticks and later reads
// return zero values, so decoders check r.err once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated or corrupt %s", ErrBadState, what)
	}
	r.b = nil
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1() byte {
	if len(r.b) < 1 {
		r.fail("byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.fail("bytes")
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail("fixed64")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) f64() float64 { return math.Float64frombits(r.u64()) }

func (r *reader) value() types.Value {
	v := types.Value{Kind: types.Kind(r.byte1()), Scale: r.byte1()}
	if r.byte1() == 1 {
		v.Null = true
		return v
	}
	switch v.Kind {
	case types.KindVarchar:
		n := r.uvarint()
		v.S = string(r.bytes(int(n)))
	case types.KindDouble:
		v.F = r.f64()
	default:
		v.I = r.varint()
		v.Hi = r.varint()
	}
	return v
}
