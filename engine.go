package ubik

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/exec"
	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// Engine holds registered sources and starts queries. It is safe for
// concurrent use.
type Engine struct {
	opts    Options
	mu      sync.Mutex
	sources []*plan.Source
	closed  bool
}

// Open returns an engine configured by opts (see DefaultOptions).
func Open(opts Options) (*Engine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Engine{opts: opts}, nil
}

// Exec runs a script of CREATE SOURCE statements and registers the sources
// for later queries. A query in the script is an error: use Start.
func (e *Engine) Exec(script string) (err error) {
	defer recoverInto(&err)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	prog, err := plan.Compile(script, plan.CompileOptions{Sources: e.sources})
	if err != nil {
		return err
	}
	if len(prog.Queries) > 0 {
		return fmt.Errorf("ubik: Exec takes source declarations only; start query %q with Start", prog.Queries[0].Name)
	}
	e.sources = mergeSources(e.sources, prog.Sources)
	return nil
}

// RegisterSource declares a source from Go.
func (e *Engine) RegisterSource(src plan.Source) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	s := src
	e.sources = mergeSources(e.sources, []*plan.Source{&s})
	return nil
}

func mergeSources(have, add []*plan.Source) []*plan.Source {
	out := append([]*plan.Source(nil), have...)
	for _, a := range add {
		replaced := false
		for i, h := range out {
			if h.Name == a.Name {
				out[i], replaced = a, true
			}
		}
		if !replaced {
			out = append(out, a)
		}
	}
	return out
}

// Compile compiles a script against the registered sources without starting
// anything (for explain and validation).
func (e *Engine) Compile(script, defaultName string) (prog *plan.Program, err error) {
	defer recoverInto(&err)
	e.mu.Lock()
	srcs := e.sources
	e.mu.Unlock()
	return plan.Compile(script, plan.CompileOptions{Sources: srcs, DefaultName: defaultName})
}

// CompileViews compiles script as Compile does, for a host that writes
// each query without a CREATE SINK to an output of its own (the ubik
// command line: one file per query), so several such queries are allowed.
func (e *Engine) CompileViews(script, defaultName string) (prog *plan.Program, err error) {
	defer recoverInto(&err)
	e.mu.Lock()
	srcs := e.sources
	e.mu.Unlock()
	return plan.Compile(script, plan.CompileOptions{Sources: srcs, DefaultName: defaultName, OwnOutputs: true})
}

// Close releases the engine. Queries already started keep running.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	return nil
}

// QueryOptions configure one query.
type QueryOptions struct {
	// Name selects the query to start when the script has several, and names
	// a bare SELECT. Default: the script's only query, named "query".
	Name string
	// OnRecord, if set, receives each record synchronously; its byte slices
	// are valid only during the call (Clone to keep). If nil, records are
	// pulled with Next and Records, and at most Options.MaxPendingRecords
	// of them are held at any time (see Query).
	OnRecord func(changelog.Record) error
	// OnLate, if set, receives each event that arrived for a window already
	// final. Late events are counted either way.
	OnLate func(*exec.LateEvent)
	// Strict makes the first malformed event a fatal error for the query.
	Strict bool
}

// Start compiles script (CREATE SOURCE statements plus queries) and starts
// one query.
func (e *Engine) Start(script string, qo QueryOptions) (q *Query, err error) {
	defer recoverInto(&err)
	prog, err := e.Compile(script, qo.Name)
	if err != nil {
		return nil, err
	}
	pq, err := pickQuery(prog, qo.Name)
	if err != nil {
		return nil, err
	}
	return e.StartPlan(pq, qo)
}

func pickQuery(prog *plan.Program, name string) (*plan.Query, error) {
	if len(prog.Queries) == 0 {
		return nil, ErrNoQuery
	}
	if len(prog.Queries) == 1 {
		return prog.Queries[0], nil
	}
	for _, q := range prog.Queries {
		if q.Name == name {
			return q, nil
		}
	}
	names := make([]string, len(prog.Queries))
	for i, q := range prog.Queries {
		names[i] = q.Name
	}
	return nil, fmt.Errorf("ubik: the script has %d queries %v; name one with QueryOptions.Name", len(prog.Queries), names)
}

