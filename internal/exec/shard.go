package exec

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// What a host that runs one query as several operators (internal/drive's
// shards, each holding the groups whose key hashes to it) needs to merge
// their records into the order one operator would give them, and to check
// events before it routes them. Nothing here changes what one operator
// does on its own.

// EmitKind says why a record is being emitted (EmitOrder).
type EmitKind uint8

// The emission kinds.
const (
	EmitOnChange EmitKind = iota // a change record (EMIT CHANGES), published by the event being processed
	EmitOnFinal                  // a window's or session's final record
	EmitOnFlush                  // an early flush (EMIT EARLY)
)

// EmitOrder, called from the Emit callback, says what orders the record
// being emitted: its kind, the creation number of its (group, window)
// (see SetSeq), and for a flush the index of the group in the dirty list
// the flush took (DirtyLen counts that list as it grows).
func (o *Operator) EmitOrder() (kind EmitKind, seq uint64, flushIndex int) {
	if o.emitting != nil {
		seq = o.emitting.seq
	}
	if o.workHead >= len(o.work) {
		return EmitOnChange, seq, 0
	}
	switch w := &o.work[o.workHead]; w.kind {
	case workBucket, workSessions:
		return EmitOnFinal, seq, 0
	case workFlush:
		return EmitOnFlush, seq, w.next - 1
	}
	return EmitOnChange, seq, 0
}

// DirtyLen is the length of the dirty list (the groups an early flush
// will publish, in the order they first changed).
func (o *Operator) DirtyLen() int { return len(o.dirty) }

// Seq is the creation number of the last (group, window) created.
func (o *Operator) Seq() uint64 { return o.seq }

// SetSeq sets the creation number the next (group, window) continues
// from (it gets s+1). Creation numbers order a bucket's groups and break
// ties between sessions that end together; a host running several
// operators numbers them from the global input position so that they
// order across operators as one operator's would.
func (o *Operator) SetSeq(s uint64) { o.seq = s }

// CloseWatermark is the watermark CloseOpenWindows advances to: the
// smallest that closes every open window (the current one if none is
// open).
func (o *Operator) CloseWatermark() int64 {
	wm := o.watermark
	switch {
	case o.buckets != nil:
		for _, b := range o.buckets {
			wm = max(wm, satAdd(b.end, o.lateness))
		}
	case o.sessions != nil:
		for _, r := range o.closeHeap.refs {
			wm = max(wm, satAdd(o.groupEnd(r.g), o.lateness))
		}
	}
	return wm
}

// EntryGroupKey returns the binary group key of a group's checkpoint
// entry (see AppendGroupIdentity), and false for any other entry.
func EntryGroupKey(key []byte) ([]byte, bool) {
	if len(key) < 9 || key[0] != 'g' {
		return nil, false
	}
	return key[9:], true
}

// MetaCounters is the number of counters a meta entry carries (a version 1
// entry carries the first 9).
const MetaCounters = 10

// Meta is the content of a checkpoint's meta entry.
type Meta struct {
	Watermark    int64
	MaxEventTime int64
	Seq          uint64
	// Rows, Filtered, EvalErrors, Late, RecordsOut, HavingSuppressed,
	// WindowsFinalized, Duplicates, DedupLate, UnchangedSuppressed.
	Counters [MetaCounters]int64
	Position []byte
}

// ParseMeta decodes a meta entry's value.
func ParseMeta(val []byte) (Meta, error) {
	var m Meta
	if len(val) == 0 || val[0] != stateVersion && val[0] != opStateVersion {
		return m, fmt.Errorf("%w: bad meta entry", ErrBadState)
	}
	nc := MetaCounters
	if val[0] == stateVersion {
		nc = 9
	}
	r := &reader{b: val[1:]}
	m.Watermark = r.varint()
	m.MaxEventTime = r.varint()
	m.Seq = r.uvarint()
	for i := range nc {
		m.Counters[i] = r.varint()
	}
	n := r.uvarint()
	m.Position = append([]byte(nil), r.bytes(int(n))...)
	if r.err != nil {
		return Meta{}, fmt.Errorf("%w: meta entry: %v", ErrBadState, r.err)
	}
	// The entry must be as the operator writes it: counts are never
	// negative, nothing trails the position, every number is written in
	// its one encoding.
	for _, c := range m.Counters {
		if c < 0 {
			return Meta{}, fmt.Errorf("%w: meta entry: a negative count", ErrBadState)
		}
	}
	if !bytes.Equal(appendMetaVersion(nil, m, val[0]), val) {
		return Meta{}, fmt.Errorf("%w: the meta entry is not as the operator writes it", ErrBadState)
	}
	return m, nil
}

// AppendMeta encodes m as a meta entry's value (what Checkpoint writes).
func AppendMeta(b []byte, m Meta) []byte { return appendMetaVersion(b, m, opStateVersion) }

