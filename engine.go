package ubik

import (
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
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
	defer e.recover(&err)
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

// RegisterSource declares a source of another program (Program.Sources)
// for later scripts, as its CREATE SOURCE or CREATE TABLE would.
func (e *Engine) RegisterSource(src *Source) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	s := *src.s
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
func (e *Engine) Compile(script, defaultName string) (prog *Program, err error) {
	return e.compile(script, plan.CompileOptions{DefaultName: defaultName})
}

func (e *Engine) compile(script string, o plan.CompileOptions) (prog *Program, err error) {
	defer e.recover(&err)
	e.mu.Lock()
	o.Sources = e.sources
	e.mu.Unlock()
	p, err := plan.Compile(script, o)
	if err != nil {
		return nil, err
	}
	return newProgram(p), nil
}

// CompileViews compiles script as Compile does, for a host that writes
// each query without a CREATE SINK to an output of its own (the ubik
// command line: one file per query), so several such queries are allowed.
func (e *Engine) CompileViews(script, defaultName string) (prog *Program, err error) {
	return e.compile(script, plan.CompileOptions{DefaultName: defaultName, OwnOutputs: true})
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
	// final, with LateEvent.Event the bytes given to Push (nil for
	// PushRow); valid only during the call. Late events are counted either
	// way.
	OnLate func(*LateEvent)
	// Strict makes the first malformed event a fatal error for the query.
	Strict bool
	// JoinBuffer bounds the events a temporal join holds while they wait
	// for the table's watermark (default plan.DefaultJoinBuffer): beyond
	// it Push returns ErrJoinBuffer, having done nothing. For an interval
	// join it bounds the rows held, both inputs together (default: no
	// bound); beyond it a push fails the query (ErrIntervalJoinFull).
	JoinBuffer int
	// OnLateTable, if set, receives each row of a versioned table behind
	// the table's watermark (not applied; counted either way).
	OnLateTable func(*LateEvent)
	// Threads > 1 runs the query's groups as Threads-1 shards on their
	// own goroutines, split by group key, while the pushing goroutine, the
	// last thread, decodes events (with Feed: in blocks, which a shard
	// decodes instead when it waits for work) and merges the shards'
	// records: the changelog is
	// byte for byte the one-thread changelog (records and order). It
	// applies to every shape: a query's own aggregate, a join's (the join
	// itself runs on the pushing goroutine and hands its joined rows to
	// the shards in order), and each query of a graph of views (a view's
	// rows reach its readers in one thread's order). A query with
	// OnRecord, no OnLate (for a view: no OnViewLate), not Strict, with a
	// GROUP BY key runs on the shards; any other runs on one thread
	// (Query.Threads says which: for a graph, the most of any query). Records of pushed events may reach
	// OnRecord up to two batches (about 2,000 events) after their Push;
	// Tick, EmitEarly, AdvanceWatermark, Close and Checkpoint deliver
	// everything before they return. An aggregate that fails while
	// folding an event (an overflow), or a HAVING or SELECT that fails
	// while rendering, is counted and skipped as with one thread, and
	// reported as one thread reports it: a fed event's *EventError
	// reaches OnEventError with its tag and bytes, in input order; a call
	// other than a push returns the error of its own records; a pushed
	// event's *EventError (its Seq) is returned by a later Push or PushRow
	// that has none of its own, one each, in input order (those still
	// waiting at Close are counted only). Behind a join a push of
	// either input is such a push, and a fed event's outcome waits in
	// input order once the join's second input has ended; in a graph of
	// views a reader's window that fails is reported as the fed event's
	// whose call finalized it on one thread, in input order. 0 or 1: one
	// thread.
	Threads int
	// OnEventError receives, for Feed and ReportMalformedAt, every event
	// that was not applied cleanly (malformed, or failing to evaluate),
	// with the tag the host gave it, the event's bytes (nil for
	// ReportMalformedAt) and the *EventError Push would have returned, in
	// input order (see Feed). Nil: such events are only counted.
	OnEventError func(tag int64, event []byte, err *EventError)
	// BlockEvents is the most events Feed collects into one block: for
	// the decoding threads of a query on several threads (default 4,096);
	// on one thread (0 or 1, the default: each Feed applies its event
	// before it returns), a block is decoded, then folded, which keeps the
	// decoder's and the operator's code in the CPU's instruction cache
	// (about a tenth less CPU; ubik run uses 64), its events' outcomes
	// reaching OnEventError during a later call as on several threads. It
	// applies to a query with OnRecord and OnEventError, no OnLate, not
	// Strict, reading JSON lines with no join in front of its aggregate.
	BlockEvents int

	// With names further queries of the script to run in the same graph
	// (see StartGraph); it needs OnRecord.
	With []string
	// OnViewRecord, if set, receives the records of every other query of
	// the graph: the views the query reads and the With queries, each
	// with Record.Meta.Query naming it (see StartGraph). Nil drops them.
	OnViewRecord func(changelog.Record) error
	// OnViewLate, if set, receives the late events of every other query of
	// the graph with its name (else they go to OnLate).
	OnViewLate func(query string, ev *LateEvent)
}

// Start compiles script (CREATE SOURCE statements plus queries) and starts
// one query.
func (e *Engine) Start(script string, qo QueryOptions) (q *Query, err error) {
	defer e.recover(&err)
	prog, err := e.Compile(script, qo.Name)
	if err != nil {
		return nil, err
	}
	pq, err := pickQuery(prog.p, qo.Name)
	if err != nil {
		return nil, err
	}
	if len(qo.With) > 0 {
		with, err := withQueries(prog.p, qo.With)
		if err != nil {
			return nil, err
		}
		return e.startGraph(prog.c.plan(pq), with, qo)
	}
	return e.StartPlan(prog.c.plan(pq), qo)
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

// StartPlan starts a query of a compiled Program (a query over views
// runs with its views, as StartGraph runs it).
func (e *Engine) StartPlan(p *Plan, qo QueryOptions) (q *Query, err error) {
	defer func() {
		if err != nil {
			q = nil
		}
	}()
	defer e.recover(&err)
	if p == nil {
		return nil, ErrNoQuery
	}
	pq := p.q
	if pq.Source != nil && len(pq.Views()) > 0 {
		return e.StartGraph(p, nil, qo)
	}
	cfg := drive.Config{
		MaxPending:         e.opts.MaxPendingRecords,
		Late:               lateHook(qo.OnLate),
		Now:                e.opts.Now,
		Logger:             e.opts.Logger,
		Strict:             qo.Strict,
		CountsInCheckpoint: true, // the summary continues across a restart
		JoinBuffer:         qo.JoinBuffer,
		LateTable:          lateHook(qo.OnLateTable),
		Threads:            qo.Threads,
		OnEventError:       qo.OnEventError,
		BlockEvents:        qo.BlockEvents,
	}
	if qo.OnRecord != nil {
		onRecord := qo.OnRecord
		cfg.Emit = func(r *changelog.Record) error { return onRecord(*r) }
	}
	g, err := drive.NewQueryGraph(pq, cfg)
	if err != nil {
		return nil, err
	}
	return &Query{plan: pq, pub: p, callback: qo.OnRecord != nil, d: g, onEventError: qo.OnEventError,
		oneThread: drive.ThreadsFallback(pq, cfg)}, nil
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
//
// The work is an internal graph's (internal/drive: one node per query),
// which the Kafka pipeline runs too; Query adds the checks of the
// embedding API.
type Query struct {
	plan      *plan.Query
	pub       *Plan  // plan's wrapper
	oneThread string // why the query runs on one thread, if it does
	callback  bool
	// d runs the query: a graph of one node, or for a query over views
	// of one node per query (its views' and the With queries').
	d *drive.Graph

	onEventError func(tag int64, event []byte, err *EventError) // QueryOptions.OnEventError
	restored     restoredEntries                                // what Restore loaded, until FinishRestore
}

// Plan returns the compiled query.
func (q *Query) Plan() *Plan { return q.pub }

// OneThreadReason says why a query whose QueryOptions.Threads is above
// one runs on one thread ("" when its options let it run on several).
func (q *Query) OneThreadReason() string { return q.oneThread }

// Flush delivers to OnRecord every record of the events pushed so far
// (a query on several threads delivers them up to two batches late; on
// one thread it has nothing to do).
func (q *Query) Flush() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.Flush()
}

// Threads is the number of threads the query runs on, the pushing
// goroutine and the shards (see QueryOptions.Threads); 1 when it runs on
// the pushing goroutine alone.
func (q *Query) Threads() int { return q.d.Threads() }

// Push decodes and applies one JSON event. A malformed event returns an
// *EventError (counted in Stats.Malformed) and the query continues, unless
// the query is Strict. ErrBackpressure means nothing was applied, not even
// the decoding: take records with Next and push the same event again.
func (q *Query) Push(event []byte) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.Push(event)
}

// Feed hands over one JSON event, as Push does, tagged by the host (a line
// number, say). An event that is not applied cleanly is reported to
// QueryOptions.OnEventError with its tag, in input order, rather than
// returned. A query on several threads collects the events it is fed into
// blocks that its decoding threads decode and check in parallel, so the
// callback may run during a later Feed or during any call that delivers
// records (Flush, Tick, EmitEarly, AdvanceWatermark, Close, Checkpoint:
// each first takes every event fed); so it may on one thread with
// QueryOptions.BlockEvents; otherwise the callback runs before Feed
// returns. The bytes are copied. The error returned is fatal
// (or ErrBackpressure, as for Push). The records and their order are
// those of Push.
func (q *Query) Feed(event []byte, tag int64) error {
	// Through a function of its own, so the deferred Leave's error does
	// not escape: a heap cell per event otherwise.
	return feed(q.d, event, tag)
}

func feed(g *drive.Graph, event []byte, tag int64) (err error) {
	if err := g.Enter(); err != nil {
		return err
	}
	defer g.Leave(&err)
	return g.Feed(event, tag)
}

// ReportMalformedAt counts one event the host could not even hand over
// (a line too long to read), as ReportMalformed, and reports err for it to
// QueryOptions.OnEventError with the tag, in input order among the events
// fed (see Feed).
func (q *Query) ReportMalformedAt(tag int64, cause error) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.ReportMalformedAt(tag, cause)
}

