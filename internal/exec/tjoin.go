package exec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// JoinStateKey is the key of a temporal join's checkpoint entry.
const JoinStateKey = "j"

// JoinStats are a temporal join's counters and state sizes.
type JoinStats struct {
	Events        int64 // events pushed to the join (late ones included)
	LateEvents    int64 // events behind the stream watermark less the allowed lateness: not joined
	Joined        int64 // events joined with a version
	Unmatched     int64 // events with no version (a NULL join key included): dropped by JOIN, NULL-extended by LEFT JOIN
	NullKeys      int64 // events whose join key has a NULL (they never match)
	TableRows     int64 // table rows applied as versions
	LateTableRows int64 // table rows behind the table watermark: not applied
	BadTableRows  int64 // table rows with a NULL primary key cell: not applied
	Buffered      int64 // events waiting for the table watermark now
	BufferedPeak  int64
	Versions      int64 // versions held now
	VersionsPeak  int64
	Keys          int64 // keys with at least one version
	Dropped       int64 // versions dropped as no waiting or future event can need them
	TableWM       int64 // the table's watermark (µs); math.MinInt64 before its first row
	StreamWM      int64 // the stream's watermark as the join sees it
}

// TemporalJoin is the state of an event-time temporal join (see
// plan.TemporalJoin): the versions of each key of the table, and the
// events waiting until the table's watermark has passed their time.
//
// An event of time t is released once the table watermark is above t (no
// table row at or before t can still come: rows behind the watermark are
// late) or the table has ended, and joins the latest version of its key
// with a time at or before t. Released events come out in (time, arrival)
// order. Per key, every version older than the newest one at or before the
// horizon (the stream watermark less the allowed lateness, or the oldest
// waiting event if earlier) is dropped: no waiting or future event that is
// not late can need it. So the state is bounded by the two watermarks.
//
// Not safe for concurrent use.
type TemporalJoin struct {
	j        *plan.TemporalJoin
	lateness int64
	max      int

	buf     eventHeap
	seq     uint64
	keys    map[string]int32 // key bytes -> index in vers
	vers    verSlots         // per key, its versions by time
	nver    int64
	sweepAt int64
	ended   bool // the table input ended: every event is releasable
	// external: the host moves both watermarks (AdvanceStream,
	// AdvanceTable); event and row times do not (SetExternalWatermarks).
	external bool
	// Incremental entries (AppendEntries): the key bytes of each key
	// index, the keys whose versions changed, and the entry keys of
	// written events and versions since dropped (tombstones to write).
	incr    bool
	knames  []string
	dirty   map[int32]bool
	deleted [][]byte
	seen    restoredKeys // the entry keys RestoreEntry loaded, until FinishEntries

	streamMax, tableMax int64
	// lateFloor: a row behind it is late too (SetLateFloor; a Kafka
	// host's row's own table partition's watermark).
	lateFloor int64
	stats     JoinStats
	key       []byte
	cells     []types.Value
	nullAt    int
	out       []types.Value
	keep      []int  // the table columns the query reads: the cells a version holds
	enc       []byte // scratch for a version's cells
}

// version is one version of a key: its time and the cells of the table
// columns the query reads (TemporalJoin.keep, in that order), encoded
// with appendValue in one string, so a version is two words and one
// allocation whatever the table's width, and a joined row's strings are
// substrings of it (no copy). The other columns are NULL in a joined row,
// as the table decoder leaves them.
type version struct {
	t     int64
	cells string
	saved bool // incremental entries: written as of the last AppendEntries
}

type waiting struct {
	t     int64
	seq   uint64
	row   []types.Value
	saved bool // incremental entries: written as of the last AppendEntries
}

// verSlots holds each key's versions, by key index, in chunks of a
// fixed size: a table of many keys grows without copying (and
// page-faulting) an ever larger slice.
type verSlots struct {
	chunks [][][]version
	n      int
}

const verChunk = 4096

func (v *verSlots) at(i int32) *[]version { return &v.chunks[i/verChunk][i%verChunk] }

func (v *verSlots) add(vs []version) int32 {
	if v.n%verChunk == 0 && v.n/verChunk == len(v.chunks) {
		v.chunks = append(v.chunks, make([][]version, verChunk))
	}
	i := int32(v.n)
	v.n++
	*v.at(i) = vs
	return i
}

func (v *verSlots) reset() {
	for _, c := range v.chunks {
		clear(c)
	}
	v.n = 0
}

