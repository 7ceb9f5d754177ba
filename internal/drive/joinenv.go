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
}

// newJoinNode returns the join node of the driver's query (nil without a
// join). The driver's aggregate is made first: the node feeds it.
func (d *Driver) newJoinNode(cfg Config) (joinNode, error) {
	env := &joinEnv{q: d.q, agg: d.agg, room: &d.out, strict: d.strict, fatal: &d.fatal, n: &d.n, late: d.late, lateTable: cfg.LateTable, onJoined: cfg.OnJoined}
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
// unless strict; only a fatal error is returned.
func (e *joinEnv) apply(row []types.Value) error {
	if e.onJoined != nil {
		if err := e.onJoined(row); err != nil {
			return e.fail(err)
		}
		return nil
	}
	if _, err := e.agg.push(0, e.out.set(row, nil, nil, false)); err != nil {
		if Skipped(err) && !e.strict {
			return nil
		}
		return e.fail(err)
	}
	return nil
}

// advanceAgg moves the aggregate's watermark; finishAgg finishes it.
func (e *joinEnv) advanceAgg(wm int64) error { return e.agg.advance(0, wm) }
func (e *joinEnv) finishAgg() error          { return e.agg.finish() }

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