// PushRow applies one typed row, in the source's column order. For a source
// with computed columns, the row holds the physical columns only, or every
// column with each computed cell NULL; the computed cells are evaluated and
// TIMESTAMP(p) cells rounded, as the decoders do.
func (q *Query) PushRow(row []Value) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.PushRow(cells(row))
}

// ReportMalformed counts one event the host could not even hand over (a
// line too long to read), so the summary accounts for every input line.
func (q *Query) ReportMalformed() { q.d.ReportMalformed() }

// Tick performs the early emission that is due by the processing clock.
// Push calls it itself; a host whose input goes idle calls it on a timer.
func (q *Query) Tick() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.Tick()
}

// EmitEarly publishes, now, every (group, window) changed since its last
// emission, whatever the interval (EMIT EARLY queries only; otherwise a
// no-op).
func (q *Query) EmitEarly() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.EmitEarly()
}

// AdvanceWatermark moves the event-time watermark forward (an idle source,
// or a host that knows no earlier event will come). Windows it passes
// finalize; without a callback their records wait for Next.
func (q *Query) AdvanceWatermark(t time.Time) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.AdvanceWatermark(t.UnixMicro())
}

// Close ends the input: every open window finalizes and its record is
// delivered (or, without a callback, waits for Next, which then returns
// every remaining record). Closing twice is a no-op.
func (q *Query) Close() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.Close()
}

