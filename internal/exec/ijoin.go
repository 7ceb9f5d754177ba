package exec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// IntervalStats are an interval join's counters and state sizes.
type IntervalStats struct {
	LeftRows, RightRows int64 // rows pushed to each input (late ones included)
	LateLeft, LateRight int64 // rows behind their input's watermark less the allowed lateness: not joined
	NullKeys            int64 // rows whose join key has a NULL (they never match)
	Matches             int64 // joined rows produced
	LeftHeld, RightHeld int64 // rows held now
	LeftPeak, RightPeak int64
	Dropped             int64 // rows dropped once the other input's watermark made a match impossible
	LeftWM, RightWM     int64 // the inputs' watermarks (µs); math.MinInt64 before their first row
	OutWM               int64 // the joined stream's watermark (plan.IntervalJoin.OutputWatermark)
}

// IntervalJoin is the state of an interval join of two streams (see
// plan.IntervalJoin). Each input keeps its rows, per key sorted by (time,
// arrival), until the other input's watermark, less the allowed
// lateness, passes the last time a match could have (a left row l until
// the right watermark passes l.ts + Upper, a right row r until the left
// watermark passes r.ts - Lower): a row of the other input that is not
// late cannot match it any more. A row is matched when it arrives,
// against the other input's rows held then; the joined rows wait in
// order for the host (Next). So every pair of rows that are not late and
// match is produced once, whichever arrives first: the set of joined
// rows does not depend on how the inputs interleave.
//
// Not safe for concurrent use.
type IntervalJoin struct {
	j        *plan.IntervalJoin
	lateness int64
	external bool // the watermarks move only by Advance (a graph's reader)
	sides    [2]*ijSide
	seq      uint64
	stats    IntervalStats
	scratch  []types.Value
	key      []byte
	cells    []types.Value
	out      [][]types.Value // joined rows not yet taken
	head     int
	maxHeld  int64 // SetMaxHeld: the bound on held rows of both inputs (0: none)
	// Incremental entries (SetIncremental): the rows held since the last
	// AppendEntries, and the entry keys of written rows since dropped.
	incr    bool
	fresh   []ijRef
	deleted [][]byte
	seen    restoredKeys // the arrival numbers RestoreEntry loaded, until FinishEntries
	// coord: the join is the coordinator of a join split by key over
	// instances (ijoin_split.go): it holds the times of the held rows only.
	coord bool
}

// ijRef names a held row: its input, key and arrival number.
type ijRef struct {
	side int
	key  string
	t    int64
	seq  uint64
}

type ijSide struct {
	src    *plan.Source
	keys   []plan.Expr
	off    int
	rows   map[string][]ijRow
	exp    expHeap
	held   int64
	maxTS  int64
	wm     int64
	ended  bool
	rowsIn int64
	late   int64
	peak   int64
	times  expHeap // a coordinator's: the times of the held rows (no keys)
}

type ijRow struct {
	t     int64
	seq   uint64
	row   []types.Value
	saved bool // incremental entries: written as of the last AppendEntries
}

type expEntry struct {
	t   int64
	key string
}

// expHeap is a min-heap of held rows by time: the order they expire in.
type expHeap []expEntry