// eventHeap is a min-heap by (time, arrival); hand-written rather than
// container/heap so a push does not box each event in an interface.
type eventHeap []waiting

func (h eventHeap) less(i, j int) bool {
	return h[i].t < h[j].t || h[i].t == h[j].t && h[i].seq < h[j].seq
}

func (h *eventHeap) push(w waiting) {
	*h = append(*h, w)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *eventHeap) pop() waiting {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = waiting{}
	a = a[:n]
	a.down(0)
	*h = a
	return top
}

func (h eventHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h eventHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// NewTemporalJoin returns the join state of q (q.Join set). maxBuffered
// bounds the waiting events (0: plan.DefaultJoinBuffer).
func NewTemporalJoin(q *plan.Query, maxBuffered int) (*TemporalJoin, error) {
	j := q.Join
	if j == nil {
		return nil, fmt.Errorf("exec: query %s has no temporal join", q.Name)
	}
	if j.Stream.TimeCol < 0 || j.Table.TimeCol < 0 || len(j.StreamKey) != len(j.TableKey) || len(j.TableKey) == 0 {
		return nil, fmt.Errorf("exec: query %s: malformed temporal join", q.Name)
	}
	if maxBuffered <= 0 {
		maxBuffered = plan.DefaultJoinBuffer
	}
	t := &TemporalJoin{j: j, lateness: q.Emit.AllowedLateness, max: maxBuffered, keys: map[string]int32{},
		streamMax: math.MinInt64, tableMax: math.MinInt64, sweepAt: 1024}
	t.stats.TableWM, t.stats.StreamWM = math.MinInt64, math.MinInt64
	t.lateFloor = math.MinInt64
	sw := len(j.Stream.Columns)
	t.out = make([]types.Value, sw+len(j.Table.Columns))
	for i, c := range j.Table.Columns {
		// A query without UsedColumns (a plan built by hand) reads them all.
		if q.UsedColumns == nil || j.Offset+i < len(q.UsedColumns) && q.UsedColumns[j.Offset+i] {
			t.keep = append(t.keep, i)
		}
		t.out[sw+i] = types.NullOf(c.Type)
	}
	return t, nil
}

// Stats returns the counters.
func (t *TemporalJoin) Stats() JoinStats {
	s := t.stats
	s.Buffered, s.Versions, s.Keys = int64(len(t.buf)), t.nver, int64(len(t.keys))
	return s
}

// TableWatermark is the table's watermark (µs).
func (t *TemporalJoin) TableWatermark() int64 { return t.stats.TableWM }

// horizon: no event that is not late, waiting or to come, is before it.
func (t *TemporalJoin) horizon() int64 {
	h := satSub(t.stats.StreamWM, t.lateness)
	if len(t.buf) > 0 && t.buf[0].t < h {
		h = t.buf[0].t
	}
	return h
}

// Late reports whether an event of time ts is late at the join: behind
// the stream watermark less the allowed lateness, where the versions it
// would need may be gone.
func (t *TemporalJoin) Late(ts int64) bool { return ts < satSub(t.stats.StreamWM, t.lateness) }

// PushEvent takes one stream row (the stream source's columns). A late
// event is counted and reported (true), not kept. ErrJoinBuffer: the
// buffer is full and nothing was done. The row is copied.
func (t *TemporalJoin) PushEvent(row []types.Value) (late bool, err error) {
	ts := row[t.j.Stream.TimeCol].I
	if t.Late(ts) {
		t.stats.Events++
		t.stats.LateEvents++
		return true, nil
	}
	if len(t.buf) >= t.max {
		return false, fmt.Errorf("%w: %d events wait for the table watermark of %s (%s) to pass their time; push table rows first",
			ErrJoinBuffer, len(t.buf), t.j.Table.Name, wmText(t.stats.TableWM))
	}
	t.stats.Events++
	t.seq++
	t.buf.push(waiting{t: ts, seq: t.seq, row: types.CloneRow(row)})
	if n := int64(len(t.buf)); n > t.stats.BufferedPeak {
		t.stats.BufferedPeak = n
	}
	t.Observe(ts)
	return false, nil
}

// Observe moves the stream's watermark by an event of time ts (its time
// less the watermark delay, if later; nothing when the host moves it):
// an event pushed, or one its host dropped before the join (a later copy
// the stream's input dedup dropped), whose time moves the watermark as
// every decoded event's does.
func (t *TemporalJoin) Observe(ts int64) {
	if ts > t.streamMax {
		t.observe(ts)
	}
}

// observe is Observe of a new greatest time, apart so that Observe, on
// every event's path, inlines.
func (t *TemporalJoin) observe(ts int64) {
	t.streamMax = ts
	if !t.external {
		t.AdvanceStream(satSub(ts, t.j.Stream.WatermarkDelay))
	}
}

// StreamWatermark is the stream's watermark (µs).
func (t *TemporalJoin) StreamWatermark() int64 { return t.stats.StreamWM }

// JoinNow joins an event that need not wait, without copying it: one
// that is not late, while no event waits, and whose time the table's
// watermark has passed (or the table has ended). It returns the joined
// row (valid until the next call; nil for an inner join's event without
// a version) and true, counted as PushEvent and Release count; false:
// nothing was done, the caller pushes the event (PushEvent).
func (t *TemporalJoin) JoinNow(row []types.Value) ([]types.Value, bool, error) {
	ts := row[t.j.Stream.TimeCol].I
	if len(t.buf) > 0 || !(t.ended || ts < t.stats.TableWM) || t.Late(ts) {
		return nil, false, nil
	}
	t.stats.Events++
	t.seq++
	out, err := t.join(row, ts)
	// The stream watermark moves after the join, so a sweep cannot drop
	// a version this event needs (as the event waiting in the buffer
	// holds the horizon back in PushEvent).
	t.Observe(ts)
	return out, true, err
}

// AdvanceStream moves the stream watermark to wm if that is later (the
// host knows no earlier event will come).
func (t *TemporalJoin) AdvanceStream(wm int64) {
	if wm > t.stats.StreamWM {
		t.stats.StreamWM = wm
		t.maybeSweep()
	}
}

// AdvanceTable moves the table watermark to wm if that is later.
func (t *TemporalJoin) AdvanceTable(wm int64) {
	if wm > t.stats.TableWM {
		t.stats.TableWM = wm
	}
}

// SetExternalWatermarks makes the host the only one to move the two
// watermarks (AdvanceStream, AdvanceTable): a host whose inputs are split
// over partitions (Kafka) knows them as the minimum over the partitions,
// which the times of the events and rows one join sees do not tell.
// Lateness, release and pruning follow the host's watermarks by the same
// rules.
func (t *TemporalJoin) SetExternalWatermarks() { t.external = true }

// Newest is the time of the newest waiting event (math.MinInt64 when none
// waits).
func (t *TemporalJoin) Newest() int64 {
	n := int64(math.MinInt64)
	for _, w := range t.buf {
		n = max(n, w.t)
	}
	return n
}

// EndTable marks the table input ended: no row will come, so every
// waiting event is releasable.
func (t *TemporalJoin) EndTable() { t.ended = true }

// Ended reports whether the table input has ended (EndTable, also after a
// restore of a checkpoint taken after it).
func (t *TemporalJoin) Ended() bool { return t.ended }

func wmText(wm int64) string {
	if wm == math.MinInt64 {
		return "no row yet"
	}
	return plan.ValueText(types.Value{Kind: types.KindTimestamp, I: wm})
}

// SetLateFloor makes a table row behind floor late too, until the next
// call (math.MinInt64: none). A host whose table watermark is a minimum
// over the table's partitions (Kafka) sets it to the watermark of the
// row's own partition, so that a row is late exactly when it is behind
// the rows before it in its partition, whatever the other partitions'
// progress and however the host batches the watermark's moves.
func (t *TemporalJoin) SetLateFloor(floor int64) { t.lateFloor = floor }

// PushTable takes one table row (the table's columns): the version of its
// key valid from its time. A row behind the table watermark is late
// (counted, reported, not applied); a row with a NULL key cell is an
// error (counted, not applied). A second version of a key at the same
// time replaces the first (an upsert). The row is copied.
func (t *TemporalJoin) PushTable(row []types.Value) (late bool, err error) {
	tc := t.j.Table.TimeCol
	ts := row[tc].I
	if ts < t.stats.TableWM || ts < t.lateFloor {
		t.stats.LateTableRows++
		return true, nil
	}
	key, err := t.keyOf(t.j.TableKey, row)
	if err != nil {
		t.stats.BadTableRows++
		return false, err
	}
	if key == nil {
		t.stats.BadTableRows++
		return false, &DecodeError{Column: t.j.Table.Columns[t.j.Table.PrimaryKey[t.nullAt]].Name, Msg: "a primary key cell is NULL: the row is the version of no key"}
	}
	t.stats.TableRows++
	ki, ok := t.keys[string(key)]
	if !ok {
		ki = t.vers.add(nil)
		t.keys[string(key)] = ki
		t.knames = append(t.knames, string(key))
	}
	vs := *t.vers.at(ki)
	i, found := slices.BinarySearchFunc(vs, ts, func(v version, ts int64) int { return cmpInt(v.t, ts) })
	cells := t.encode(row)
	if found {
		vs[i].cells = cells
		vs[i].saved = false
	} else {
		vs = slices.Insert(vs, i, version{t: ts, cells: cells})
		t.nver++
		if t.nver > t.stats.VersionsPeak {
			t.stats.VersionsPeak = t.nver
		}
	}
	if t.incr {
		t.dirty[ki] = true
	}
	*t.vers.at(ki) = t.prune(ki, vs)
	if ts > t.tableMax {
		t.tableMax = ts
		if !t.external {
			t.AdvanceTable(satSub(ts, t.j.Table.WatermarkDelay))
		}
	}
	t.maybeSweep()
	return false, nil
}

// encode returns the cells of a table row a version keeps, copied (the
// row's strings may alias a decoder's buffers).
func (t *TemporalJoin) encode(row []types.Value) string {
	t.enc = t.enc[:0]
	for _, c := range t.keep {
		t.enc = appendValue(t.enc, row[c])
	}
	return string(t.enc)
}

// decodeInto writes a version's cells into row (the table's columns);
// strings are substrings of cells.
func (t *TemporalJoin) decodeInto(row []types.Value, cells string) {
	p := 0
	for _, c := range t.keep {
		row[c], p = cellAt(cells, p)
	}
}

// cellAt decodes the value appendValue wrote at s[p:] (s was written by
// this process, so it is well formed) and returns it and the position
// after it. A string is a substring of s.
func cellAt(s string, p int) (types.Value, int) {
	v := types.Value{Kind: types.Kind(s[p]), Scale: s[p+1]}
	if s[p+2] == 1 {
		v.Null = true
		return v, p + 3
	}
	p += 3
	switch v.Kind {
	case types.KindVarchar:
		n, w := uvarintAt(s, p)
		p += w
		v.S = s[p : p+int(n)]
		return v, p + int(n)
	case types.KindDouble:
		v.F = math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[p : p+8])))
		return v, p + 8
	}
	i, w := varintAt(s, p)
	v.I = i
	p += w
	i, w = varintAt(s, p)
	v.Hi = i
	return v, p + w
}

