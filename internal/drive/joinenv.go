package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// joinNode is a node in front of a driver's aggregate that joins two
// inputs and feeds the aggregate the joined rows: a temporal join
// (temporalJoin, join.go) or an interval join (intervalJoin, ijoin.go).
// Input 0 is the stream, or the left input: the records Push and PushRow
// take, decoded and counted by the driver. Input 1 is the versioned
// table, or the right input: the records PushInput and PushInputRow take
// for it, decoded by the node's decode node of that input (joinInput).
// Beyond the node interface it has the two inputs' sources.
type joinNode interface {
	node
	source(input int) *plan.Source
}

// temporalNode is what only a temporal join has: its counters.
type temporalNode interface {
	joinNode
	joinStats() JoinStats
}

// intervalNode is what only an interval join has: its counters.
type intervalNode interface {
	joinNode
	intervalStats() IntervalStats
}

// joinEnv is what a join node holds of its driver: the aggregate it feeds
// (its output edge: rows, watermark, finish and the checkpoint's chain go
// through the node interface), the host's rules for feeding it (its
// buffer's room, strict), its fatal error, the first input's counters,
// and the hooks.
type joinEnv struct {
	q      *plan.Query
	agg    aggregate // the next node
	room   *outbox   // the host's room (buffer.go)
	strict bool
	fatal  *error  // the driver's fatal error
	out    one     // the joined row being applied
	n      *Counts // the driver's counters of the first input
	late   func(*exec.LateEvent)
	// lateTable receives the second input's late rows.
	lateTable func(*exec.LateEvent)
	// onJoined, if set, takes the joined rows instead of the aggregate
	// (Config.OnJoined).
	onJoined func([]types.Value) error
	// skip is the first record the host's call skipped for an
	// evaluation error (a joined row that failed to fold, a window whose
	// HAVING or SELECT failed), which the call returns (pushed, settle).
	skip error
	// sh is the aggregate when it runs on several threads (nil on one),
	// whose skipped records reach the host's calls after a merge
	// (shardskip.go); viewRow is the driver's flag of a view's row being
	// pushed (a graph's join of two views, not the host's event).
	sh      *sharded
	viewRow *bool
	// sg is the aggregate when it is one operator (nil: sharded, or
	// behind a dedup), which takes each joined row and is asked its
	// watermark by a direct call: the node interface's dispatch and its
	// batch of one were a measurable share of a one-thread join.
	sg *single
}

// newJoinNode returns the join node of the driver's query (nil without a
// join). The driver's aggregate is made first: the node feeds it.
func (d *Driver) newJoinNode(cfg Config) (joinNode, error) {
	env := &joinEnv{q: d.q, agg: d.agg, room: &d.out, strict: d.strict, fatal: &d.fatal, n: &d.n, late: d.late, lateTable: cfg.LateTable, onJoined: cfg.OnJoined,
		viewRow: &d.viewRow}
	env.sh, _ = d.agg.(*sharded)
	env.sg, _ = d.agg.(*single)
	switch {
	case d.q.Join != nil:
		t, err := newTemporalJoin(env, cfg)
		if err != nil {
			return nil, err
		}
		return t, nil
	case d.q.IJoin != nil:
		j, err := newIntervalJoin(env, cfg, d)
		if err != nil {
			return nil, err
		}
		return j, nil
	}
	return nil, nil
}

// blocked reports whether the aggregate may take no row now: records
// wait unrendered, or the host's room is used up.
func (e *joinEnv) blocked() bool { return e.agg.queued() || e.room.room() <= 0 }

// aggWatermark is the aggregate's watermark.
func (e *joinEnv) aggWatermark() int64 {
	if e.sg != nil {
		return e.sg.watermark()
	}
	return e.agg.watermark()
}

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

// backlog renders and applies what waits as far as the host's room goes
// (pump), and refuses a push while anything still waits (ready: joined
// rows wait in the node). A host with Emit has room for everything, so
// nothing ever waits for it.
func (e *joinEnv) backlog(pump func() error, ready func() bool) error {
	e.skip = nil // Refill's, counted only
	if err := e.agg.pump(); err != nil {
		return err
	}
	if err := pump(); err != nil {
		return err
	}
	if e.agg.queued() || e.room.room() <= 0 || ready() {
		return ErrBackpressure
	}
	return nil
}