// StartPlan starts an already compiled query. A plan that is not one an
// operator can run (plan.Query.Validate) is an error.
func (e *Engine) StartPlan(pq *plan.Query, qo QueryOptions) (q *Query, err error) {
	defer func() {
		if err != nil {
			q = nil
		}
	}()
	defer recoverInto(&err)
	if err := pq.Validate(); err != nil {
		return nil, err
	}
	q = &Query{
		eng:   e,
		plan:  pq,
		opts:  qo,
		dec:   exec.NewQueryDecoder(pq),
		start: e.opts.Now(),
	}
	if err := q.dec.Err(); err != nil {
		return nil, err
	}
	q.op, err = exec.New(pq, exec.Config{
		Emit:     q.onRecord,
		Late:     qo.OnLate,
		Nanotime: func() int64 { return int64(e.opts.Now().Sub(q.start)) + 1 },
	})
	if err != nil {
		return nil, err
	}
	if pq.Emit.Mode == plan.EmitEarly {
		q.every = time.Duration(pq.Emit.EarlyEvery) * time.Microsecond
		q.nextEarly = q.start.Add(q.every)
	}
	return q, nil
}

// EventError reports one event that was not applied: malformed input (it
// unwraps to exec.ErrMalformed) or a runtime evaluation error. The query
// goes on unless QueryOptions.Strict is set.
type EventError struct {
	Seq int64 // 1-based sequence number of the event in this query's input
	Err error
}

func (e *EventError) Error() string { return fmt.Sprintf("event %d: %v", e.Seq, e.Err) }
func (e *EventError) Unwrap() error { return e.Err }

// Stats are a query's counters.
type Stats struct {
	exec.Stats
	EventsIn  int64 // events pushed
	Malformed int64 // events that could not be decoded
	Pending   int   // rendered records buffered for Next (at most MaxPendingRecords)
	Queued    bool  // finalized windows or flushes wait, unrendered, for Next
}

// Query is one running query. It is not safe for concurrent use: one
// goroutine pushes and pulls (misuse is detected and reported).
//
// Without an OnRecord callback, records are pulled with Next and the
// buffer is bounded: at no time does the query hold more than
// Options.MaxPendingRecords rendered records. A window that finalizes, a
// session that closes and an early flush are queued as work (the groups to
// publish, not records), and Next renders records from the queue as it is
// called. So every call does bounded work whatever it finalizes:
//
//   - Push and PushRow return ErrBackpressure while the buffer is full or
//     work is queued, and then have applied nothing (the event is not
//     counted; push the same event again after taking records). A push
//     that returns anything else was taken: nil, or an *EventError for an
//     event that was rejected. A push that finalizes windows returns nil
//     and its records wait for Next.
//   - AdvanceWatermark, EmitEarly, Tick and Close never return
//     ErrBackpressure: their effect (the watermark, which windows are
//     final, which groups a flush publishes) is decided when they are
//     called, exactly as with a callback, and their records wait for Next.
//     After Close, Next returns every remaining record.
//   - Checkpoint returns ErrBackpressure while work is queued (a queued
//     window is neither live state nor a published record yet); take
//     records with Next and call it again. Rendered records still in the
//     buffer are the host's to deliver, as with a callback.
//
// The records and their order are the same as with a callback, whatever
// the bound and however the calls interleave with Next: an event is late
// or not by the watermark when it was pushed.
//
// A HAVING or SELECT expression that fails for one record skips that
// record and counts it in Stats.EvalErrors; the call that rendered it
// returns the error, except Next, which cannot (a Strict query then fails).
type Query struct {
	eng  *Engine
	plan *plan.Query
	opts QueryOptions
	dec  *exec.Decoder
	op   *exec.Operator
	// derive makes PushRow's rows for a source with computed or
	// TIMESTAMP(p) columns (created on the first such PushRow).
	derive *exec.Deriver
	start  time.Time

	every     time.Duration
	nextEarly time.Time
	sinceTick int

	pending []changelog.Record
	head    int

	eventsIn  int64
	malformed int64
	closed    bool
	fatal     error
	busy      atomic.Bool
}

// Plan returns the compiled query.
func (q *Query) Plan() *plan.Query { return q.plan }