func uvarintAt(s string, p int) (uint64, int) {
	var x uint64
	var sh uint
	for i := p; ; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<sh, i - p + 1
		}
		x |= uint64(b&0x7f) << sh
		sh += 7
	}
}

func varintAt(s string, p int) (int64, int) {
	ux, n := uvarintAt(s, p)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// keyOf evaluates key expressions over row and returns the key bytes
// (join equality, appendJoinKey: NaN, +Inf and -Inf each their own value,
// -0.0 is 0.0), or nil when a cell is NULL (t.nullAt is its position).
func (t *TemporalJoin) keyOf(exprs []plan.Expr, row []types.Value) ([]byte, error) {
	t.cells = t.cells[:0]
	for i, e := range exprs {
		v, err := e.Eval(row)
		if err != nil {
			return nil, &EvalError{Where: "join key " + e.String(), Err: err}
		}
		if v.Null {
			t.nullAt = i
			return nil, nil
		}
		t.cells = append(t.cells, v)
	}
	t.key = appendJoinKey(t.key[:0], t.cells)
	return t.key, nil
}

// prune drops the versions of one key that no event can need: all before
// the newest one at or before the horizon.
func (t *TemporalJoin) prune(ki int32, vs []version) []version {
	h := t.horizon()
	n := 0
	for n+1 < len(vs) && vs[n+1].t <= h {
		n++
	}
	if n == 0 {
		return vs
	}
	if t.incr {
		for _, v := range vs[:n] {
			if v.saved {
				t.deleted = append(t.deleted, versionEntryKey(t.knames[ki], v.t))
			}
		}
	}
	clear(vs[:n])
	t.nver -= int64(n)
	t.stats.Dropped += int64(n)
	return slices.Delete(vs, 0, n)
}

// maybeSweep prunes every key once the versions have doubled since the
// last sweep, so keys no longer updated do not hold old versions forever
// and the cost stays amortized O(1) per version.
func (t *TemporalJoin) maybeSweep() {
	if t.nver < t.sweepAt {
		return
	}
	for i := range int32(t.vers.n) {
		p := t.vers.at(i)
		*p = t.prune(i, *p)
	}
	t.sweepAt = max(2*t.nver, 1024)
}

// Ready reports whether a waiting event can be released.
func (t *TemporalJoin) Ready() bool {
	return len(t.buf) > 0 && (t.ended || t.buf[0].t < t.stats.TableWM)
}

// Waiting is how many events wait.
func (t *TemporalJoin) Waiting() int { return len(t.buf) }

// Oldest is the time of the oldest waiting event (math.MaxInt64 when none
// waits): the downstream watermark may not pass it.
func (t *TemporalJoin) Oldest() int64 {
	if len(t.buf) == 0 {
		return math.MaxInt64
	}
	return t.buf[0].t
}

// Release pops the oldest releasable event and joins it: the joined row
// (valid until the next call) and true, or, for an inner join's event
// without a version, nil and true (counted). false: nothing releasable.
func (t *TemporalJoin) Release() ([]types.Value, bool, error) {
	if !t.Ready() {
		return nil, false, nil
	}
	ev := t.buf.pop()
	if ev.saved {
		t.deleted = append(t.deleted, eventEntryKey(ev.seq))
	}
	out, err := t.join(ev.row, ev.t)
	return out, true, err
}

// join joins one stream row of time ts with its key's version: the
// joined row (valid until the next call), or nil for an inner join's
// event without a version (counted).
func (t *TemporalJoin) join(row []types.Value, ts int64) ([]types.Value, error) {
	j := t.j
	n := copy(t.out, row)
	key, err := t.keyOf(j.StreamKey, row)
	if err != nil {
		return nil, err
	}
	var v *version
	if key == nil {
		t.stats.NullKeys++
	} else if ki, ok := t.keys[string(key)]; ok && len(*t.vers.at(ki)) > 0 {
		vs := *t.vers.at(ki)
		i, found := slices.BinarySearchFunc(vs, ts, func(v version, ts int64) int { return cmpInt(v.t, ts) })
		if found {
			v = &vs[i]
		} else if i > 0 {
			v = &vs[i-1]
		}
	}
	if v == nil {
		t.stats.Unmatched++
		if !j.Left {
			return nil, nil
		}
		for _, c := range t.keep {
			t.out[n+c] = types.NullOf(j.Table.Columns[c].Type)
		}
		return t.out, nil
	}
	t.stats.Joined++
	t.decodeInto(t.out[n:], v.cells)
	return t.out, nil
}

// AppendState appends the join's checkpoint entry: watermarks, counters,
// the waiting events and the versions. Keys are written in sorted order,
// so equal states give equal bytes.
func (t *TemporalJoin) AppendState(b []byte) []byte {
	b = append(b, stateVersion)
	s := &t.stats
	for _, x := range []int64{t.streamMax, t.tableMax, s.StreamWM, s.TableWM, int64(t.seq), s.Events, s.LateEvents, s.Joined,
		s.Unmatched, s.NullKeys, s.TableRows, s.LateTableRows, s.BadTableRows, s.BufferedPeak, s.VersionsPeak, s.Dropped} {
		b = binary.AppendVarint(b, x)
	}
	if t.ended {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	evs := slices.Clone(t.buf)
	slices.SortFunc(evs, func(a, c waiting) int {
		if a.t != c.t {
			return cmpInt(a.t, c.t)
		}
		return cmpInt(int64(a.seq), int64(c.seq))
	})
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, e := range evs {
		b = binary.AppendUvarint(b, e.seq)
		b = appendRow(b, e.row)
	}
	keys := make([]string, 0, len(t.keys))
	for k := range t.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// A version is written as a whole table row: the cells it keeps, its
	// time in the time column and NULL elsewhere (what the table decoder
	// gives for the columns the query does not read).
	tcols := t.j.Table.Columns
	row := make([]types.Value, len(tcols))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		vs := *t.vers.at(t.keys[k])
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			for i, c := range tcols {
				row[i] = types.NullOf(c.Type)
			}
			tc := t.j.Table.TimeCol
			row[tc] = types.Value{Kind: tcols[tc].Type.Kind, Scale: tcols[tc].Type.Scale, I: v.t}
			t.decodeInto(row, v.cells)
			b = appendRow(b, row)
		}
	}
	return b
}

