// Package exec runs a compiled plan.Query over a stream of source rows: it
// filters, assigns windows, keeps group state, tracks the watermark, and
// emits changelog records through the one encoder in package changelog.
//
// An Operator is push-driven and single-threaded: the caller pushes rows,
// advances the watermark, asks for early emission, and finally calls Finish.
// Records are handed to a callback synchronously; a host with a bounded
// buffer gives the operator room (SetRoom), and what does not fit waits in
// the emission queue as work, not records, until Drain (emitqueue.go).
//
// State is one entry per live (group, window). A window's state is dropped
// the moment its final record is emitted, so memory follows the number of
// open windows, not the length of the stream.
package exec

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// LateEvent describes an event that arrived for a window that is already
// final. The row aliases the caller's row and is valid only during the call.
type LateEvent struct {
	Row []types.Value
	// Key holds the cells of the contract key of the (group, window) the
	// event was for, when Windowed (encode it with changelog.AppendKey).
	Key         []types.Value
	Windowed    bool  // WindowStart and WindowEnd are set
	EventTime   int64 // µs
	WindowStart int64 // µs
	WindowEnd   int64 // µs
	Watermark   int64 // µs
	Reason      string
	// Event is the input record as the host handed it over, when it has
	// one (internal/drive sets it; nil for a pushed row). Valid only during
	// the call, so a late output can carry the event for a replay.
	Event []byte
	// Source is the declared source Event was read from, when the host
	// knows it (internal/drive sets it), so a late output can show every
	// declared column of the event: Row holds only the columns the query
	// reads.
	Source *plan.Source
}

// Config wires an Operator to its host.
type Config struct {
	// Emit receives every record. The record's byte slices are reused after
	// Emit returns; copy them (Record.Clone) to keep them. An error from Emit
	// stops the operator and is returned from the call that caused it.
	Emit func(*changelog.Record) error
	// Late, if set, receives each late event (for routing to a late output).
	// Late events are counted either way.
	Late func(*LateEvent)
	// Nanotime returns a monotonic clock reading in nanoseconds, used for
	// emission latency. Required.
	Nanotime func() int64
	// ExternalWatermark stops Process from advancing the watermark from
	// event times: the host alone moves it with AdvanceWatermark. A source
	// with several partitions (Kafka) needs this, because its watermark is
	// the minimum over the partitions, not the maximum event time seen.
	// Event times are still tracked for Stats.MaxEventTime.
	ExternalWatermark bool
	// OnAdvance, if set, is called when the watermark moves forward,
	// before any window closes, with the new watermark; it returns how
	// much the host's state kept in front of the operator changed (the
	// input dedup's forgotten keys), which StateBytes includes.
	OnAdvance func(wm int64) (bytesDelta int64)
	// OnSkip, if set, is called for every record skipped because its
	// HAVING or SELECT failed to evaluate, as it is skipped (EmitOrder says
	// what was being rendered), with the error the call returns if it is
	// the first and the end of the record's window. A host that renders
	// on several threads hands each to the call of its own host that one
	// operator would have returned it from.
	OnSkip func(err *EvalError, windowEnd int64)
}

// Stats are cumulative counters and current gauges of one operator.
type Stats struct {
	Rows             int64 // rows pushed
	Filtered         int64 // rows rejected by WHERE
	EvalErrors       int64 // rows rejected by a runtime evaluation error
	Late             int64 // rows that hit at least one already-final window
	Duplicates       int64 // rows dropped as copies of a key seen within the dedup horizon
	DedupLate        int64 // rows beyond the dedup horizon (a retry can no longer be told from a new event)
	DedupKeys        int64 // keys remembered for deduplication now
	DedupBytes       int64 // estimated bytes of the dedup state
	RecordsOut       int64 // records emitted
	HavingSuppressed int64 // emissions skipped because HAVING was false
	WindowsFinalized int64 // (group, window) pairs closed
	LiveGroups       int64 // live (group, window) states now
	LiveGroupsPeak   int64
	StateBytes       int64 // estimated bytes of live state now, the dedup state's included
	StateBytesPeak   int64
	Watermark        int64   // µs; math.MinInt64 before the first event
	MaxEventTime     int64   // µs
	LatencyP50       float64 // emission latency, ns
	LatencyP99       float64
	LatencyMax       float64
	LatencyCount     uint64

	// UnchangedSuppressed counts the records not emitted because their
	// value equals the last one published for the (group, window).
	UnchangedSuppressed int64
}