func (q *Query) onRecord(r *changelog.Record) error {
	if q.opts.OnRecord != nil {
		return q.opts.OnRecord(*r)
	}
	q.pending = append(q.pending, r.Clone())
	return nil
}

func (q *Query) enter() error {
	if !q.busy.CompareAndSwap(false, true) {
		return ErrConcurrentUse
	}
	if q.fatal != nil {
		q.busy.Store(false)
		return q.fatal
	}
	return nil
}

func (q *Query) leave(err *error) {
	if r := recover(); r != nil {
		q.fatal = fmt.Errorf("%w: %v\n%s", ErrInternal, r, debug.Stack())
		*err = q.fatal
	}
	q.busy.Store(false)
}

// Push decodes and applies one JSON event. A malformed event returns an
// *EventError (counted in Stats.Malformed) and the query continues, unless
// the query is Strict. ErrBackpressure means nothing was applied, not even
// the decoding: take records with Next and push the same event again.
func (q *Query) Push(event []byte) (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if err := q.admit(); err != nil {
		return err
	}
	row, derr := q.dec.Decode(event)
	if row == nil && derr == nil {
		return nil // a CSV header record: not an event
	}
	var he *exec.HeaderError
	if errors.As(derr, &he) {
		// The input does not fit the source: stop, as for any fatal error.
		q.fatal = derr
		return derr
	}
	q.eventsIn++
	if derr != nil {
		q.malformed++
		return q.eventErr(derr)
	}
	return q.process(row)
}

// PushRow applies one typed row, in the source's column order. For a source
// with computed columns, the row holds the physical columns only, or every
// column with each computed cell NULL (see pushDerived).
func (q *Query) PushRow(row []types.Value) (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if err := q.admit(); err != nil {
		return err
	}
	q.eventsIn++
	if q.plan.Source.HasDerived() {
		return q.pushDerived(row)
	}
	if len(row) != len(q.plan.Source.Columns) {
		q.malformed++
		return q.eventErr(&exec.DecodeError{Msg: fmt.Sprintf("row has %d cells, source %q has %d columns", len(row), q.plan.Source.Name, len(q.plan.Source.Columns))})
	}
	copied := false
	for i, c := range q.plan.Source.Columns {
		if !row[i].Null && row[i].Kind != c.Type.Kind {
			q.malformed++
			return q.eventErr(&exec.DecodeError{Column: c.Name, Msg: fmt.Sprintf("cell is %s, column is %s", row[i].Kind, c.Type)})
		}
		// Invalid UTF-8 becomes U+FFFD, as the decoders do; the
		// caller's row is copied, not changed.
		if row[i].Kind == types.KindVarchar && !row[i].Null {
			if s := changelog.RepairUTF8(row[i].S); s != row[i].S {
				if !copied {
					row, copied = append([]types.Value(nil), row...), true
				}
				row[i].S = s
			}
		}
	}
	if tc := q.plan.Source.TimeCol; tc >= 0 && row[tc].Null {
		q.malformed++
		return q.eventErr(&exec.DecodeError{Column: q.plan.Source.Columns[tc].Name, Msg: "event time is null"})
	}
	return q.process(row)
}

