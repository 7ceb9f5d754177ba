// Package drive is the one driver of an exec.Operator. Every host runs its
// operator through a Driver: the root package's Query (file runs, the C
// ABI, Python) and both stages of the Kafka pipeline (the repartitioning
// stage routes with Route; the aggregating stage applies with Push or,
// for a routed record, PushKeyed). So decoding, counting, the late and
// bad-event paths, panic recovery, bounded emission (room, backpressure,
// refills for Next), early emission by the processing clock, the
// watermark, closing, and checkpoints with the host's position are
// written once, here, and cannot drift between hosts.
//
// A Driver is not safe for concurrent use. Enter and Leave bracket a call
// from a host that must detect misuse and recover panics (the root Query);
// Recover alone serves a host that owns its goroutine (Kafka).
package drive

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// tickEvery is how many applied events pass between two looks at the
// processing clock for early emission: the clock is not read per event.
const tickEvery = 256

// Config configures a Driver.
type Config struct {
	// Emit receives every record synchronously; its byte slices are valid
	// only during the call. Nil: the driver buffers records for Next and
	// holds at most MaxPending of them (see Next).
	Emit func(*changelog.Record) error
	// MaxPending bounds the buffered records when Emit is nil. Required then.
	MaxPending int
	// Late, if set, receives every event for a window already final, with
	// LateEvent.Event set to the input record that carried it. Late events
	// are counted either way.
	Late func(*exec.LateEvent)
	// Logger receives diagnostics (a recovered panic's stack). Nil: none.
	Logger *slog.Logger
	// Now is the processing clock (early emission, emission latency).
	// Default time.Now.
	Now func() time.Time
	// Decoder reads the input records. Default: exec.NewQueryDecoder,
	// JSON or CSV per the source's options, converting only the columns
	// the query reads.
	Decoder *exec.Decoder
	// ExternalWatermark: only AdvanceWatermark moves the watermark (a
	// source with several partitions), see exec.Config.
	ExternalWatermark bool
	// RecordWatermark: the watermark is that of every record fed so far,
	// at every call, on any number of threads: Feed decodes each record as
	// it comes rather than in blocks on the shards (whose watermark lags
	// by the blocks not yet decoded). A host that reads the watermark to
	// decide which of two inputs to read next needs it, or its order, and
	// so the changelog, would depend on the threads' timing.
	RecordWatermark bool
	// Strict makes the first event that is not applied a fatal error.
	Strict bool
	// CountsInCheckpoint stores the event and malformed counters in the
	// checkpoint's meta entry, before the host's position, and restores
	// them, so a host's summary continues across a restart.
	CountsInCheckpoint bool
	// A query with a temporal join: TableDecoder reads the table's
	// records (default: JSON or CSV per the table's options); JoinBuffer
	// bounds the events that wait for the table's watermark (default
	// plan.DefaultJoinBuffer; beyond it a push returns ErrJoinBuffer);
	// LateTable receives the table rows behind its watermark (default:
	// none are handed over; they are counted either way).
	TableDecoder *exec.Decoder
	JoinBuffer   int
	LateTable    func(*exec.LateEvent)
	// IncrementalJoinState writes a temporal join's checkpoint as one
	// small header entry plus an entry per waiting event and per version,
	// each checkpoint only what changed (exec.TemporalJoin.AppendEntries),
	// for a host that checkpoints every transaction into records of a
	// bounded size (Kafka); an interval join's likewise, an entry per
	// held row (exec.IntervalJoin.AppendEntries). Default: one entry
	// holding the whole join. An interval join restores from either
	// format whichever it writes: an incremental driver over a
	// checkpoint of one entry writes every held row's entry at its next
	// checkpoint, so a host can change formats over a kept checkpoint.
	//
	// For an interval join, JoinBuffer bounds the rows it holds, both
	// inputs together (0: no bound; beyond it a push returns
	// ErrIntervalJoinFull and the driver fails), and LateTable receives
	// the right input's late rows.
	IncrementalJoinState bool
	// Threads > 1 runs the operator as Threads-1 shards, each on its own
	// goroutine, the groups split among them by key, with this driver's
	// goroutine, the last thread, decoding (with Feed: in blocks, which a
	// shard's goroutine decodes instead when it waits for work, feed.go)
	// and merging (sharded.go): the changelog is byte
	// for byte the one thread's. It applies to a driver with Emit, no Late
	// hook, not Strict, for a query with a GROUP BY key; any other runs
	// on one thread (Threads reports which). The
	// records of pushed events reach Emit up to two batches of events
	// later; every call but Push and PushRow (Tick, EmitEarly,
	// AdvanceWatermark, CloseOpenWindows, Close, Checkpoint) delivers
	// everything before it returns.
	Threads int
	// OnEventError receives, for Feed and ReportMalformedAt, each record
	// that was not applied cleanly, with the host's tag, in input order
	// (see Feed). BlockEvents is the most records a block of the block
	// path holds: on threads (default 4,096; tests vary it), and on one
	// thread, where a block is decoded, then folded (feed_solo.go;
	// below 2: each record is applied as it is fed).
	OnEventError func(tag int64, raw []byte, err *EventError)
	BlockEvents  int

	// OnRow, if set, receives the projected row of every record, typed,
	// just before the record is delivered (or buffered); valid only during
	// the call. A Graph feeds a view's readers with it.
	OnRow func(row []types.Value) error
	// OnMark, for a driver on several threads whose rows feed another
	// query (OnRow), receives its watermark at the end of every call that
	// moved it, in the merged stream: after the rows of that call and
	// before the next call's (MarkCall ends a call). One thread's host
	// reads Watermark after each call instead.
	OnMark func(wm int64)
	// OnJoined, for a query with an interval join, receives each joined
	// row (owned by the callee) instead of the operator: a host that
	// aggregates the joined rows elsewhere (Kafka: after a repartition
	// by the GROUP BY key, through ApplyRow). The operator then holds no
	// group; its watermark is still the joined stream's. A temporal
	// join's joined rows likewise (valid only during the call).
	OnJoined func(row []types.Value) error
	// HostTicks: an EMIT EARLY query's early emission happens only when
	// the host calls Tick (when it is due by the processing clock);
	// pushing rows never reads the clock. A transactional host ticks
	// just before it commits: early records are invisible until the
	// commit, so emitting in the middle of a transaction only shows
	// readers older values and produces records a later emission in the
	// same transaction replaces.
	HostTicks bool
	// Deduplicated are the sources whose events reach the driver
	// deduplicated by the host (a Kafka dedup stage before a segment of
	// several queries): a query over one keeps no dedup of its own.
	// Default none.
	Deduplicated []*plan.Source
}