// Next returns the next record, rendering records of queued windows into
// the buffer when it is empty. ok is false when none is pending or queued
// (or the query failed, or another call on it is running).
func (q *Query) Next() (rec changelog.Record, ok bool) {
	if rec, ok = q.d.Next(); ok || !q.refill() {
		return rec, ok
	}
	return q.d.Next()
}

// refill renders queued records into the empty buffer.
func (q *Query) refill() (ok bool) {
	if q.callback || !q.d.Queued() || q.d.Enter() != nil {
		return false
	}
	var err error
	defer q.d.Leave(&err)
	ok, err = q.d.Refill()
	return ok
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
	c := q.d.Counts()
	t := q.d.TableCounts()
	s := q.d.Stats()
	// Late and EvalErrors count every event handed to OnLate or rejected,
	// wherever it was: at a window, or at a join before the windows (an
	// interval join's late left rows, a temporal join's late events), as
	// the run summary does; Join and Interval hold the join's own share.
	s.Late, s.EvalErrors = c.Late, c.EvalErrors
	st := operatorStats(s)
	st.EventsIn, st.Malformed, st.Pending, st.Queued = c.Events, c.Malformed, q.d.Pending(), q.d.Queued()
	st.Join, st.Table = joinStats(q.d.JoinStats()), TableStats{RowsIn: t.Events, Malformed: t.Malformed, Late: t.Late}
	st.Interval = intervalStats(q.d.IntervalStats())
	return st
}

// Checkpoint writes the query's state entries through put: all of them when
// full is set, else only those changed since the previous checkpoint (a nil
// value deletes an entry). position is opaque host data (an input offset)
// stored in the meta entry, which comes last. See exec.Operator.Checkpoint.
// While the records of finalized windows wait for Next it returns
// ErrBackpressure and writes nothing.
func (q *Query) Checkpoint(full bool, position []byte, put func(key, val []byte) error) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.Checkpoint(full, position, put)
}

// Restore loads one checkpoint entry into a query that has not processed
// anything yet. For the meta entry it returns the host position given to
// Checkpoint. Call FinishRestore after the last entry. Give each key's
// latest value once, in any order (an empty value: a deleted entry); an
// entry given twice, or one the query could not have written, is refused
// with an error wrapping the engine's bad-state error.
func (q *Query) Restore(key, val []byte) (position []byte, err error) {
	if err := q.d.Enter(); err != nil {
		return nil, err
	}
	defer q.d.Leave(&err)
	if err := q.restored.add(key, val, q.metaKey()); err != nil {
		return nil, err
	}
	return q.d.Restore(key, val)
}

// metaKey is the key of the query's meta entry.
func (q *Query) metaKey() []byte { return q.d.MetaKey() }

// FinishRestore completes a restore; the query then continues where the
// checkpoint left it: revisions continue and no window is finalized twice.
// Entries without the meta entry (which every checkpoint writes) are
// refused.
func (q *Query) FinishRestore() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	if err := q.restored.finish(); err != nil {
		return err
	}
	return q.d.FinishRestore()
}
