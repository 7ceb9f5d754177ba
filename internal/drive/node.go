package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// joinNode is the node in front of a driver's aggregate that joins two
// inputs and feeds the aggregate the joined rows: a temporal join
// (temporalJoin, join.go) or an interval join (intervalJoin, ijoin.go).
// Input 0 is the stream, or the left input: the records Push and PushRow
// take, decoded and counted by the driver. Input 1 is the versioned
// table, or the right input: the records PushTable and PushTableRow take,
// decoded into the node's second input (joinInput). The driver has no
// join mode: a query with a join has this node, one without has none.
//
// The driver checks its own state (failed, closed) before it calls
// admit, push, advance or end. A node applies joined rows under the rule
// of pushed events: when the driver buffers, only while nothing is queued
// and the buffer has room; the rest wait in the join, and pump applies
// them.
type joinNode interface {
	// admit refuses a push on input that the node cannot take now: an
	// input that has ended, a full join buffer, or, when the driver
	// buffers, rows that still wait for room (ErrBackpressure, after the
	// queued ones were applied as far as the room goes).
	admit(input int) error
	// push hands the node one decoded row of input; raw is the record
	// it came from (nil for a typed row), for the late hooks.
	push(input int, row []types.Value, raw []byte) error
	// advance moves input's watermark to wm if that is later.
	advance(input int, wm int64) error
	// end ends input: no row of it will come.
	end(input int) error
	ended(input int) bool
	// closeOpen releases what an input consumed to its end would
	// (CloseOpenWindows, before the aggregate's windows close).
	closeOpen() error
	// finish ends both inputs; the aggregate finishes once the node has
	// handed it every joined row (Close).
	finish() error
	// pump applies the joined rows the aggregate may take now and moves
	// the aggregate's watermark as far as the node allows.
	pump() error
	// queued reports whether joined rows, or the aggregate's finish,
	// wait for room.
	queued() bool
	// checkpoint writes the node's entries (before the aggregate's, so
	// the meta entry stays last); restore takes one entry, reporting
	// whether it was the node's; finishRestore ends a restore.
	checkpoint(full bool, put func(key, val []byte) error) error
	restore(key, val []byte) (bool, error)
	finishRestore()
	// counts are the counters of input: all of the second input's; of
	// the first, whose records the driver counts, what the node adds
	// (EvalErrors: rows rejected by a join key evaluation error; Late:
	// rows late at the join).
	counts(input int) Counts
	// watermarks are the two inputs' watermarks (math.MinInt64 before an
	// input's first row).
	watermarks() (first, second int64)
	source(input int) *plan.Source
	// second is the second input, whose records the driver decodes and
	// checks into it before push.
	second() *joinInput
}

// temporalNode is what only a temporal join has: its counters, and a late
// floor for a table row (PushTableBehind).
type temporalNode interface {
	joinNode
	joinStats() JoinStats
	setLateFloor(floor int64)
}

// intervalNode is what only an interval join has: its counters.
type intervalNode interface {
	joinNode
	intervalStats() IntervalStats
}

// joinEnv is what a join node holds of its driver: the aggregate it feeds,
// the driver's rules for feeding it (the buffer's room, strict), its
// fatal error, the first input's counters, and the hooks.
type joinEnv struct {
	q        *plan.Query
	agg      aggregate
	buffered bool // the driver buffers its records for Next
	strict   bool
	room     func() int   // the buffer's room (buffered)
	setRoom  func()       // tells the operator the room it may render into
	drain    func() error // renders queued records into the room
	fatal    *error       // the driver's fatal error
	n        *Counts      // the driver's counters of the first input
	late     func(*exec.LateEvent)
	// lateTable receives the second input's late rows.
	lateTable func(*exec.LateEvent)
	// onJoined, if set, takes the joined rows instead of the aggregate
	// (Config.OnJoined).
	onJoined func([]types.Value) error
}

// newJoinNode returns the join node of the driver's query (nil without a
// join). The driver's aggregate is made first: the node feeds it.
func (d *Driver) newJoinNode(cfg Config) (joinNode, error) {
	env := &joinEnv{q: d.q, agg: d.agg, buffered: d.buffered, strict: d.strict, room: d.room, setRoom: d.setRoom,
		drain: d.drain, fatal: &d.fatal, n: &d.n, late: d.late, lateTable: cfg.LateTable, onJoined: cfg.OnJoined}
	switch {
	case d.q.Join != nil:
		t, err := newTemporalJoin(env, cfg)
		if err != nil {
			return nil, err
		}
		return t, nil
	case d.q.IJoin != nil:
		j, err := newIntervalJoin(env, cfg)
		if err != nil {
			return nil, err
		}
		return j, nil
	}
	return nil, nil
}

// blocked reports whether the aggregate may take no row now: the driver
// buffers, and records wait unrendered or the buffer is full.
func (e *joinEnv) blocked() bool { return e.buffered && (e.agg.queued() || e.room() <= 0) }

// fail makes err the driver's fatal error.
func (e *joinEnv) fail(err error) error {
	*e.fatal = err
	return err
}

// eventErr is the error of a row of the first input that was not applied
// (fatal when strict).
func (e *joinEnv) eventErr(err error) error {
	ee := &EventError{Seq: e.n.Events, Err: err}
	if e.strict {
		*e.fatal = ee
	}
	return ee
}

// backlog, when the driver buffers, renders and applies what waits as far
// as the room goes (pump), and refuses a push while anything still waits
// (ready: joined rows wait in the node).
func (e *joinEnv) backlog(pump func() error, ready func() bool) error {
	if !e.buffered {
		return nil
	}
	if err := e.drain(); err != nil {
		return err
	}
	if err := pump(); err != nil {
		return err
	}
	if e.agg.queued() || e.room() <= 0 || ready() {
		return ErrBackpressure
	}
	return nil
}

// apply hands one joined row to the aggregate (or to Config.OnJoined). A
// row that fails to evaluate is counted by the aggregate and skipped,
// unless strict; only a fatal error is returned.
func (e *joinEnv) apply(row []types.Value) error {
	if e.onJoined != nil {
		if err := e.onJoined(row); err != nil {
			return e.fail(err)
		}
		return nil
	}
	e.setRoom()
	if err := e.agg.process(row, nil, false); err != nil {
		if Skipped(err) && !e.strict {
			return nil
		}
		return e.fail(err)
	}
	return nil
}

// advanceAgg moves the aggregate's watermark; finishAgg finishes it.
func (e *joinEnv) advanceAgg(wm int64) error {
	e.setRoom()
	return e.agg.advance(wm)
}

func (e *joinEnv) finishAgg() error {
	e.setRoom()
	return e.agg.finish()
}

// checkpointWaits is the error of a checkpoint refused while records of
// finalized windows wait to be taken.
func checkpointWaits() error {
	return fmt.Errorf("%w: a checkpoint waits until the records of finalized windows are taken", ErrBackpressure)
}

var (
	_ temporalNode = (*temporalJoin)(nil)
	_ intervalNode = (*intervalJoin)(nil)
)