func (c Counts) minus(o Counts) Counts {
	return Counts{c.Records - o.Records, c.Events - o.Events, c.Malformed - o.Malformed, c.Headers - o.Headers,
		c.Applied - o.Applied, c.EvalErrors - o.EvalErrors, c.Late - o.Late}
}

// Driver runs one query: its decode node, then the head of its chain of
// nodes (node.go: a join node if the query has a join, then the
// aggregate).
type Driver struct {
	q     *plan.Query
	in    decodeNode // the first input's decode node (decode.go)
	first node       // the first node of the chain (node.go): the join, or the aggregate
	agg   aggregate  // the window aggregate node, the chain's last
	// solo is first when it is a single aggregate (no join, no dedup, one
	// thread): the per-event calls reach it without the node interface
	// and a batch of one, which cost about 5% of a one-thread run.
	solo *single
	// fed is the feeder when records fed wait in a block (feed_solo.go).
	fed *soloFeed
	// feeder takes Feed's records (feed.go): direct, or the sharded
	// aggregate's block decode node.
	feeder feeder
	// ownRow: the row being pushed is the caller's to give away
	// (pushViewRow).
	ownRow bool
	// viewRow: the row being pushed is a view's (pushViewRow).
	viewRow bool
	late    func(*exec.LateEvent)
	log     *slog.Logger // receives a recovered panic's stack; may be nil
	// onEventError is Config.OnEventError.
	onEventError func(tag int64, raw []byte, err *EventError)
	// skipStep takes the records a stepped graph's node skipped outside
	// its pushes, with the host's step (graph_outcome.go).
	skipStep func(step uint64, err error)
	// feeding: the event being pushed was fed (direct.feed), with feedTag.
	feeding   bool
	feedTag   int64
	now       func() time.Time
	startMono int64 // nanotime() when start was read
	start     time.Time
	strict    bool
	counts    bool // CountsInCheckpoint

	out outbox // the records, and the room the nodes render into (buffer.go)

	raw []byte // the input record being applied, for the late hook

	every     time.Duration // EMIT EARLY interval; 0 otherwise
	hostTicks bool          // Config.HostTicks: only Tick emits early
	nextEarly time.Time
	sinceTick int

	one one // the row being pushed

	n, taken Counts
	closed   bool
	fatal    error
	busy     atomic.Bool
	_        [cacheLine]byte // the driver's fields off the line of whatever the allocator puts after it (a shard's)
}