// cloneRow copies a row and its strings: a decoder's cells may alias its
// input or scratch buffers, which the next record reuses.
func appendRow(b []byte, row []types.Value) []byte {
	b = binary.AppendUvarint(b, uint64(len(row)))
	for _, v := range row {
		b = appendValue(b, v)
	}
	return b
}

func (r *reader) row(width int) []types.Value {
	n := int(r.uvarint())
	if n != width {
		r.fail("row width")
		return nil
	}
	row := make([]types.Value, n)
	for i := range row {
		row[i] = r.value()
	}
	return row
}

// RestoreState loads an entry AppendState wrote into a join that has
// taken nothing yet.
func (t *TemporalJoin) RestoreState(val []byte) error {
	if t.stats.Events != 0 || t.stats.TableRows != 0 || t.stats.LateTableRows != 0 {
		return fmt.Errorf("%w: restore into a temporal join that already ran", ErrBadState)
	}
	if len(val) == 0 || val[0] != stateVersion {
		return fmt.Errorf("%w: bad temporal join entry", ErrBadState)
	}
	r := &reader{b: val[1:]}
	s := &t.stats
	var seq int64
	for _, p := range []*int64{&t.streamMax, &t.tableMax, &s.StreamWM, &s.TableWM, &seq, &s.Events, &s.LateEvents, &s.Joined,
		&s.Unmatched, &s.NullKeys, &s.TableRows, &s.LateTableRows, &s.BadTableRows, &s.BufferedPeak, &s.VersionsPeak, &s.Dropped} {
		*p = r.varint()
	}
	t.seq = uint64(seq)
	ended := r.byte1()
	t.ended = ended == 1
	if r.err == nil && ended > 1 {
		return fmt.Errorf("%w: temporal join entry: the table's end is neither reached nor not", ErrBadState)
	}
	if r.err == nil {
		if err := checkCounts("sequence, events, joins, table rows, peaks", seq, s.Events, s.LateEvents, s.Joined, s.Unmatched,
			s.NullKeys, s.TableRows, s.LateTableRows, s.BadTableRows, s.BufferedPeak, s.VersionsPeak, s.Dropped); err != nil {
			return fmt.Errorf("%w: temporal join entry: %v", ErrBadState, err)
		}
	}
	if err := t.restoreContent(r); err != nil {
		return fmt.Errorf("%w: temporal join entry: %v", ErrBadState, err)
	}
	t.sweepAt = max(2*t.nver, 1024)
	return nil
}