// appendMetaVersion encodes m in the given format: a version 1 entry
// carries the first 9 counters.
func appendMetaVersion(b []byte, m Meta, version byte) []byte {
	b = append(b, version)
	b = binary.AppendVarint(b, m.Watermark)
	b = binary.AppendVarint(b, m.MaxEventTime)
	b = binary.AppendUvarint(b, m.Seq)
	counters := m.Counters[:]
	if version == stateVersion {
		counters = counters[:9]
	}
	for _, c := range counters {
		b = binary.AppendVarint(b, c)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Position)))
	return append(b, m.Position...)
}

// Admission checks an event as Process would before it touches any
// state, and computes its group key: WHERE, the GROUP BY terms, each
// aggregate's FILTER and arguments, the window's time. A host that routes
// events to several operators by key runs it once per event, so that an
// event that fails is reported when it is pushed, with the error one
// operator would give, and only events that pass reach an operator
// (which then runs without the WHERE: NoFilter).
type Admission struct {
	q       *plan.Query
	keys    *GroupKeys
	argCols [][]int
	// evals: an aggregate has a FILTER or an argument that is not a bare
	// column, which Check must evaluate; otherwise it skips the loop over
	// the aggregates (a reader checks every event of a sharded query).
	evals bool
}

// NewAdmission returns the admission check of q.
func NewAdmission(q *plan.Query) *Admission {
	a := &Admission{q: q, keys: NewGroupKeys(q)}
	for i := range q.Aggs {
		cols := make([]int, len(q.Aggs[i].Args))
		for j, e := range q.Aggs[i].Args {
			cols[j] = bareColumn(e)
			a.evals = a.evals || cols[j] < 0
		}
		a.argCols = append(a.argCols, cols)
		a.evals = a.evals || q.Aggs[i].Filter != nil
	}
	return a
}

// Check appends the row's group key to dst. pass is false for a row the
// WHERE rejects (no key then); err is the *EvalError Process would
// return.
func (a *Admission) Check(dst []byte, row []types.Value) (key []byte, pass bool, err error) {
	q := a.q
	if q.Filter != nil {
		v, err := q.Filter.Eval(row)
		if err != nil {
			return nil, false, &EvalError{Where: "WHERE", Err: err}
		}
		if !v.Bool() {
			return nil, false, nil
		}
	}
	if key, err = a.keys.Append(dst, row); err != nil {
		return nil, false, err
	}
	for i := 0; a.evals && i < len(q.Aggs); i++ {
		if f := q.Aggs[i].Filter; f != nil {
			v, err := f.Eval(row)
			if err != nil {
				return nil, false, &EvalError{Where: "FILTER of aggregate " + q.Aggs[i].Name, Err: err}
			}
			if v.Null || v.I == 0 {
				continue
			}
		}
		for j, e := range q.Aggs[i].Args {
			if a.argCols[i][j] >= 0 {
				continue
			}
			if _, err := e.Eval(row); err != nil {
				return nil, false, &EvalError{Where: "aggregate " + q.Aggs[i].Name, Err: err}
			}
		}
	}
	if w := q.Window; w != nil {
		v := row[w.TimeCol]
		if v.Null {
			return nil, false, &EvalError{Where: "window", Err: errWindowTimeNull}
		}
		ts := v.I
		switch w.Kind {
		case plan.Session:
			if ts > types.MaxTimestamp-w.Gap {
				return nil, false, &EvalError{Where: "window", Err: errWindowRange{ts}}
			}
		default:
			slide := w.Slide
			if w.Kind == plan.Tumble {
				slide = w.Size
			}
			if _, _, ok := alignedWindows(ts, w.Size, slide); !ok {
				return nil, false, &EvalError{Where: "window", Err: errWindowRange{ts}}
			}
		}
	}
	return key, true, nil
}

// NoFilter returns a copy of q without its WHERE and its input dedup,
// for an operator that receives only rows an Admission (and a Dedup)
// passed.
func NoFilter(q *plan.Query) *plan.Query {
	c := *q
	c.Filter = nil
	if q.Source.Dedup != nil {
		src := *q.Source
		src.Dedup = nil
		c.Source = &src
	}
	return &c
}

// Sharded reports whether q's groups can be split among several
// operators by group key: it has GROUP BY terms (a global aggregate is
// one group, and its empty-input row must come from one operator).
func Sharded(q *plan.Query) bool {
	for _, k := range q.Keys {
		if k.Kind == plan.KeyExpr {
			return true
		}
	}
	return false
}

// SatAdd is a + b, saturating at the int64 bounds (what window closes use).
func SatAdd(a, b int64) int64 { return satAdd(a, b) }

// Dedup is a source's input dedup (dedup_key) on its own, for a host that
// routes events to several operators: the first copy of a key is decided
// in input order, before routing, so it runs once, on the reader (the
// operators run with NoFilter, which leaves it out).
type Dedup struct {
	d        *dedupState
	tc       int
	tracking bool
}