// Operator executes one query. It is not safe for concurrent use.
type Operator struct {
	q   *plan.Query
	cfg Config

	keyExprs   []int           // indexes of KeyExpr terms in q.Keys
	keyTypes   []types.Type    // their types, to decode group keys
	cellsOut   []types.Value   // decoded key cells of the group being emitted
	lateBuf    []types.Value   // key cells of a late event
	lateCells  []types.Value   // its GROUP BY cells, decoded from keyBuf
	groupBytes int64           // state estimate per (group, window), besides its key
	argBuf     [][]types.Value // per aggregate: evaluated arguments of the current row
	skipAgg    []bool          // per aggregate: its FILTER (WHERE ...) rejected the current row
	anyFilter  bool            // some aggregate has a FILTER (WHERE ...): skipAgg is consulted
	keyBuf     []byte          // binary group key of the current row
	keys       *GroupKeys      // evaluates keyBuf
	argCols    [][]int         // per aggregate argument: the same
	keyHash    uint64          // its hash under seed

	layout *aggLayout // where each aggregate's state sits in a group's words
	arena  aggArena   // boxed aggregate states
	seed   maphash.Seed

	cont    *bucket           // continuous view
	buckets map[int64]*bucket // aligned windows by start
	// recent holds the buckets bucketAt returned last (nil once dropped),
	// replaced round robin: an event falls into the windows the previous
	// one did (one for TUMBLE, size/slide for HOP).
	recent     [8]*bucket
	recentNext int
	recentLast int // the slot bucketAt found last
	// lastN is how many groups the window finalized last held: a new
	// window's index is sized for as many (bucket.reserve).
	lastN     int
	starts    int64Heap // starts of live buckets
	sessions  map[string]*sessionGroup
	closeHeap sessionHeap
	seq       uint64

	dirty    []*group
	emitting *group // the group emit is publishing (EmitOrder, shard.go)

	tracking     bool // a host checkpoints: record changes between checkpoints
	ckptChanged  []*group
	ckptDeleted  []string
	restored     bool
	restoredRows int64
	pending      []*group // restored groups of buckets, placed by FinishRestore

	// rowClock is the clock read for the event being processed (0: not
	// read yet), shared by the groups it makes dirty.
	rowClock     int64
	watermark    int64
	maxEventTime int64
	lateness     int64
	finished     bool

	// emission scratch
	postRow []types.Value
	outRow  []types.Value
	enc     *changelog.Encoder
	// selKey[i] >= 0: SELECT column i is a bare reference to a value the
	// key holds in cell selKey[i] (a GROUP BY column, or the window start
	// or end), so its cell text is copied from the key's bytes.
	selKey []int
	// selRef[i] >= 0: SELECT column i is a bare reference to that slot of
	// the post-aggregation row (no expression to evaluate).
	selRef   []int
	prefixes [][]byte // the value object's fragment before each cell (Encoder.AppendPrefix)
	keySpan  []int    // keySpan[2i], keySpan[2i+1]: cell i's bytes in keyOut
	// the last TIMESTAMP key cell rendered and its text (quotes included):
	// the window start repeats across the records of a window.
	tsCached bool
	tsMicros int64
	tsText   []byte
	rec      changelog.Record
	keyOut   []byte
	valOut   []byte
	// into: a host's buffer (RenderInto) holds keyOut, and the value is
	// rendered right after the key in its array.
	into bool
	// revDep: some SELECT column may read REVISION(), so the value a
	// change is compared by is rendered again with the revision fixed
	// (valueHash) into revRow and revBuf.
	revDep bool
	revBuf []byte
	// hashWord: a group's words end with the hash of its last published
	// value (keepsHashWord); otherwise sideHashes holds the few a restore
	// brought (unchanged.go).
	hashWord   bool
	sideHashes map[*group]uint64

	stats Stats
	hist  latencyHist
	// emission batches (startBatch)
	inBatch  bool
	batchN   int
	batchNow int64

	// the emission queue (emitqueue.go)
	work     []work
	workHead int
	limit    int64 // records may be emitted while stats.RecordsOut < limit
}