// restoreContent reads the waiting events and the versions of an
// AppendState entry, each checked as the join would have made it.
func (t *TemporalJoin) restoreContent(r *reader) error {
	ne := int(r.uvarint())
	t.buf = t.buf[:0]
	seqs := map[uint64]bool{}
	for i := 0; i < ne && r.err == nil; i++ {
		seq := r.uvarint()
		row := r.row(len(t.j.Stream.Columns))
		if r.err != nil {
			break
		}
		if err := checkRow(row, t.j.Stream); err != nil {
			return fmt.Errorf("event %d: %v", seq, err)
		}
		if seq == 0 || seq > t.seq || seqs[seq] {
			return fmt.Errorf("event %d: not an arrival number the join gave (it gave 1 to %d, each once)", seq, t.seq)
		}
		seqs[seq] = true
		w := waiting{t: row[t.j.Stream.TimeCol].I, seq: seq, row: row}
		if n := len(t.buf); n > 0 && (t.buf[n-1].t > w.t || t.buf[n-1].t == w.t && t.buf[n-1].seq > seq) {
			return fmt.Errorf("event %d: events not in (time, arrival) order", seq)
		}
		t.buf = append(t.buf, w)
	}
	t.buf.init()
	nk := int(r.uvarint())
	clear(t.keys)
	t.vers.reset()
	t.knames = t.knames[:0]
	t.nver = 0
	for i := 0; i < nk && r.err == nil; i++ {
		k := string(r.bytes(int(r.uvarint())))
		if i > 0 && r.err == nil && k <= t.knames[i-1] {
			return fmt.Errorf("key %q: keys not in order, or one twice", k)
		}
		nv := int(r.uvarint())
		vs := make([]version, 0, min(nv, 1024))
		for x := 0; x < nv && r.err == nil; x++ {
			row := r.row(len(t.j.Table.Columns))
			if r.err != nil {
				break
			}
			v, err := t.restoredVersion(k, row)
			if err != nil {
				return err
			}
			if len(vs) > 0 && vs[len(vs)-1].t >= v.t {
				return fmt.Errorf("key %q: versions not in time order", k)
			}
			vs = append(vs, v)
		}
		t.keys[k] = t.vers.add(vs)
		t.knames = append(t.knames, k)
		t.nver += int64(len(vs))
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// restoredVersion checks a restored version (a whole table row) of key k:
// its cells are the table's, and k is a key of the table's key types,
// the row's own where the row holds its key cells (a version keeps only
// the columns the query reads).
func (t *TemporalJoin) restoredVersion(k string, row []types.Value) (version, error) {
	ts := row[t.j.Table.TimeCol].I
	if err := checkRow(row, t.j.Table); err != nil {
		return version{}, fmt.Errorf("key %q version at %s: %v", k, wmText(ts), err)
	}
	if !validJoinKey([]byte(k), t.j.TableKey) {
		return version{}, fmt.Errorf("key %q: not a key of the table's key (%d cells)", k, len(t.j.TableKey))
	}
	if key, err := t.keyOf(t.j.TableKey, row); err == nil && key != nil && string(key) != k {
		return version{}, fmt.Errorf("key %q version at %s: the row's key is not the key it is held under", k, wmText(ts))
	}
	return version{t: ts, cells: t.encode(row)}, nil
}

// NewSourceDecoder returns a decoder of src (a join's stream or table)
// converting only the columns used marks.
func NewSourceDecoder(src *plan.Source, used []bool) *Decoder {
	d := NewDecoder(src)
	d.used = used
	if d.derive != nil {
		d.used = d.derive.SetUsed(used)
	}
	return d
}

// NewMessageSourceDecoder is NewMessageDecoder for a join's input (its
// stream or table) converting only the columns used marks, as
// NewSourceDecoder does for a file: a Kafka run decodes what a file run
// decodes, so a column the query never reads rejects no event in either.
func NewMessageSourceDecoder(src *plan.Source, used []bool, f MessageFormat) *Decoder {
	d := NewMessageDecoder(src, f)
	d.used = used
	if d.derive != nil {
		d.used = d.derive.SetUsed(used)
	}
	return d
}

// Incremental checkpoint entries. A host that checkpoints often (Kafka:
// every transaction) cannot rewrite the whole join each time, nor hold it
// in one record: with SetIncremental the join's state is one small header
// entry (JoinStateKey: watermarks and counters, written as an AppendState
// entry with no events and no versions) plus one entry per waiting event
// (JoinEventPrefix + its arrival number, big-endian) and one per version
// (JoinVersionPrefix + its time, big-endian with the sign bit flipped,
// + the key bytes), each a row as AppendState writes it. AppendEntries
// writes what changed since its last call: new events and versions, and
// tombstones (nil values) for the written ones since released or dropped.
const (
	JoinEventPrefix   = "je"
	JoinVersionPrefix = "jv"
)

// SetIncremental selects the incremental entries (AppendEntries,
// RestoreEntry), before anything is pushed.
func (t *TemporalJoin) SetIncremental() {
	t.incr = true
	t.dirty = map[int32]bool{}
}

func eventEntryKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(JoinEventPrefix), seq)
}