// New returns a driver of q. A plan an operator cannot run
// (plan.Query.Validate) or a source the decoder cannot read is an error.
func New(q *plan.Query, cfg Config) (*Driver, error) {
	d, err := newDriver(q, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Emit == nil && cfg.MaxPending < 1 {
		return nil, fmt.Errorf("drive: a buffering driver needs MaxPending >= 1, got %d", cfg.MaxPending)
	}
	if q.Emit.Mode == plan.EmitEarly {
		d.every = time.Duration(q.Emit.EarlyEvery) * time.Microsecond
		d.hostTicks = cfg.HostTicks
		d.nextEarly = d.start.Add(d.every)
	}
	if ok, _ := eligible(q, cfg); ok && cfg.Threads > 1 {
		if err := d.shard(cfg); err != nil {
			return nil, err
		}
		return d, d.initJoins(cfg)
	}
	ecfg := exec.Config{
		Emit:              d.out.add,
		Nanotime:          d.nanotime(),
		ExternalWatermark: cfg.ExternalWatermark || q.IJoin != nil,
	}
	if cfg.Emit != nil {
		ecfg.Emit = cfg.Emit
	}
	if cfg.Late != nil {
		ecfg.Late = d.onLate
	}
	var op *exec.Operator
	if cfg.OnRow != nil {
		deliver, onRow := ecfg.Emit, cfg.OnRow
		ecfg.Emit = func(r *changelog.Record) error {
			if err := onRow(op.EmittedRow()); err != nil {
				return err
			}
			return deliver(r)
		}
	}
	var dd *dedupNode
	if !slices.Contains(cfg.Deduplicated, q.Source) {
		dd = dedupFront(q, &ecfg)
	}
	if op, err = exec.New(exec.NoDedup(q), ecfg); err != nil {
		return nil, err
	}
	d.agg = dd.front(&single{d.aggIn(), op, &d.out})
	return d, d.initJoins(cfg)
}

// shard makes the driver's aggregate node K shards (Config.Threads).
func (d *Driver) shard(cfg Config) error {
	q := d.q
	// JSON lines of a query's own source through the driver's own
	// decoder can be decoded in blocks by the shards' goroutines
	// (feed.go); a join's rows are the join's, made on this goroutine.
	blocks := cfg.Decoder == nil && !d.in.dec.IsCSV() && !cfg.ExternalWatermark && !cfg.RecordWatermark && q.Join == nil && q.IJoin == nil
	// The driver holds the merge's callbacks; the shards only weakly
	// (parOut), so dropping the driver lets its cleanup run.
	out := &parOut{emit: cfg.Emit, onRow: cfg.OnRow, onMark: cfg.OnMark}
	// The driver's goroutine is one of the threads: K = Threads-1 shards.
	p, err := newPar(q, cfg, out, cfg.Threads-1, blocks)
	if err != nil {
		return err
	}
	// A host that interleaves two inputs hears of each fed event as it
	// is pushed, in its order of the inputs (shardskip.go).
	s := &sharded{aggIn: d.aggIn(), p: p, out: out, feed: d.feeder, holds: !cfg.RecordWatermark}
	out.onSkips = s.onSkips
	if blocks {
		f := &blockFeed{d: d, s: s, p: p}
		s.feed, d.feeder = f, f
	}
	d.agg = s
	// A host that drops the driver without closing it leaves no
	// goroutine behind.
	runtime.AddCleanup(d, func(p *par) { p.cleanup() }, p)
	return nil
}

// aggIn is how the aggregate takes its rows: the driver's events, or a
// join's joined rows.
func (d *Driver) aggIn() aggIn { return aggIn{d: d, head: d.q.Join == nil && d.q.IJoin == nil} }

// initJoins sets up the chain: the join in front of the aggregate, if q
// has one, then the aggregate.
func (d *Driver) initJoins(cfg Config) error {
	jn, err := d.newJoinNode(cfg)
	if err != nil {
		return err
	}
	d.first = d.agg
	if jn != nil {
		d.first = jn
	}
	d.solo, _ = d.first.(*single)
	return nil
}

func newDriver(q *plan.Query, cfg Config) (*Driver, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	dec, err := inputDecoder(q, cfg.Decoder)
	if err != nil {
		return nil, err
	}
	d := &Driver{q: q, late: cfg.Late, log: cfg.Logger, now: cfg.Now, strict: cfg.Strict,
		counts: cfg.CountsInCheckpoint, out: newOutbox(cfg), onEventError: cfg.OnEventError}
	d.feeder = direct{d}
	d.in = decodeNode{dec: dec, src: firstSource(q), used: firstUsed(q), n: &d.n}
	if d.now == nil {
		d.now = time.Now
	}
	d.start = d.now()
	d.startMono = nanotime()
	return d, nil
}

// Threads is the number of threads the driver runs: its shards and the
// caller's goroutine (1: the operator runs on the caller's goroutine).
func (d *Driver) Threads() int { return d.agg.threads() }

// ThreadsFallback says why a query configured with Threads > 1 runs on
// one thread ("" when it would run on several).
func ThreadsFallback(q *plan.Query, cfg Config) string {
	_, why := eligible(q, cfg)
	return why
}

// Query returns the driven query.
func (d *Driver) Query() *plan.Query { return d.q }

func (d *Driver) onLate(ev *exec.LateEvent) {
	ev.Event = d.raw
	ev.Source = d.inputSource()
	d.late(ev)
}

// Enter begins a call of a host that detects concurrent use: it fails
// with ErrConcurrentUse while another call runs, and with the driver's
// fatal error once it has one. A successful Enter is paired with a
// deferred Leave.
func (d *Driver) Enter() error {
	if !d.busy.CompareAndSwap(false, true) {
		return ErrConcurrentUse
	}
	if d.fatal != nil {
		d.busy.Store(false)
		return d.fatal
	}
	return nil
}

// Leave ends a call begun by Enter; deferred, it turns a panic into an
// ErrInternal error that is the driver's fatal error from then on.
func (d *Driver) Leave(err *error) {
	if r := recover(); r != nil {
		d.fatal = internal(r)
		*err = d.fatal
		LogPanic(d.log, d.fatal)
	}
	d.busy.Store(false)
}

// Err returns the driver's fatal error, if it failed.
func (d *Driver) Err() error { return d.fatal }

func (d *Driver) tick() error {
	now := d.now()
	if now.Before(d.nextEarly) {
		return nil
	}
	d.nextEarly = now.Add(d.every)
	return d.first.tick()
}

// Tick performs the early emission that is due by the processing clock
// (EMIT EARLY queries; otherwise a no-op), and a parallel driver delivers
// the records still in flight. Push looks at the clock itself every few
// hundred events; a host whose input goes quiet calls Tick.
func (d *Driver) Tick() error {
	if d.closed {
		return nil
	}
	if d.every > 0 {
		if err := d.tick(); err != nil {
			return err
		}
	}
	// A quiet input: what is in flight is delivered now.
	return d.sync()
}

// EmitEarly publishes now every (group, window) changed since its last
// emission, whatever the interval.
func (d *Driver) EmitEarly() error {
	if d.closed {
		return ErrClosed
	}
	if err := d.syncJoin(); err != nil {
		return err
	}
	return d.agg.emitEarly()
}

// Flush delivers every record of the events pushed so far: a parallel
// driver's in-flight batches are applied and merged. One thread's
// records are delivered as they are rendered, so it has nothing to do.
func (d *Driver) Flush() error {
	if d.closed {
		return nil
	}
	return d.sync()
}

// sync delivers every record of what the driver took: a join's rows in
// flight on threads (ijoin_split.go), then the aggregate's.
func (d *Driver) sync() error {
	if err := d.syncJoin(); err != nil {
		return err
	}
	return d.agg.sync()
}

// syncJoin applies the joined rows in flight of a join on threads.
func (d *Driver) syncJoin() error {
	if j, ok := d.first.(*intervalJoin); ok && j.sp != nil {
		return j.sync()
	}
	return nil
}

// Watermark is the operator's watermark (µs): on threads, the one its
// rows in flight move it to.
func (d *Driver) Watermark() int64 {
	if j, ok := d.first.(*intervalJoin); ok && j.sp != nil {
		return max(d.agg.watermark(), j.sp.aggWM)
	}
	return d.agg.watermark()
}

// Delivered is the watermark whose records have all been delivered: the
// operator's, or, on several threads, that of the last batch merged.
func (d *Driver) Delivered() int64 { return d.agg.delivered() }

// AdvanceWatermark moves the watermark to wm (µs) if that is later;
// windows it passes finalize (when buffering, their records wait for Next).
func (d *Driver) AdvanceWatermark(wm int64) error {
	if d.closed {
		return ErrClosed
	}
	return d.delivering(d.first.advance(0, wm))
}

// delivering ends a call that is not a push: unless it failed, every
// record of what it did is delivered before it returns (a sharded
// aggregate's rows in flight are merged).
func (d *Driver) delivering(err error) error {
	if err != nil && !Skipped(err) {
		return err
	}
	// A record skipped is counted: the rest is delivered all the same,
	// and the call returns the first of its records' errors.
	if serr := d.sync(); serr != nil && (err == nil || !Skipped(serr)) {
		return serr
	}
	return err
}

// CloseOpenWindows finalizes every open window, moving the watermark only
// as far as their ends (an input consumed to its end, that may grow), and
// publishes what an early emission would.
func (d *Driver) CloseOpenWindows() error {
	if d.closed {
		return ErrClosed
	}
	return d.first.closeOpen()
}

// Close ends the input: every open window finalizes. Closing twice is a
// no-op.
func (d *Driver) Close() error {
	if d.closed {
		return nil
	}
	if err := d.feeder.drain(); err != nil {
		return err
	}
	d.closed = true
	// Every input ends: a join applies every joined row, then the
	// windows finalize (when buffering, as Next makes room).
	return d.first.finish()
}

// inputSource is the declared source of the records Push and PushRow
// take: the query's, a temporal join's stream, an interval join's left
// input.
func (d *Driver) inputSource() *plan.Source { return d.in.src }

// firstUsed is the columns the query reads of the records Push and PushRow
// take.
func firstUsed(q *plan.Query) []bool {
	switch {
	case q.Join != nil:
		return q.StreamUsed()
	case q.IJoin != nil:
		return q.LeftUsed()
	}
	return q.UsedColumns
}