// apply hands one joined row to the aggregate (or to Config.OnJoined). A
// row that fails to evaluate is counted by the aggregate and skipped,
// unless strict, the first of the host's call kept for it to return
// (note); only a fatal error is returned.
func (e *joinEnv) apply(row []types.Value) error {
	if e.onJoined != nil {
		if err := e.onJoined(row); err != nil {
			return e.fail(err)
		}
		return nil
	}
	var err error
	if e.sg != nil {
		err = e.sg.pushOne(row, nil, nil, false)
	} else {
		_, err = e.agg.push(0, e.out.set(row, nil, nil, false))
	}
	if err != nil {
		// A view's row that fails to fold is counted at its reader, as
		// at a reader without a join (an event's error is the host's).
		if e.note(err, !*e.viewRow) {
			return nil
		}
		return e.fail(err)
	}
	return nil
}

// advanceAgg moves the aggregate's watermark, finishAgg finishes it and
// closeAgg closes its open windows: a record skipped then is the call's.
func (e *joinEnv) advanceAgg(wm int64) error { return e.noted(e.agg.advance(0, wm)) }
func (e *joinEnv) finishAgg() error          { return e.noted(e.agg.finish()) }
func (e *joinEnv) closeAgg() error           { return e.noted(e.agg.closeOpen()) }

// note reports whether err is a record's evaluation error that the
// aggregate counted and skipped (not fatal: not strict), keeping the
// first of the host's call when keep.
func (e *joinEnv) note(err error, keep bool) bool {
	if err == nil || e.strict || !Skipped(err) {
		return false
	}
	if keep && e.skip == nil {
		e.skip = err
	}
	return true
}

// noted is err unless it is a skipped record's, which note keeps.
func (e *joinEnv) noted(err error) error {
	if e.note(err, true) {
		return nil
	}
	return err
}

// op0 is the first op a push on the aggregate's shards takes next (0 on
// one thread).
func (e *joinEnv) op0() uint64 {
	if e.sh == nil {
		return 0
	}
	return e.sh.p.op + 1
}

// pushed ends a host's push of one record of an input (raw; n is the
// input's counters, the record its n.Events-th event), whose ops on the
// shards are from op0 on: err is
// its own outcome; without one it returns the first record the push
// skipped for an evaluation error as the record's *EventError, as a
// driver without a join returns its event's (a view's row's, as it is:
// the graph makes it the host call's). On several threads the push's
// records are merged later (shardskip.go): it returns those merged now,
// else an earlier push's of the same input, in input order.
func (e *joinEnv) pushed(in int, n *Counts, op0 uint64, raw []byte, err error) error {
	skip := e.skip
	e.skip = nil
	view := *e.viewRow
	if s := e.sh; s != nil && !view {
		if skip == nil {
			skip = s.sk.own
		}
		s.sk.own = nil
		s.record(op0, n.Events, raw, in)
	}
	switch {
	case err != nil:
		return err
	case skip != nil && view:
		return skip
	case skip != nil:
		return &EventError{Seq: n.Events, Err: skip}
	case e.sh != nil && !view:
		return e.sh.popPending(in) // an earlier push's of the same input
	}
	return nil
}

// settle ends a host's call on the join that is not a push: err, else
// the first record it skipped.
func (e *joinEnv) settle(err error) error {
	skip := e.skip
	e.skip = nil
	if err != nil {
		return err
	}
	return skip
}

// tick is the aggregate's: a join emits nothing early.
func (e *joinEnv) tick() error { return e.agg.tick() }

// checkpointWaits is the error of a checkpoint refused while records of
// finalized windows wait to be taken.
func checkpointWaits() error {
	return fmt.Errorf("%w: a checkpoint waits until the records of finalized windows are taken", ErrBackpressure)
}

var (
	_ temporalNode = (*temporalJoin)(nil)
	_ intervalNode = (*intervalJoin)(nil)
)