func versionEntryKey(key string, ts int64) []byte {
	b := binary.BigEndian.AppendUint64([]byte(JoinVersionPrefix), uint64(ts)^1<<63)
	return append(b, key...)
}

// IsJoinEntry reports whether key is one of the incremental entries of
// events and versions.
func IsJoinEntry(key []byte) bool {
	return len(key) > 2 && (string(key[:2]) == JoinEventPrefix || string(key[:2]) == JoinVersionPrefix)
}

// versionRow writes a version as a whole table row into row.
func (t *TemporalJoin) versionRow(row []types.Value, v *version) {
	tcols := t.j.Table.Columns
	for i, c := range tcols {
		row[i] = types.NullOf(c.Type)
	}
	tc := t.j.Table.TimeCol
	row[tc] = types.Value{Kind: tcols[tc].Type.Kind, Scale: tcols[tc].Type.Scale, I: v.t}
	t.decodeInto(row, v.cells)
}

// AppendEntries writes the join's incremental entries through put: the
// header (prefix, then an AppendState entry without events or versions),
// then every event and version not written yet (all of them when full),
// and a tombstone for each written one since released or dropped.
func (t *TemporalJoin) AppendEntries(full bool, prefix []byte, put func(key, val []byte) error) error {
	evs, keys := t.buf, t.keys
	t.buf, t.keys = nil, nil
	hdr := t.AppendState(prefix)
	t.buf, t.keys = evs, keys
	if err := put([]byte(JoinStateKey), hdr); err != nil {
		return err
	}
	for _, k := range t.deleted {
		if err := put(k, nil); err != nil {
			return err
		}
	}
	t.deleted = t.deleted[:0]
	var b []byte
	for i := range t.buf {
		e := &t.buf[i]
		if e.saved && !full {
			continue
		}
		b = appendRow(b[:0], e.row)
		if err := put(eventEntryKey(e.seq), b); err != nil {
			return err
		}
		e.saved = true
	}
	row := make([]types.Value, len(t.j.Table.Columns))
	write := func(ki int32) error {
		vs := *t.vers.at(ki)
		for i := range vs {
			v := &vs[i]
			if v.saved && !full {
				continue
			}
			t.versionRow(row, v)
			b = appendRow(b[:0], row)
			if err := put(versionEntryKey(t.knames[ki], v.t), b); err != nil {
				return err
			}
			v.saved = true
		}
		return nil
	}
	if full {
		for ki := range int32(t.vers.n) {
			if err := write(ki); err != nil {
				return err
			}
		}
	} else {
		dirty := make([]int32, 0, len(t.dirty))
		for ki := range t.dirty {
			dirty = append(dirty, ki)
		}
		slices.Sort(dirty) // equal states, equal order of entries
		for _, ki := range dirty {
			if err := write(ki); err != nil {
				return err
			}
		}
	}
	clear(t.dirty)
	return nil
}