func (h *expHeap) push(e expEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].t <= a[i].t {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *expHeap) pop() expEntry {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = expEntry{}
	a = a[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].t < a[l].t {
			m = r
		}
		if a[i].t <= a[m].t {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// NewIntervalJoin returns the join state of q (q.IJoin set). external:
// the inputs' watermarks move only by AdvanceLeft/AdvanceRight, not by
// the rows' times (the inputs are views of one graph).
func NewIntervalJoin(q *plan.Query, external bool) (*IntervalJoin, error) {
	j := q.IJoin
	if j == nil {
		return nil, fmt.Errorf("exec: query %s has no interval join", q.Name)
	}
	if j.Left.TimeCol < 0 || j.Right.TimeCol < 0 || len(j.LeftKey) == 0 || len(j.LeftKey) != len(j.RightKey) || j.Lower > j.Upper {
		return nil, fmt.Errorf("exec: query %s: malformed interval join", q.Name)
	}
	t := &IntervalJoin{j: j, lateness: q.Emit.AllowedLateness, external: external,
		scratch: make([]types.Value, j.Offset+len(j.Right.Columns))}
	t.sides[0] = &ijSide{src: j.Left, keys: j.LeftKey, off: 0, rows: map[string][]ijRow{}, maxTS: math.MinInt64, wm: math.MinInt64}
	t.sides[1] = &ijSide{src: j.Right, keys: j.RightKey, off: j.Offset, rows: map[string][]ijRow{}, maxTS: math.MinInt64, wm: math.MinInt64}
	for i := range t.scratch {
		t.scratch[i] = types.Value{Null: true}
	}
	return t, nil
}

// Stats returns the counters.
func (t *IntervalJoin) Stats() IntervalStats {
	s := t.stats
	l, r := t.sides[0], t.sides[1]
	s.LeftRows, s.RightRows, s.LateLeft, s.LateRight = l.rowsIn, r.rowsIn, l.late, r.late
	s.LeftHeld, s.RightHeld, s.LeftPeak, s.RightPeak = l.held, r.held, l.peak, r.peak
	s.LeftWM, s.RightWM, s.OutWM = l.wm, r.wm, t.OutputWatermark()
	return s
}

// Watermark is input side's watermark (0 left, 1 right).
func (t *IntervalJoin) Watermark(side int) int64 { return t.sides[side].wm }

// OutputWatermark is the joined stream's watermark: no joined row still
// to come has a time below it less the allowed lateness.
func (t *IntervalJoin) OutputWatermark() int64 {
	return t.j.OutputWatermark(t.sides[0].wm, t.sides[1].wm)
}

// Late reports whether a row of side at time ts is late: behind its
// input's watermark less the allowed lateness.
func (t *IntervalJoin) Late(side int, ts int64) bool {
	return ts < satSub(t.sides[side].wm, t.lateness)
}

// Push takes one row of input side (0 left, 1 right; the input source's
// columns). A late row is counted and reported (true), not joined. The
// row's matches with the other input's held rows are queued for Take; the
// row is held while a row of the other input may still match it. The
// row is copied.
func (t *IntervalJoin) Push(side int, row []types.Value) (late bool, err error) {
	return t.push(side, row, false)
}

// PushOwned is Push of a row the caller gives away: its cells are not
// changed or reused after the call (a view's final row the graph copied
// for its reader), so the join holds the row itself. Its strings are
// copied, as Push's are: a held row keeps only its own bytes alive (a
// view's strings share the slabs of its groups' keys).
func (t *IntervalJoin) PushOwned(side int, row []types.Value) (late bool, err error) {
	return t.push(side, row, true)
}

func (t *IntervalJoin) push(side int, row []types.Value, owned bool) (late bool, err error) {
	s, o := t.sides[side], t.sides[1-side]
	ts := row[s.src.TimeCol].I
	s.rowsIn++
	if t.Late(side, ts) {
		s.late++
		return true, nil
	}
	key, err := t.keyOf(s, row)
	if err != nil {
		t.observe(side, ts)
		return false, err
	}
	if key != nil && t.full(side, ts) {
		s.rowsIn--
		return false, t.fullErr(side, ts)
	}
	if key == nil {
		t.stats.NullKeys++
	} else {
		// One copy of the row (its strings may alias the decoder's
		// buffers) serves every joined row it makes and the held row.
		if owned {
			ownStrings(row)
		} else {
			row = types.CloneRow(row)
		}
		t.probe(side, ts, row, o.rows[string(key)])
		if ts >= t.threshold(side) {
			t.seq++
			t.hold(side, string(key), ts, t.seq, row)
		}
	}
	t.observe(side, ts)
	return false, nil
}

// ownStrings gives row's string cells bytes of their own.
func ownStrings(row []types.Value) {
	for i := range row {
		if row[i].S != "" {
			row[i].S = strings.Clone(row[i].S)
		}
	}
}

// observe moves input side's watermark by a row's time (unless external).
func (t *IntervalJoin) observe(side int, ts int64) {
	s := t.sides[side]
	if !t.external && ts > s.maxTS {
		s.maxTS = ts
		t.Advance(side, satSub(ts, s.src.WatermarkDelay))
	}
}

// keyOf evaluates side's key expressions over row (placed in the joined
// row's scratch) and returns the key bytes, or nil when a cell is NULL.
func (t *IntervalJoin) keyOf(s *ijSide, row []types.Value) ([]byte, error) {
	copy(t.scratch[s.off:], row)
	t.cells = t.cells[:0]
	for _, e := range s.keys {
		v, err := e.Eval(t.scratch)
		if err != nil {
			return nil, &EvalError{Where: "join key " + e.String(), Err: err}
		}
		if v.Null {
			return nil, nil
		}
		t.cells = append(t.cells, v)
	}
	t.key = appendJoinKey(t.key[:0], t.cells)
	return t.key, nil
}

// probe queues the joined rows of a new row of side at time ts (an owned
// copy) with the other input's held rows of its key.
func (t *IntervalJoin) probe(side int, ts int64, row []types.Value, other []ijRow) {
	if len(other) == 0 {
		return
	}
	j := t.j
	// The other row's time range: for a left row, ts+Lower..ts+Upper;
	// for a right row, ts-Upper..ts-Lower.
	var lo, hi int64
	var loStrict, hiStrict bool
	// Saturating: an event time near either end of the TIMESTAMP range
	// plus a bound stays in int64 (no real time lies beyond it).
	if side == 0 {
		lo, hi, loStrict, hiStrict = satAdd(ts, j.Lower), satAdd(ts, j.Upper), j.LowerStrict, j.UpperStrict
	} else {
		lo, hi, loStrict, hiStrict = satSub(ts, j.Upper), satSub(ts, j.Lower), j.UpperStrict, j.LowerStrict
	}
	i, _ := slices.BinarySearchFunc(other, lo, func(r ijRow, lo int64) int {
		if r.t < lo || loStrict && r.t == lo {
			return -1
		}
		return 1
	})
	for ; i < len(other); i++ {
		r := other[i]
		if r.t > hi || hiStrict && r.t == hi {
			break
		}
		out := make([]types.Value, len(t.scratch))
		if side == 0 {
			copy(out, row)
			copy(out[j.Offset:], r.row)
		} else {
			copy(out, r.row)
			copy(out[j.Offset:], row)
		}
		t.out = append(t.out, out) // the cells' strings are owned copies: shared, never changed
		t.stats.Matches++
	}
}

// threshold is the time below which a row of side can match no row of
// the other input still to come (that is not late).
func (t *IntervalJoin) threshold(side int) int64 {
	o := t.sides[1-side]
	if o.ended {
		return math.MaxInt64
	}
	h := satSub(o.wm, t.lateness)
	if side == 0 {
		// l is needed while some r >= h has r <= l + Upper: l >= h - Upper.
		return plan.SatAddWatermark(h, -t.j.Upper)
	}
	// r is needed while some l >= h has l <= r - Lower: r >= h + Lower.
	return plan.SatAddWatermark(h, t.j.Lower)
}

// Advance moves input side's watermark to wm if that is later, and drops
// the other input's rows it makes unmatchable.
func (t *IntervalJoin) Advance(side int, wm int64) {
	s := t.sides[side]
	if wm <= s.wm {
		return
	}
	s.wm = wm
	t.expire(1 - side)
}

// End ends input side: no row will come; the other input's rows are
// dropped.
func (t *IntervalJoin) End(side int) {
	s := t.sides[side]
	s.ended = true
	s.wm = math.MaxInt64
	t.expire(1 - side)
}

// Ended reports whether input side has ended.
func (t *IntervalJoin) Ended(side int) bool { return t.sides[side].ended }

func (t *IntervalJoin) expire(side int) {
	s := t.sides[side]
	thr := t.threshold(side)
	if t.coord {
		t.expireTimes(s, thr)
		return
	}
	for len(s.exp) > 0 && s.exp[0].t < thr {
		e := s.exp.pop()
		list := s.rows[e.key]
		n := 0
		for n < len(list) && list[n].t < thr {
			n++
		}
		if n == 0 {
			continue
		}
		if t.incr {
			for _, r := range list[:n] {
				if r.saved {
					t.deleted = append(t.deleted, heldEntryKey(side, r.seq))
				}
			}
		}
		clear(list[:n])
		s.held -= int64(n)
		t.stats.Dropped += int64(n)
		if n == len(list) {
			delete(s.rows, e.key)
		} else {
			s.rows[e.key] = slices.Delete(list, 0, n)
		}
	}
}

// Pending is how many joined rows wait for Take.
func (t *IntervalJoin) Pending() int { return len(t.out) - t.head }

// Take pops the oldest joined row (valid until the next Push), or nil.
func (t *IntervalJoin) Take() []types.Value {
	if t.head >= len(t.out) {
		return nil
	}
	r := t.out[t.head]
	t.out[t.head] = nil
	t.head++
	if t.head == len(t.out) {
		t.out, t.head = t.out[:0], 0
	}
	return r
}

// AppendState appends the join's checkpoint entry: watermarks, counters
// and the held rows of both inputs, keys in sorted order (equal states
// give equal bytes). The joined rows not yet taken are not part of it:
// the host takes them before checkpointing.
func (t *IntervalJoin) AppendState(b []byte) []byte {
	b = append(b, stateVersion)
	for _, x := range []int64{int64(t.seq), t.stats.NullKeys, t.stats.Matches, t.stats.Dropped} {
		b = binary.AppendVarint(b, x)
	}
	for _, s := range t.sides {
		for _, x := range []int64{s.maxTS, s.wm, s.rowsIn, s.late, s.peak} {
			b = binary.AppendVarint(b, x)
		}
		if s.ended {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		keys := make([]string, 0, len(s.rows))
		for k := range s.rows {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			list := s.rows[k]
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(list)))
			for _, r := range list {
				b = binary.AppendUvarint(b, r.seq)
				b = appendRow(b, r.row)
			}
		}
	}
	return b
}

// RestoreState loads an entry AppendState wrote into a join that has
// taken nothing yet.
func (t *IntervalJoin) RestoreState(val []byte) error {
	if t.sides[0].rowsIn != 0 || t.sides[1].rowsIn != 0 {
		return fmt.Errorf("%w: restore into an interval join that already ran", ErrBadState)
	}
	if len(val) == 0 || val[0] != stateVersion {
		return fmt.Errorf("%w: bad interval join entry", ErrBadState)
	}
	r := &reader{b: val[1:]}
	var seq int64
	for _, p := range []*int64{&seq, &t.stats.NullKeys, &t.stats.Matches, &t.stats.Dropped} {
		*p = r.varint()
	}
	t.seq = uint64(seq)
	t.fresh = t.fresh[:0]
	if err := t.restoreSides(r, seq); err != nil {
		return fmt.Errorf("%w: interval join entry: %v", ErrBadState, err)
	}
	return nil
}

// restoreSides reads both inputs' part of an AppendState entry: counters
// and held rows, each checked as the join would have made it.
func (t *IntervalJoin) restoreSides(r *reader, seq int64) error {
	if r.err == nil {
		if err := checkCounts("arrival number, null keys, matches, dropped", seq, t.stats.NullKeys, t.stats.Matches, t.stats.Dropped); err != nil {
			return err
		}
	}
	seqs := map[uint64]bool{}
	for side, s := range t.sides {
		for _, p := range []*int64{&s.maxTS, &s.wm, &s.rowsIn, &s.late, &s.peak} {
			*p = r.varint()
		}
		ended := r.byte1()
		s.ended = ended == 1
		if r.err == nil {
			if ended > 1 {
				return fmt.Errorf("%s: the input's end is neither reached nor not", s.src.Name)
			}
			if err := checkCounts(s.src.Name+" rows, late rows, peak", s.rowsIn, s.late, s.peak); err != nil {
				return err
			}
		}
		clear(s.rows)
		s.exp, s.held = s.exp[:0], 0
		nk := int(r.uvarint())
		prev := ""
		for i := 0; i < nk && r.err == nil; i++ {
			k := string(r.bytes(int(r.uvarint())))
			if i > 0 && r.err == nil && k <= prev {
				return fmt.Errorf("%s key %q: keys not in order, or one twice", s.src.Name, k)
			}
			prev = k
			nr := int(r.uvarint())
			list := make([]ijRow, 0, min(nr, 1024))
			for x := 0; x < nr && r.err == nil; x++ {
				sq := r.uvarint()
				row := r.row(len(s.src.Columns))
				if r.err != nil {
					break
				}
				if err := t.checkHeld(s, k, sq, row); err != nil {
					return err
				}
				if sq > uint64(seq) || seqs[sq] {
					return fmt.Errorf("%s row %d: not an arrival number the join gave (it gave 1 to %d, each once)", s.src.Name, sq, seq)
				}
				seqs[sq] = true
				ts := row[s.src.TimeCol].I
				if n := len(list); n > 0 && (list[n-1].t > ts || list[n-1].t == ts && list[n-1].seq > sq) {
					return fmt.Errorf("%s row %d: rows not in (time, arrival) order", s.src.Name, sq)
				}
				list = append(list, ijRow{t: ts, seq: sq, row: row})
				s.exp.push(expEntry{t: ts, key: k})
				if t.incr {
					// A whole entry's row (the one-entry format, read
					// by an incremental join): its own entry is not
					// written yet, so the next AppendEntries writes it.
					t.fresh = append(t.fresh, ijRef{side: side, key: k, t: ts, seq: sq})
				}
			}
			s.rows[k] = list
			s.held += int64(len(list))
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// checkHeld checks a restored held row of input s under key k: its cells
// are the input's, and k is its key (a row with a NULL key cell is never
// held).
func (t *IntervalJoin) checkHeld(s *ijSide, k string, seq uint64, row []types.Value) error {
	if seq == 0 {
		return fmt.Errorf("%s row 0: the join numbers rows from 1", s.src.Name)
	}
	if err := checkRow(row, s.src); err != nil {
		return fmt.Errorf("%s row %d: %v", s.src.Name, seq, err)
	}
	key, err := t.keyOf(s, row)
	if err != nil || key == nil || string(key) != k {
		return fmt.Errorf("%s row %d: the row's key is not the key %q it is held under", s.src.Name, seq, k)
	}
	return nil
}

// SetMaxHeld bounds the rows the join holds, both inputs together (0: no
// bound): a row that would be one more is refused with
// ErrIntervalJoinFull, having changed nothing.
func (t *IntervalJoin) SetMaxHeld(n int) { t.maxHeld = int64(n) }

// Incremental checkpoint entries. A host that checkpoints often (Kafka:
// every transaction) cannot rewrite every held row each time, nor hold
// them in one record: with SetIncremental the join's state is one small
// header entry (an AppendState entry with no rows, under the host's key)
// plus one entry per held row (IntervalRowPrefix, the input's number,
// the row's arrival number big-endian; the value its key bytes and the
// row), written once when the row is held and deleted with a tombstone
// when it is dropped.
const IntervalRowPrefix = "ji"

// SetIncremental selects the incremental entries (AppendEntries,
// RestoreEntry), before anything is pushed.
func (t *IntervalJoin) SetIncremental() { t.incr = true }

func heldEntryKey(side int, seq uint64) []byte {
	b := append([]byte(IntervalRowPrefix), byte(side))
	return binary.BigEndian.AppendUint64(b, seq)
}

// IsIntervalEntry reports whether key is a held row's incremental entry.
func IsIntervalEntry(key []byte) bool {
	return len(key) == len(IntervalRowPrefix)+1+8 && string(key[:2]) == IntervalRowPrefix
}

// AppendEntries writes the join's incremental entries through put: the
// header (under headerKey: prefix, then an AppendState entry without
// rows), a tombstone for each written row since dropped, then every held
// row not written yet (all of them when full), in arrival order.
func (t *IntervalJoin) AppendEntries(full bool, headerKey, prefix []byte, put func(key, val []byte) error) error {
	var saved [2]map[string][]ijRow
	for i, s := range t.sides {
		saved[i] = s.rows
		s.rows = nil
	}
	hdr := t.AppendState(prefix)
	for i, s := range t.sides {
		s.rows = saved[i]
	}
	if err := put(headerKey, hdr); err != nil {
		return err
	}
	for _, k := range t.deleted {
		if err := put(k, nil); err != nil {
			return err
		}
	}
	t.deleted = t.deleted[:0]
	refs := t.fresh
	if full {
		refs = refs[:0]
		for side, s := range t.sides {
			for k, list := range s.rows {
				for _, r := range list {
					refs = append(refs, ijRef{side: side, key: k, t: r.t, seq: r.seq})
				}
			}
		}
		slices.SortFunc(refs, func(a, b ijRef) int { return cmpInt(int64(a.seq), int64(b.seq)) })
	}
	var b []byte
	for _, ref := range refs {
		list := t.sides[ref.side].rows[ref.key]
		i, ok := slices.BinarySearchFunc(list, ref, func(r ijRow, ref ijRef) int {
			if c := cmpInt(r.t, ref.t); c != 0 {
				return c
			}
			return cmpInt(int64(r.seq), int64(ref.seq))
		})
		if !ok || list[i].saved && !full {
			continue // dropped before it was written (no entry, no tombstone), or written
		}
		b = binary.AppendUvarint(b[:0], uint64(len(ref.key)))
		b = append(b, ref.key...)
		b = appendRow(b, list[i].row)
		if err := put(heldEntryKey(ref.side, ref.seq), b); err != nil {
			return err
		}
		list[i].saved = true
	}
	t.fresh = t.fresh[:0]
	return nil
}

// RestoreEntry loads one held row's entry (IsIntervalEntry), after the
// header (RestoreState). Call FinishEntries after the last.
func (t *IntervalJoin) RestoreEntry(key, val []byte) error {
	if !IsIntervalEntry(key) || key[2] > 1 {
		return fmt.Errorf("%w: interval join entry %q: not an entry of an interval join", ErrBadState, key)
	}
	s := t.sides[key[2]]
	seq := binary.BigEndian.Uint64(key[3:])
	r := &reader{b: val}
	k := string(r.bytes(int(r.uvarint())))
	row := r.row(len(s.src.Columns))
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return fmt.Errorf("%w: interval join entry %q: %v", ErrBadState, key, r.err)
	}
	if err := t.checkHeld(s, k, seq, row); err != nil {
		return fmt.Errorf("%w: interval join entry %q: %v", ErrBadState, key, err)
	}
	b := binary.AppendUvarint(nil, uint64(len(k)))
	if !bytes.Equal(appendRow(append(b, k...), row), val) {
		return fmt.Errorf("%w: interval join entry %q: not as the join writes it", ErrBadState, key)
	}
	// One entry per arrival number: a store keeps one value per key, and
	// the number is the key's whatever the input.
	if !t.seen.add(key[3:]) {
		return fmt.Errorf("%w: interval join entry %q: a row of arrival number %d restored twice", ErrBadState, key, seq)
	}
	s.rows[k] = append(s.rows[k], ijRow{t: row[s.src.TimeCol].I, seq: seq, row: row, saved: true})
	s.held++
	return nil
}

// FinishEntries completes a restore of incremental entries: each key's
// rows in (time, arrival) order, the expiry heaps rebuilt.
func (t *IntervalJoin) FinishEntries() {
	t.seen = nil
	for _, s := range t.sides {
		s.exp = s.exp[:0]
		for k, list := range s.rows {
			slices.SortFunc(list, func(a, b ijRow) int {
				if c := cmpInt(a.t, b.t); c != 0 {
					return c
				}
				return cmpInt(int64(a.seq), int64(b.seq))
			})
			for _, r := range list {
				s.exp.push(expEntry{t: r.t, key: k})
			}
		}
	}
}

// IntervalRoute computes the bytes by which a host that splits an
// interval join's inputs over partitions routes a row of one input: the
// join key's cells under the group key rules (exec.AppendGroupIdentity's:
// -0.0 is 0.0, NaN and the infinities one cell with NULL), so rows whose
// keys are equal meet, and so do rows whose keys a GROUP BY over the key
// columns puts in one group.
type IntervalRoute struct {
	s       *ijSide
	scratch []types.Value
}

// NewIntervalRoute returns the router of input side (0 left, 1 right) of
// q's interval join.
func NewIntervalRoute(q *plan.Query, side int) (*IntervalRoute, error) {
	t, err := NewIntervalJoin(q, true)
	if err != nil {
		return nil, err
	}
	return &IntervalRoute{s: t.sides[side], scratch: t.scratch}, nil
}

// Append appends the route bytes of row (the input's columns) to dst.
func (r *IntervalRoute) Append(dst []byte, row []types.Value) ([]byte, error) {
	copy(r.scratch[r.s.off:], row)
	for _, e := range r.s.keys {
		v, err := e.Eval(r.scratch)
		if err != nil {
			return nil, &EvalError{Where: "join key " + e.String(), Err: err}
		}
		dst = appendGroupCell(dst, &v)
	}
	return dst, nil
}