// pushDerived is PushRow for a source with computed or TIMESTAMP(p)
// columns: row holds the physical columns (in declaration order, computed
// ones left out), or every column with each computed cell NULL; the
// computed cells are evaluated and TIMESTAMP(p) cells rounded, as the
// decoders do.
func (q *Query) pushDerived(row []types.Value) error {
	if q.derive == nil {
		q.derive = exec.NewDeriver(q.plan.Source)
		q.derive.SetUsed(q.plan.UsedColumns)
	}
	src := q.plan.Source
	phys := q.derive.Physical()
	if len(row) == len(src.Columns) && len(row) != len(phys.Columns) {
		cells := make([]types.Value, 0, len(phys.Columns))
		for i, c := range src.Columns {
			if c.Computed == nil {
				cells = append(cells, row[i])
			} else if !row[i].Null {
				q.malformed++
				return q.eventErr(&exec.DecodeError{Column: c.Name, Msg: "a computed column's cell must be NULL: it is evaluated from the other columns"})
			}
		}
		row = cells
	}
	if len(row) != len(phys.Columns) {
		q.malformed++
		return q.eventErr(&exec.DecodeError{Msg: fmt.Sprintf("row has %d cells, source %q has %d physical columns (of %d)", len(row), src.Name, len(phys.Columns), len(src.Columns))})
	}
	copied := false
	for i, c := range phys.Columns {
		if !row[i].Null && row[i].Kind != c.Type.Kind {
			q.malformed++
			return q.eventErr(&exec.DecodeError{Column: c.Name, Msg: fmt.Sprintf("cell is %s, column is %s", row[i].Kind, c.Type)})
		}
		if row[i].Kind == types.KindVarchar && !row[i].Null {
			if s := changelog.RepairUTF8(row[i].S); s != row[i].S {
				if !copied {
					row, copied = append([]types.Value(nil), row...), true
				}
				row[i].S = s
			}
		}
	}
	if tc := phys.TimeCol; tc >= 0 && row[tc].Null {
		q.malformed++
		return q.eventErr(&exec.DecodeError{Column: phys.Columns[tc].Name, Msg: "event time is null"})
	}
	full, err := q.derive.Apply(row)
	if err != nil {
		q.malformed++
		return q.eventErr(err)
	}
	return q.process(full)
}

// ReportMalformed counts one event the host could not even hand over (a
// line too long to read), so the summary accounts for every input line.
func (q *Query) ReportMalformed() {
	q.eventsIn++
	q.malformed++
}

func (q *Query) admit() error {
	if q.closed {
		return ErrClosed
	}
	if q.opts.OnRecord == nil {
		// Render what is queued into the room first: a push is taken only
		// when nothing waits before it.
		if err := q.drain(); err != nil {
			return err
		}
		if q.op.Queued() || q.room() <= 0 {
			return ErrBackpressure
		}
	}
	return nil
}

// room is how many more records the buffer can hold.
func (q *Query) room() int {
	return q.eng.opts.MaxPendingRecords - (len(q.pending) - q.head)
}

// setRoom tells the operator how many records it may render now: all of
// them with a callback, the buffer's room without one.
func (q *Query) setRoom() {
	if q.opts.OnRecord == nil {
		q.op.SetRoom(q.room())
	}
}

// drain renders queued records into the buffer's room. A record skipped by
// an evaluation error is counted by the operator; it fails a Strict query.
func (q *Query) drain() error {
	if !q.op.Queued() {
		return nil
	}
	q.op.SetRoom(q.room())
	err := q.op.Drain()
	if err == nil {
		return nil
	}
	var ee *exec.EvalError
	if errors.As(err, &ee) && !q.opts.Strict {
		return nil
	}
	q.fatal = err
	return err
}

func (q *Query) eventErr(err error) error {
	e := &EventError{Seq: q.eventsIn, Err: err}
	if q.opts.Strict {
		q.fatal = e
	}
	return e
}

func (q *Query) process(row []types.Value) error {
	q.setRoom()
	if err := q.op.Process(row); err != nil {
		var ee *exec.EvalError
		if errors.As(err, &ee) {
			return q.eventErr(err)
		}
		q.fatal = err
		return err
	}
	if q.every > 0 {
		q.sinceTick++
		if q.sinceTick >= 256 {
			q.sinceTick = 0
			return q.tick()
		}
	}
	return nil
}

func (q *Query) tick() error {
	now := q.eng.opts.Now()
	if now.Before(q.nextEarly) {
		return nil
	}
	q.nextEarly = now.Add(q.every)
	q.setRoom()
	return q.op.EmitEarly()
}

// Tick performs the early emission that is due by the processing clock.
// Push calls it itself; a host whose input goes idle calls it on a timer.
func (q *Query) Tick() (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if q.every == 0 || q.closed {
		return nil
	}
	return q.tick()
}

// EmitEarly publishes, now, every (group, window) changed since its last
// emission, whatever the interval (EMIT EARLY queries only; otherwise a
// no-op).
func (q *Query) EmitEarly() (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if q.closed {
		return ErrClosed
	}
	q.setRoom()
	return q.op.EmitEarly()
}