// New returns an operator for q, which must pass q.Validate.
func New(q *plan.Query, cfg Config) (*Operator, error) {
	if cfg.Emit == nil || cfg.Nanotime == nil {
		return nil, errors.New("exec: Config.Emit and Config.Nanotime are required")
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := noDedup(q); err != nil {
		return nil, err
	}
	o := &Operator{
		q:            q,
		cfg:          cfg,
		watermark:    math.MinInt64,
		maxEventTime: math.MinInt64,
		lateness:     q.Emit.AllowedLateness,
		limit:        math.MaxInt64,
		postRow:      make([]types.Value, q.PostAggWidth()),
		outRow:       make([]types.Value, len(q.Select)),
		argBuf:       make([][]types.Value, len(q.Aggs)),
	}
	for i, k := range q.Keys {
		if k.Kind == plan.KeyExpr {
			o.keyExprs = append(o.keyExprs, i)
			o.keyTypes = append(o.keyTypes, k.Expr.Type())
		}
	}
	overhead, costs := StateCost(q)
	o.groupBytes = int64(overhead)
	for _, c := range costs {
		o.groupBytes += int64(c.Bytes)
	}
	layout, err := newLayout(q, &o.arena)
	if err != nil {
		return nil, err
	}
	o.layout = layout
	o.seed = maphash.MakeSeed()
	o.skipAgg = make([]bool, len(q.Aggs))
	for i := range q.Aggs {
		if q.Aggs[i].Filter != nil {
			o.anyFilter = true
		}
		o.argBuf[i] = make([]types.Value, len(q.Aggs[i].Args))
		cols := make([]int, len(q.Aggs[i].Args))
		for j, a := range q.Aggs[i].Args {
			cols[j] = bareColumn(a)
		}
		o.argCols = append(o.argCols, cols)
	}
	o.keys = NewGroupKeys(q)
	names := make([]string, len(q.Select))
	for i, c := range q.Select {
		names[i] = c.Name
	}
	o.enc = changelog.NewEncoder(names)
	o.selKey = selectKeyCells(q)
	o.selRef = make([]int, len(q.Select))
	o.prefixes = make([][]byte, len(q.Select))
	for i, c := range q.Select {
		o.selRef[i] = -1
		if ref, ok := c.Expr.(*plan.ColRef); ok {
			o.selRef[i] = ref.Index
		}
		o.prefixes[i] = o.enc.AppendPrefix(nil, i)
	}
	o.keySpan = make([]int, 2*len(q.Keys))
	o.revDep = q.SelectReadsRevision
	o.hashWord = keepsHashWord(q, o.layout.stride)
	o.rec.Meta = changelog.Meta{
		Query:           q.Name,
		Windowed:        q.Window != nil,
		WindowPositions: q.WindowPositions(),
	}
	switch {
	case q.Window == nil:
		o.cont = o.newBucket(0, 0)
	case q.Window.Kind == plan.Session:
		o.sessions = map[string]*sessionGroup{}
		o.closeHeap.stride = layout.stride
	default:
		o.buckets = map[int64]*bucket{}
	}
	return o, nil
}

// Query returns the plan the operator runs.
func (o *Operator) Query() *plan.Query { return o.q }

// Watermark returns the current watermark in µs (math.MinInt64 before any).
func (o *Operator) Watermark() int64 { return o.watermark }

// Process applies one source row. A row rejected by a runtime evaluation
// error returns an *EvalError and changes nothing; an error from the Emit
// callback is returned as is. While records are queued it returns
// ErrQueued and applies nothing.
func (o *Operator) Process(row []types.Value) error { return o.process(row, nil) }

// ProcessKeyed is Process for a row whose group key (AppendGroupIdentity of its
// GROUP BY cells, as GroupKeys computes it) is already known, as a
// repartitioning stage routed it: the GROUP BY is not evaluated again. A
// key that is not a well-formed group key of this query's types (another
// version's routing key, corrupt bytes) is ignored and the GROUP BY is
// evaluated, so a wrong key can cost time but never a wrong group.
func (o *Operator) ProcessKeyed(row []types.Value, key []byte) error {
	if !validGroupKey(key, o.keyTypes) {
		key = nil
	}
	return o.process(row, key)
}

// process applies one row. An event rejected by an evaluation error still
// advances the watermark by its event time, as a source assigns
// watermarks before anything is evaluated (Flink's rule, and a Kafka
// partition's watermark here): so the watermark is a function of the
// decoded event times alone, whatever fails to evaluate, and a host that
// routes events to several operators computes the same one.
func (o *Operator) process(row []types.Value, key []byte) error {
	err := o.processRow(row, key)
	if err == nil {
		return nil
	}
	if _, ok := err.(*EvalError); ok {
		if werr := o.observeTime(row); werr != nil {
			if _, ok := werr.(*EvalError); !ok {
				return werr
			}
		}
	}
	return err
}

func (o *Operator) processRow(row []types.Value, key []byte) error {
	if o.finished {
		return ErrFinished
	}
	if o.workHead < len(o.work) {
		return ErrQueued
	}
	o.restored = true
	o.stats.Rows++
	o.rowClock = 0
	q := o.q
	if q.Filter != nil {
		v, err := q.Filter.Eval(row)
		if err != nil {
			o.stats.EvalErrors++
			return &EvalError{Where: "WHERE", Err: err}
		}
		if !v.Bool() {
			o.stats.Filtered++
			return o.observeTime(row)
		}
	}
	var err error
	if key != nil {
		o.keyBuf = append(o.keyBuf[:0], key...)
	} else if o.keyBuf, err = o.keys.Append(o.keyBuf[:0], row); err != nil {
		o.stats.EvalErrors++
		return err
	}
	if o.sessions == nil { // sessions find their key in a map
		o.keyHash = maphash.Bytes(o.seed, o.keyBuf)
	}
	for i := range q.Aggs {
		if f := q.Aggs[i].Filter; o.anyFilter && f != nil {
			v, err := f.Eval(row)
			if err != nil {
				o.stats.EvalErrors++
				return &EvalError{Where: "FILTER of aggregate " + q.Aggs[i].Name, Err: err}
			}
			o.skipAgg[i] = v.Null || v.I == 0
			if o.skipAgg[i] {
				continue // its arguments are not evaluated either
			}
		}
		for j, a := range q.Aggs[i].Args {
			if c := o.argCols[i][j]; c >= 0 {
				o.argBuf[i][j] = row[c]
				continue
			}
			v, err := a.Eval(row)
			if err != nil {
				o.stats.EvalErrors++
				return &EvalError{Where: "aggregate " + q.Aggs[i].Name, Err: err}
			}
			o.argBuf[i][j] = v
		}
	}
	switch {
	case q.Window == nil:
		err = o.apply(o.cont, row)
	case q.Window.Kind == plan.Session:
		err = o.processSession(row)
	default:
		err = o.processAligned(row)
	}
	if err != nil {
		return err
	}
	return o.observeTime(row)
}

// bareColumn returns the source column e reads when e is just a column
// reference (the common GROUP BY term and aggregate argument, read without
// an expression call per event), else -1.
func bareColumn(e plan.Expr) int {
	if c, ok := e.(*plan.ColRef); ok {
		return c.Index
	}
	return -1
}

// observeTime advances the watermark from the row's event time.
func (o *Operator) observeTime(row []types.Value) error {
	tc := o.q.Source.TimeCol
	if tc < 0 || row[tc].Null {
		return nil
	}
	ts := row[tc].I
	if ts <= o.maxEventTime {
		return nil
	}
	o.maxEventTime = ts
	if o.cfg.ExternalWatermark {
		return nil
	}
	return o.AdvanceWatermark(satSub(ts, o.q.Source.WatermarkDelay))
}

func (o *Operator) eventTime(row []types.Value) (int64, bool) {
	v := row[o.q.Window.TimeCol]
	return v.I, !v.Null
}

func (o *Operator) processAligned(row []types.Value) error {
	ts, ok := o.eventTime(row)
	if !ok {
		o.stats.EvalErrors++
		return &EvalError{Where: "window", Err: errors.New("window time column is NULL")}
	}
	w := o.q.Window
	slide := w.Slide
	if w.Kind == plan.Tumble {
		slide = w.Size
	}
	late := false
	// Every window [s, s+size) with s a multiple of slide that contains ts,
	// oldest first.
	first, last, ok := alignedWindows(ts, w.Size, slide)
	if !ok {
		o.stats.EvalErrors++
		return &EvalError{Where: "window", Err: errWindowRange{ts}}
	}
	for s := first; ; s += slide { // s <= last; last+size is in range, so s+slide cannot wrap
		end := s + w.Size
		if satAdd(end, o.lateness) <= o.watermark {
			if !late {
				late = true
				o.stats.Late++
			}
			if o.cfg.Late != nil {
				o.cfg.Late(&LateEvent{Row: row, Key: o.lateKey(s, end), Windowed: true, EventTime: ts, WindowStart: s, WindowEnd: end, Watermark: o.watermark,
					Reason: "window already final"})
			}
			if s == last {
				return nil
			}
			continue
		}
		if err := o.apply(o.bucketAt(s, end), row); err != nil {
			return err
		}
		if s == last {
			return nil
		}
	}
}

// lateKey builds the key cells of the current row's group in the window
// [start, end), for the late output.
func (o *Operator) lateKey(start, end int64) []types.Value {
	// The cells come from the group key bytes, so a late event names its
	// group exactly as the group's records do.
	cells := decodeKeyBytes(bytesString(o.keyBuf), o.keyTypes, o.lateCells[:0])
	o.lateCells = cells
	o.lateBuf = o.lateBuf[:0]
	ci := 0
	for _, k := range o.q.Keys {
		switch k.Kind {
		case plan.KeyExpr:
			o.lateBuf = append(o.lateBuf, cells[ci])
			ci++
		case plan.KeyWindowStart:
			o.lateBuf = append(o.lateBuf, types.TS(start))
		case plan.KeyWindowEnd:
			o.lateBuf = append(o.lateBuf, types.TS(end))
		}
	}
	return o.lateBuf
}

// apply folds the current row (key and arguments already evaluated) into
// the group of bucket b.
func (o *Operator) apply(b *bucket, row []types.Value) error {
	g := b.lookup(o.keyBuf, o.keyHash)
	if g == nil {
		g = b.add(o.keyBuf, o.keyHash)
		o.initGroup(g, b.start, b.end)
	}
	if err := o.updateAggs(g); err != nil {
		return err
	}
	return o.changed(g)
}

func (o *Operator) newBucket(start, end int64) *bucket {
	b := newBucket(start, end, o.seed, o.layout.stride)
	b.hashWords = o.hashWord
	return b
}

// bucketAt returns the bucket of the aligned window [start, end), opening
// it if needed.
func (o *Operator) bucketAt(start, end int64) *bucket {
	if b := o.recent[o.recentLast]; b != nil && b.start == start {
		return b // most events fall into the window the previous one did
	}
	// A HOP event's windows come oldest first, and buckets open in that
	// order too, so the next window is usually in the next slot.
	if i := (o.recentLast + 1) % len(o.recent); o.recent[i] != nil && o.recent[i].start == start {
		o.recentLast = i
		return o.recent[i]
	}
	for i, b := range &o.recent {
		if b != nil && b.start == start {
			o.recentLast = i
			return b
		}
	}
	b := o.buckets[start]
	if b == nil {
		b = o.newBucket(start, end)
		b.reserve(o.lastN)
		o.buckets[start] = b
		heap.Push(&o.starts, start)
	}
	o.recent[o.recentNext] = b
	o.recentLast = o.recentNext
	o.recentNext = (o.recentNext + 1) % len(o.recent)
	return b
}

// dropBucket forgets a finalized bucket.
func (o *Operator) dropBucket(start int64) {
	if b := o.buckets[start]; b != nil {
		o.lastN = b.n
	}
	delete(o.buckets, start)
	for i, b := range &o.recent {
		if b != nil && b.start == start {
			o.recent[i] = nil
		}
	}
}

// newSessionGroup allocates a group on its own: sessions merge and close
// one by one, so they cannot share a bucket's slabs.
func (o *Operator) newSessionGroup(start, end int64) *group {
	g := &group{mapKey: string(o.keyBuf)}
	g.wp = &make([]uint64, o.layout.stride+1)[0] // + the session end
	o.initGroup(g, start, end)
	return g
}

// groupEnd returns the end of g's window.
func (o *Operator) groupEnd(g *group) int64 {
	switch {
	case o.sessions != nil:
		return int64(g.words(o.layout.stride + 1)[o.layout.stride])
	case o.buckets != nil:
		return g.start + o.q.Window.Size
	}
	return 0
}

func (o *Operator) setSessionEnd(g *group, end int64) {
	g.words(o.layout.stride + 1)[o.layout.stride] = uint64(end)
}

// initGroup sets up a new group (its words zeroed) and counts it.
func (o *Operator) initGroup(g *group, start, end int64) {
	g.start, g.heapIndex = start, -1
	if o.sessions != nil {
		o.setSessionEnd(g, end)
	}
	o.seq++
	g.seq = o.seq
	o.stats.LiveGroups++
	if o.stats.LiveGroups > o.stats.LiveGroupsPeak {
		o.stats.LiveGroupsPeak = o.stats.LiveGroups
	}
	o.addBytes(o.groupBytes + int64(len(g.mapKey)))
}

func (o *Operator) addBytes(n int64) {
	o.stats.StateBytes += n
	if o.stats.StateBytes > o.stats.StateBytesPeak {
		o.stats.StateBytesPeak = o.stats.StateBytes
	}
}

func (o *Operator) dropGroup(g *group) {
	g.set(dead, true)
	if o.tracking && g.has(written) {
		o.ckptDeleted = append(o.ckptDeleted, string(appendStateKey(nil, g.seq, g.mapKey)))
	}
	if o.sideHashes != nil {
		delete(o.sideHashes, g)
	}
	w := g.words(o.layout.stride)
	o.stats.LiveGroups--
	o.stats.StateBytes -= o.groupBytes + int64(len(g.mapKey)) + int64(o.layout.extraBytes(w))
	o.layout.release(w)
}

func (o *Operator) updateAggs(g *group) error {
	l := o.layout
	w := g.words(l.stride)
	// Without a FILTER no aggregate skips a row: the common loop reads no
	// skip flags.
	if o.anyFilter {
		for i, k := range l.kernels {
			if o.skipAgg[i] {
				continue
			}
			if err := k.update(w[l.offs[i]:], o.argBuf[i]); err != nil {
				return o.aggError(i, err)
			}
		}
	} else {
		for i, k := range l.kernels {
			if err := k.update(w[l.offs[i]:], o.argBuf[i]); err != nil {
				return o.aggError(i, err)
			}
		}
	}
	if o.arena.grown != 0 {
		o.takeGrowth()
	}
	return nil
}

// aggError is aggregate i's update error, after the growth so far is
// counted.
func (o *Operator) aggError(i int, err error) error {
	o.takeGrowth()
	return &EvalError{Where: "aggregate " + o.q.Aggs[i].Name, Err: err}
}

// takeGrowth adds what growing states grew by to the state gauge.
func (o *Operator) takeGrowth() {
	if o.arena.grown != 0 {
		o.addBytes(int64(o.arena.grown))
		o.arena.grown = 0
	}
}

// changed records that g's value changed and emits now if the policy says so.
func (o *Operator) changed(g *group) error {
	o.markCkpt(g)
	if g.dirtyAt == 0 {
		// One clock read per event, however many windows it changes (a
		// HOP event dirties several groups at once).
		if o.rowClock == 0 {
			o.rowClock = o.cfg.Nanotime()
			if o.rowClock == 0 {
				o.rowClock = 1
			}
		}
		g.dirtyAt = o.rowClock
	}
	switch o.q.Emit.Mode {
	case plan.EmitChanges:
		return o.emitChange(g)
	case plan.EmitEarly:
		if !g.has(inDirty) {
			g.set(inDirty, true)
			if o.buckets != nil && len(o.dirty) < math.MaxInt32 {
				// An aligned window's group has no heap position: the
				// field holds its slot in the dirty list (finalize).
				g.heapIndex = int32(len(o.dirty))
			}
			o.dirty = append(o.dirty, g)
		}
	}
	return nil
}

// AdvanceWatermark moves the watermark to wm (µs) if that is forward, and
// finalizes every window whose end plus the allowed lateness it passes: it
// queues them, and renders their records while the host has room.
func (o *Operator) AdvanceWatermark(wm int64) error {
	if wm <= o.watermark {
		return nil
	}
	o.watermark = wm
	o.stats.Watermark = wm
	if o.cfg.OnAdvance != nil {
		o.addBytes(o.cfg.OnAdvance(wm))
	}
	switch {
	case o.buckets != nil:
		// An aligned window [s, s+size) ends at s+size (bucketAt), so the
		// earliest one's close is known without the map: most advances
		// (one per event that raises the event time) close nothing.
		size := o.q.Window.Size
		for o.starts.Len() > 0 {
			s := o.starts[0]
			if satAdd(s+size, o.lateness) > wm {
				break
			}
			b := o.buckets[s]
			heap.Pop(&o.starts)
			o.dropBucket(s)
			o.queueBucket(b)
		}
	case o.sessions != nil:
		o.queueSessions(wm)
	}
	if o.workHead == len(o.work) {
		return nil // nothing queued, nothing to render (pump would only find that)
	}
	return o.pump()
}

// startBatch begins a run of emissions (a window's finals, an early
// flush): their latency is measured against a clock read every 256
// records rather than per record, since reading the clock costs about as
// much as encoding a small record. The error is the time 256 emissions
// take, far below the latency's millisecond scale.
func (o *Operator) startBatch() { o.inBatch, o.batchN = true, 0 }
func (o *Operator) endBatch()   { o.inBatch = false }

// emitClock returns the clock for an emission's latency.
func (o *Operator) emitClock() int64 {
	if !o.inBatch {
		return o.cfg.Nanotime()
	}
	if o.batchN%256 == 0 {
		o.batchNow = o.cfg.Nanotime()
	}
	o.batchN++
	return o.batchNow
}

func (o *Operator) finalize(g *group) error {
	o.stats.WindowsFinalized++
	if g.has(inDirty) && o.buckets != nil {
		// A flush would skip it once dead; clearing its slot now lets the
		// finalized window's chunks go before the next flush (between two
		// flushes a HOP query finalizes hundreds of windows). A slot of a
		// flush already queued stays: that flush skips it.
		if i := int(g.heapIndex); i >= 0 && i < len(o.dirty) && o.dirty[i] == g {
			o.dirty[i] = nil
		}
	}
	err := o.emit(g, true)
	o.dropGroup(g)
	return err
}

// EmitEarly publishes the current value of every (group, window) changed
// since its last emission (EMIT EARLY): it queues the flush behind the
// queued work and renders while the host has room. It is a no-op for other
// policies.
func (o *Operator) EmitEarly() error {
	if len(o.dirty) > 0 {
		o.work = append(o.work, work{kind: workFlush, list: o.dirty})
		o.dirty = nil
	}
	return o.pump()
}

// Finish ends the input: every open window finalizes, and a continuous view
// publishes what is pending. A global aggregate (no GROUP BY) over an empty
// input publishes its empty-input row, as the batch query would. What the
// host has no room for stays queued for Drain.
func (o *Operator) Finish() error {
	if o.finished {
		return nil
	}
	o.finished = true
	switch {
	case o.cont != nil:
		if len(o.q.Keys) == 0 && o.cont.n == 0 {
			g := o.cont.add(nil, maphash.Bytes(o.seed, nil))
			o.initGroup(g, 0, 0)
			g.dirtyAt = o.cfg.Nanotime()
			if err := o.emitChange(g); err != nil {
				return err
			}
		}
		return o.EmitEarly()
	case o.buckets != nil:
		for o.starts.Len() > 0 {
			s := heap.Pop(&o.starts).(int64)
			b := o.buckets[s]
			o.dropBucket(s)
			o.queueBucket(b)
		}
	case o.sessions != nil:
		o.queueSessions(maxWatermark)
	}
	return o.pump()
}

// CloseOpenWindows finalizes every open window as the end of the input does, but
// with a watermark a restart can continue from: it advances the watermark
// to the smallest value that closes them all (the latest window or
// session end plus the allowed lateness), never to +infinity. An event
// that arrives later for a window that ends at or before it is late; one
// for a later window opens it. A continuous view has no windows, so
// nothing changes. Unlike Finish, the operator keeps processing.
func (o *Operator) CloseOpenWindows() error {
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
	return o.AdvanceWatermark(wm)
}

// emit builds and publishes the record of g: key cells, aggregate results,
// metadata, HAVING, projection, then the one encoder.
func (o *Operator) emit(g *group, final bool) error {
	o.emitting = g
	q := o.q
	row := o.postRow
	ci := 0
	o.cellsOut = decodeKeyBytes(g.mapKey, o.keyTypes, o.cellsOut[:0])
	end := o.groupEnd(g)
	startV, endV := types.TS(g.start), types.TS(end)
	for i, k := range q.Keys {
		switch k.Kind {
		case plan.KeyExpr:
			row[i] = o.cellsOut[ci]
			ci++
		case plan.KeyWindowStart:
			row[i] = startV
		case plan.KeyWindowEnd:
			row[i] = endV
		}
	}
	off := q.AggOffset()
	l := o.layout
	w := g.words(l.stride)
	for i, k := range l.kernels {
		row[off+i] = k.result(w[l.offs[i]:])
	}
	if q.Window != nil {
		row[q.WindowStartSlot()] = startV
		row[q.WindowEndSlot()] = endV
	} else {
		row[q.WindowStartSlot()] = types.NullOf(types.Timestamp)
		row[q.WindowEndSlot()] = types.NullOf(types.Timestamp)
	}
	row[q.FinalSlot()] = types.Bool(final)
	row[q.RevisionSlot()] = types.Big(int64(g.revision + 1))
	dirtyAt := g.dirtyAt
	g.dirtyAt = 0
	if q.Having != nil {
		v, err := q.Having.Eval(row)
		if err != nil {
			return o.skip(&EvalError{Where: "HAVING", Err: err}, end)
		}
		if !v.Bool() {
			o.stats.HavingSuppressed++
			return nil
		}
	}
	for i := range q.Select {
		if j := o.selKey[i]; j >= 0 {
			// Its text is copied from the key's (encodeRecord); the typed
			// value is still the row's, for EmittedRow.
			o.outRow[i] = row[j]
			continue
		}
		if r := o.selRef[i]; r >= 0 {
			o.outRow[i] = row[r]
			continue
		}
		c := &q.Select[i]
		v, err := c.Expr.Eval(row)
		if err != nil {
			return o.skip(&EvalError{Where: "SELECT " + c.Name, Err: err}, end)
		}
		o.outRow[i] = v
	}
	o.encodeRecord(row[:len(q.Keys)])
	if !final {
		h := o.valueHash(row)
		if g.has(published) && o.lastValue(g) == h {
			o.stats.UnchangedSuppressed++
			o.markCkpt(g) // it is clean now
			return nil
		}
		o.setLastValue(g, h)
		g.set(published, true)
	}
	g.revision++
	o.markCkpt(g)
	o.rec.Key = o.keyOut
	o.rec.Value = o.valOut
	o.rec.Meta.Final = final
	o.rec.Meta.Revision = g.revision
	if q.Window != nil {
		o.rec.Meta.WindowStart = g.start
		o.rec.Meta.WindowEnd = end
	}
	o.stats.RecordsOut++
	if dirtyAt != 0 {
		o.hist.record(o.emitClock() - dirtyAt)
	}
	return o.cfg.Emit(&o.rec)
}

// encodeRecord renders the key array of keys and the value object of
// o.outRow into o.keyOut and o.valOut: the bytes of changelog.AppendKey and
// changelog.AppendValue (TestEncodeRecordMatchesChangelog holds it to
// them), with a SELECT column that repeats a key cell copied from the key's
// bytes instead of rendered again (its o.outRow slot holds the key cell,
// read only by EmittedRow), and a
// TIMESTAMP key cell equal to the previous one copied from its text.
func (o *Operator) encodeRecord(keys []types.Value) {
	k := append(o.keyOut[:0], '[')
	for i := range keys {
		c := &keys[i]
		if i > 0 {
			k = append(k, ',', ' ')
		}
		o.keySpan[2*i] = len(k)
		if c.Kind == types.KindTimestamp && !c.Null {
			if !o.tsCached || o.tsMicros != c.I {
				o.tsText = changelog.AppendCell(o.tsText[:0], *c)
				o.tsMicros, o.tsCached = c.I, true
			}
			k = append(k, o.tsText...)
		} else {
			k = changelog.AppendCell(k, *c)
		}
		o.keySpan[2*i+1] = len(k)
	}
	o.keyOut = append(k, ']')
	v := o.valOut[:0]
	if o.into {
		v = o.keyOut[len(o.keyOut):]
	}
	v = append(v, '{')
	for i := range o.outRow { // by index: a range value would copy each cell first
		v = append(v, o.prefixes[i]...)
		if j := o.selKey[i]; j >= 0 {
			v = append(v, o.keyOut[o.keySpan[2*j]:o.keySpan[2*j+1]]...)
		} else {
			v = changelog.AppendCell(v, o.outRow[i])
		}
	}
	o.valOut = append(v, '}')
}

// selectKeyCells returns, per SELECT column, the key cell whose value the
// column always equals (a bare reference to a key slot, or to the window
// start or end slot when a key cell is that window bound), or -1.
func selectKeyCells(q *plan.Query) []int {
	out := make([]int, len(q.Select))
	for i, c := range q.Select {
		out[i] = -1
		ref, ok := c.Expr.(*plan.ColRef)
		if !ok {
			continue
		}
		if ref.Index < len(q.Keys) {
			out[i] = ref.Index
			continue
		}
		if q.Window == nil {
			continue
		}
		for j, k := range q.Keys {
			if (k.Kind == plan.KeyWindowStart && ref.Index == q.WindowStartSlot()) ||
				(k.Kind == plan.KeyWindowEnd && ref.Index == q.WindowEndSlot()) {
				out[i] = j
				break
			}
		}
	}
	return out
}

// Stats returns a snapshot of the counters.
func (o *Operator) Stats() Stats {
	s := o.stats
	s.LatencyP50 = o.hist.quantile(0.50)
	s.LatencyP99 = o.hist.quantile(0.99)
	s.LatencyMax = float64(o.hist.max)
	s.LatencyCount = o.hist.n
	s.MaxEventTime = o.maxEventTime
	s.Watermark = o.watermark
	return s
}

// GroupKeys evaluates the group key of a query's source rows: its GROUP BY
// expression terms, in order, encoded by AppendGroupIdentity. The operator and
// a repartitioning stage both use it, so they cannot disagree on a row's
// group.
type GroupKeys struct {
	exprs []plan.Expr
	cols  []int // per term: its source column when it is a bare column, else -1
}

// NewGroupKeys returns the group key evaluator of q.
func NewGroupKeys(q *plan.Query) *GroupKeys {
	k := &GroupKeys{}
	for _, t := range q.Keys {
		if t.Kind == plan.KeyExpr {
			k.exprs = append(k.exprs, t.Expr)
			k.cols = append(k.cols, bareColumn(t.Expr))
		}
	}
	return k
}

// Append appends the group key of row to dst. A term that fails to
// evaluate returns an *EvalError (Where "GROUP BY").
func (k *GroupKeys) Append(dst []byte, row []types.Value) ([]byte, error) {
	for i, e := range k.exprs {
		var v types.Value
		if c := k.cols[i]; c >= 0 {
			v = row[c]
		} else {
			var err error
			if v, err = e.Eval(row); err != nil {
				return dst, &EvalError{Where: "GROUP BY", Err: err}
			}
		}
		dst = appendGroupCell(dst, &v)
	}
	return dst, nil
}

// isASCII reports whether s is all ASCII (so valid UTF-8), eight bytes at
// a time with no byte loop: a string of 8 bytes or more is read as
// overlapping words, a shorter one as one or two smaller loads. It keeps
// the UTF-8 check of a group key cell to a few instructions for the
// common key.
func isASCII(s string) bool {
	n := len(s)
	if n == 0 {
		return true
	}
	b := unsafe.Slice(unsafe.StringData(s), n)
	const hi = 0x8080808080808080
	if n >= 8 {
		var acc uint64
		for i := 0; i+8 <= n; i += 8 {
			acc |= binary.LittleEndian.Uint64(b[i:])
		}
		return (acc|binary.LittleEndian.Uint64(b[n-8:]))&hi == 0
	}
	if n >= 4 {
		return (uint64(binary.LittleEndian.Uint32(b))|uint64(binary.LittleEndian.Uint32(b[n-4:])))&hi == 0
	}
	return (b[0]|b[n/2]|b[n-1])&0x80 == 0
}

// appendKeyBytes appends an unambiguous binary form of v: the identity of
// a value (DuckDB's: -0.0 equals 0.0, NaN equals NaN, NULL is its own
// value). DISTINCT sets and deduplication use it directly; a group key
// cell goes through appendGroupCell.
func appendKeyBytes(b []byte, v types.Value) []byte {
	if v.Null {
		return append(b, 0)
	}
	b = append(b, byte(v.Kind)+1)
	switch v.Kind {
	case types.KindVarchar:
		b = binary.AppendUvarint(b, uint64(len(v.S)))
		return append(b, v.S...)
	case types.KindDouble:
		f := v.F
		if f == 0 {
			f = 0 // -0.0 and 0.0 group together, as in DuckDB
		}
		if math.IsNaN(f) {
			f = math.NaN()
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	case types.KindHugeInt, types.KindDecimal, types.KindInterval:
		b = binary.LittleEndian.AppendUint64(b, uint64(v.I))
		return binary.LittleEndian.AppendUint64(b, uint64(v.Hi))
	}
	return binary.LittleEndian.AppendUint64(b, uint64(v.I))
}

// validGroupKey reports whether k is a group key AppendGroupIdentity can
// produce for cells of the types kt: each cell NULL or of its type's kind,
// complete, a double finite and not -0.0, a string valid UTF-8, nothing
// left over.
func validGroupKey(k []byte, kt []types.Type) bool {
	i := 0
	for _, t := range kt {
		n, ok := groupCellLen(k[i:], t)
		if !ok {
			return false
		}
		i += n
	}
	return i == len(k)
}

// groupCellLen returns the length of the group key cell of type t k
// starts with, and false if k does not start with one.
func groupCellLen(k []byte, t types.Type) (int, bool) {
	if len(k) == 0 {
		return 0, false
	}
	if k[0] == 0 {
		return 1, true
	}
	if types.Kind(k[0]-1) != t.Kind {
		return 0, false
	}
	i := 1
	switch t.Kind {
	case types.KindVarchar:
		n, w := binary.Uvarint(k[i:])
		if w <= 0 || n > uint64(len(k)-i-w) {
			return 0, false
		}
		i += w
		if !utf8.Valid(k[i : i+int(n)]) {
			return 0, false
		}
		return i + int(n), true
	case types.KindHugeInt, types.KindDecimal, types.KindInterval:
		return i + 16, len(k)-i >= 16
	case types.KindBoolean, types.KindInteger, types.KindBigInt, types.KindTimestamp, types.KindDate, types.KindDouble:
		if len(k)-i < 8 {
			return 0, false
		}
		if t.Kind == types.KindDouble {
			f := math.Float64frombits(binary.LittleEndian.Uint64(k[i:]))
			if f-f != 0 || f == 0 && math.Signbit(f) {
				return 0, false
			}
		}
		return i + 8, true
	}
	return 0, false
}

// le64 is the little-endian word at k[i:i+8], read in one load (the
// compiler combines the bytes' loads when their bounds are checked once).
func le64(k string, i int) uint64 {
	b := k[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// decodeKeyBytes is the inverse of appendKeyBytes over a whole group key:
// it appends the cells to dst. Strings alias k (no copy). The static types
// give NULL cells their kind and decimals their scale.
func decodeKeyBytes(k string, kt []types.Type, dst []types.Value) []types.Value {
	i := 0
	u64 := func() uint64 {
		x := le64(k, i)
		i += 8
		return x
	}
	for _, t := range kt {
		tag := k[i]
		i++
		if tag == 0 {
			dst = append(dst, types.NullOf(t))
			continue
		}
		v := types.Value{Kind: types.Kind(tag - 1), Scale: t.Scale}
		switch v.Kind {
		case types.KindVarchar:
			var n uint64
			for shift := 0; ; shift += 7 {
				c := k[i]
				i++
				n |= uint64(c&0x7f) << shift
				if c < 0x80 {
					break
				}
			}
			v.S = k[i : i+int(n)]
			i += int(n)
		case types.KindDouble:
			v.F = math.Float64frombits(u64())
		case types.KindHugeInt, types.KindDecimal, types.KindInterval:
			v.I = int64(u64())
			v.Hi = int64(u64())
		default:
			v.I = int64(u64())
		}
		dst = append(dst, v)
	}
	return dst
}

type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