// NewDedup returns q's dedup, nil if its source declares no dedup_key.
func NewDedup(q *plan.Query) *Dedup {
	if q.Source.Dedup == nil {
		return nil
	}
	return &Dedup{d: newDedup(q.Source.Dedup), tc: q.Source.TimeCol}
}

// Admit is Process's first step: dup for a later copy of a key within the
// horizon (dropped; it still advances the watermark), beyond for an event
// older than the horizon (dropped; it does not).
func (x *Dedup) Admit(row []types.Value, watermark int64) (dup, beyond bool) {
	return x.d.admit(row, row[x.tc].I, watermark)
}

// AppendKey appends the bytes of row's dedup key to dst; false for a NULL
// key (never deduplicated). It only reads x's configuration, so decoding
// goroutines may call it while another admits.
func (x *Dedup) AppendKey(dst []byte, row []types.Value) ([]byte, bool) {
	v := row[x.d.col]
	if v.Null {
		return dst, false
	}
	return appendDistinctCell(dst, v), true
}

// AdmitKey is Admit for a key AppendKey gave (hasKey false: a NULL key)
// and the event's time.
func (x *Dedup) AdmitKey(key []byte, hasKey bool, ts, watermark int64) (dup, beyond bool) {
	if !hasKey {
		return false, false
	}
	return x.d.admitKey(key, ts, watermark)
}

// Evict forgets the keys the watermark has passed (AdvanceWatermark's).
func (x *Dedup) Evict(watermark int64) { x.d.evict(watermark) }

// Keys and Bytes are the Stats gauges DedupKeys and DedupBytes; Peak is
// the most bytes the state held at once.
func (x *Dedup) Keys() int64  { return int64(len(x.d.seen)) }
func (x *Dedup) Bytes() int64 { return x.d.bytes }
func (x *Dedup) Peak() int64  { return x.d.peak }

// Checkpoint writes the dedup entries ("d" + key) as an operator's
// Checkpoint does: the first time all of them, whatever full says.
func (x *Dedup) Checkpoint(full bool, put func(key, val []byte) error) error {
	if !x.tracking {
		full, x.tracking = true, true
		x.d.tracking = true
	}
	return x.d.checkpoint(full, put)
}

// IsEntry reports whether key is a dedup entry's.
func (x *Dedup) IsEntry(key []byte) bool { return len(key) > 1 && key[0] == 'd' }

// Track starts tracking changes, for a dedup restored from a store
// that holds its entries: the next checkpoint writes only what changed.
func (x *Dedup) Track() { x.tracking, x.d.tracking = true, true }

// Restore loads one dedup entry.
func (x *Dedup) Restore(key, val []byte) error {
	x.Track()
	if len(val) == 0 {
		return nil
	}
	if val[0] != stateVersion {
		return fmt.Errorf("%w: unknown dedup entry version %d", ErrBadState, val[0])
	}
	r := &reader{b: val[1:]}
	ts := r.varint()
	if r.err != nil {
		return r.err
	}
	if !bytes.Equal(binary.AppendVarint([]byte{stateVersion}, ts), val) {
		return fmt.Errorf("%w: dedup entry %q holds more than its time", ErrBadState, key)
	}
	if _, ok := x.d.seen[string(key[1:])]; !ok {
		x.d.add(string(key[1:]), ts)
	}
	return nil
}

// ProcessAdmitted is ProcessKeyed for a key that a's Check computed for
// this row, where a is an Admission of the query this operator runs (or of
// the query NoFilter copied it from): such a key is a well-formed group key
// by construction, so it is not validated again. With any other Admission
// it is ProcessKeyed.
func (o *Operator) ProcessAdmitted(row []types.Value, key []byte, a *Admission) error {
	if a == nil || !sameKeys(a.q.Keys, o.q.Keys) {
		return o.ProcessKeyed(row, key)
	}
	return o.process(row, key)
}

// sameKeys reports whether a and b are the same GROUP BY terms (one
// slice: NoFilter's copy shares its query's).
func sameKeys(a, b []plan.KeyTerm) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// RecordMeta is the metadata every record of the operator carries alike:
// its query's name, whether it is windowed, the window's positions in the
// key. A host that hands records on without their whole Meta (a sharded
// aggregate's merge) restores those fields from it.
func (o *Operator) RecordMeta() changelog.Meta {
	m := o.rec.Meta
	m.Final, m.Revision, m.WindowStart, m.WindowEnd = false, 0, 0, 0
	return m
}

// RenderInto has the operator render its next record's key into the
// spare capacity of buf, from len(buf), and the value right after it
// (each where it fits; else in an array of its own). A host that keeps
// the records it is handed in one buffer then finds their bytes in
// place, and extends the buffer over them instead of copying them. The
// operator writes there until the next RenderInto: the host calls it
// again before it lets anything else read or write past len(buf) (nil
// gives the operator arrays of its own).
func (o *Operator) RenderInto(buf []byte) {
	o.keyOut, o.into = buf[len(buf):len(buf)], true
}