// RestoreEntry loads one incremental entry (IsJoinEntry), after the
// header (RestoreState). Call FinishEntries after the last.
func (t *TemporalJoin) RestoreEntry(key, val []byte) error {
	if err := t.restoreEntry(key, val); err != nil {
		return fmt.Errorf("%w: temporal join entry %q: %v", ErrBadState, key, err)
	}
	return nil
}

func (t *TemporalJoin) restoreEntry(key, val []byte) error {
	r := &reader{b: val}
	var row []types.Value
	var src *plan.Source
	switch {
	case len(key) == 2+8 && string(key[:2]) == JoinEventPrefix:
		src = t.j.Stream
	case len(key) >= 2+8 && string(key[:2]) == JoinVersionPrefix:
		src = t.j.Table
	default:
		return fmt.Errorf("not an entry of a temporal join")
	}
	row = r.row(len(src.Columns))
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return r.err
	}
	if err := checkRow(row, src); err != nil {
		return err
	}
	if !t.seen.add(key) {
		return fmt.Errorf("restored twice (a store holds one value per key)")
	}
	if src == t.j.Stream {
		if !bytes.Equal(appendRow(nil, row), val) {
			return fmt.Errorf("not as the join writes it")
		}
		if binary.BigEndian.Uint64(key[2:]) == 0 {
			return fmt.Errorf("arrival number 0: the join numbers events from 1")
		}
		seq := binary.BigEndian.Uint64(key[2:])
		t.buf = append(t.buf, waiting{t: row[t.j.Stream.TimeCol].I, seq: seq, row: row, saved: true})
		return nil
	}
	ts := int64(binary.BigEndian.Uint64(key[2:10]) ^ 1<<63)
	k := string(key[10:])
	if row[t.j.Table.TimeCol].I != ts {
		return fmt.Errorf("the version's time is not the one in its key")
	}
	v, err := t.restoredVersion(k, row)
	if err != nil {
		return err
	}
	if !bytes.Equal(appendRow(nil, row), val) {
		return fmt.Errorf("not as the join writes it")
	}
	ki, ok := t.keys[k]
	if !ok {
		ki = t.vers.add(nil)
		t.keys[k] = ki
		t.knames = append(t.knames, k)
	}
	v.saved = true
	p := t.vers.at(ki)
	*p = append(*p, v)
	t.nver++
	return nil
}

// FinishEntries completes a restore of incremental entries. (A key has
// one entry per version time, so no two versions of a key share one.)
func (t *TemporalJoin) FinishEntries() {
	t.seen = nil
	t.buf.init()
	for ki := range int32(t.vers.n) {
		slices.SortFunc(*t.vers.at(ki), func(a, b version) int { return cmpInt(a.t, b.t) })
	}
	t.sweepAt = max(2*t.nver, 1024)
}