// AdvanceWatermark moves the event-time watermark forward (an idle source,
// or a host that knows no earlier event will come). Windows it passes
// finalize; without a callback their records wait for Next.
func (q *Query) AdvanceWatermark(t time.Time) (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if q.closed {
		return ErrClosed
	}
	q.setRoom()
	return q.op.AdvanceWatermark(t.UnixMicro())
}

// Close ends the input: every open window finalizes and its record is
// delivered (or, without a callback, waits for Next, which then returns
// every remaining record). Closing twice is a no-op.
func (q *Query) Close() (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if q.closed {
		return nil
	}
	q.closed = true
	q.setRoom()
	return q.op.Finish()
}

// Next returns the next record, rendering records of queued windows into
// the buffer when it is empty. ok is false when none is pending or queued
// (or the query failed, or another call on it is running).
func (q *Query) Next() (rec changelog.Record, ok bool) {
	if q.head >= len(q.pending) && !q.refill() {
		return changelog.Record{}, false
	}
	rec = q.pending[q.head]
	q.pending[q.head] = changelog.Record{}
	q.head++
	if q.head == len(q.pending) {
		q.pending, q.head = q.pending[:0], 0
	}
	return rec, true
}

// refill renders queued records into the empty buffer.
func (q *Query) refill() bool {
	if q.opts.OnRecord != nil || !q.op.Queued() || q.enter() != nil {
		return false
	}
	var err error
	func() {
		defer q.leave(&err)
		err = q.drain()
	}()
	return q.head < len(q.pending)
}

// Records yields the pending records, draining the buffer.
func (q *Query) Records() iter.Seq[changelog.Record] {
	return func(yield func(changelog.Record) bool) {
		for {
			r, ok := q.Next()
			if !ok || !yield(r) {
				return
			}
		}
	}
}

// Stats returns the query's counters.
func (q *Query) Stats() Stats {
	return Stats{Stats: q.op.Stats(), EventsIn: q.eventsIn, Malformed: q.malformed, Pending: len(q.pending) - q.head, Queued: q.op.Queued()}
}

func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %v\n%s", ErrInternal, r, debug.Stack())
	}
}

// Checkpoint writes the query's state entries through put: all of them when
// full is set, else only those changed since the previous checkpoint (a nil
// value deletes an entry). position is opaque host data (an input offset)
// stored in the meta entry, which comes last. See exec.Operator.Checkpoint.
// While the records of finalized windows wait for Next it returns
// ErrBackpressure and writes nothing.
func (q *Query) Checkpoint(full bool, position []byte, put func(key, val []byte) error) (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	if q.opts.OnRecord == nil {
		if err := q.drain(); err != nil {
			return err
		}
	}
	err = q.op.Checkpoint(full, q.hostPosition(position), put)
	if errors.Is(err, exec.ErrQueued) {
		return fmt.Errorf("%w: a checkpoint waits until the records of finalized windows are taken", ErrBackpressure)
	}
	return err
}

// Restore loads one checkpoint entry into a query that has not processed
// anything yet. For the meta entry it returns the host position given to
// Checkpoint. Call FinishRestore after the last entry.
func (q *Query) Restore(key, val []byte) (position []byte, err error) {
	if err := q.enter(); err != nil {
		return nil, err
	}
	defer q.leave(&err)
	pos, err := q.op.Restore(key, val)
	if err != nil || pos == nil {
		return nil, err
	}
	return q.restoreHostPosition(pos)
}

// FinishRestore completes a restore; the query then continues where the
// checkpoint left it: revisions continue and no window is finalized twice.
func (q *Query) FinishRestore() (err error) {
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave(&err)
	q.op.FinishRestore()
	return nil
}

// hostPosition prefixes the host's position with the query's own counters,
// so that the summary continues across a restart.
func (q *Query) hostPosition(position []byte) []byte {
	b := binary.AppendVarint(nil, q.eventsIn)
	b = binary.AppendVarint(b, q.malformed)
	return append(b, position...)
}

func (q *Query) restoreHostPosition(b []byte) ([]byte, error) {
	in, n := binary.Varint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad position", exec.ErrBadState)
	}
	bad, m := binary.Varint(b[n:])
	if m <= 0 {
		return nil, fmt.Errorf("%w: bad position", exec.ErrBadState)
	}
	q.eventsIn, q.malformed = in, bad
	return b[n+m:], nil
}
