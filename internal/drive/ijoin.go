package drive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A query with an interval join (plan.Query.IJoin) has two stream
// inputs: the left, pushed with Push and PushRow as any query's events,
// and the right, input 1, pushed with PushInput and PushInputRow (the
// root package names both by source). The driver's
// join node (intervalJoin) holds the join state (exec.IntervalJoin) in
// front of the aggregate: a row is matched against the other input's held
// rows when it arrives, and the joined rows go to the aggregate, whose
// watermark only the join moves (exec.Config.ExternalWatermark): to the
// joined stream's watermark (plan.IntervalJoin.OutputWatermark), once
// every joined row made so far is applied. Joined rows are applied under the same rule as pushed
// events: when buffering, only while nothing is queued and the buffer has
// room; the rest wait in the join and Refill (Next) applies them.

// IntervalStats are an interval join's counters (exec.IntervalStats).
type IntervalStats = exec.IntervalStats

// intervalJoin is the join node of an interval join: the join state and
// the right input.
type intervalJoin struct {
	*joinEnv
	j        *exec.IntervalJoin
	right    joinInput
	closing  bool // Close was called: the aggregate finishes once every joined row is applied
	finished bool
	evalErrs int64 // rows of either input rejected by a join key evaluation error
	incr     bool  // Config.IncrementalJoinState
	// sp runs the join on threads (ijoin_split.go); j is then its
	// coordinator, which holds no row.
	sp *ijSplit
}

func newIntervalJoin(env *joinEnv, cfg Config, owner *Driver) (*intervalJoin, error) {
	q := env.q
	j, err := exec.NewIntervalJoin(q, cfg.ExternalWatermark)
	if err != nil {
		return nil, err
	}
	j.SetMaxHeld(cfg.JoinBuffer)
	if cfg.IncrementalJoinState {
		j.SetIncremental()
	}
	t := &intervalJoin{joinEnv: env, j: j, incr: cfg.IncrementalJoinState}
	if owner.agg.threads() > 1 && splits(cfg) {
		if t.sp, err = newSplit(t, cfg.Threads-1, cfg.JoinBuffer, owner); err != nil {
			return nil, err
		}
		t.j = t.sp.coord
	}
	t.right = joinInput{env: env, src: q.IJoin.Right, dec: cfg.TableDecoder, noun: "source", call: "PushInput"}
	if t.right.dec == nil {
		t.right.dec = exec.NewSourceDecoder(q.IJoin.Right, q.RightUsed())
	}
	if err := t.right.dec.Err(); err != nil {
		return nil, fmt.Errorf("source %s: %w", q.IJoin.Right.Name, err)
	}
	return t, nil
}

// admit refuses a row of an input that has ended: the left one's before
// anything else, the right one's once nothing waits.
func (t *intervalJoin) admit(input int) error {
	if input == 0 && t.j.Ended(0) {
		return t.endedErr(0)
	}
	if err := t.backlog(t.pump, t.waiting); err != nil {
		return err
	}
	if input == 1 && t.j.Ended(1) {
		return t.endedErr(1)
	}
	return nil
}

func (t *intervalJoin) endedErr(input int) error {
	return fmt.Errorf("%w: the input of source %s has ended", ErrClosed, t.source(input).Name)
}

// waiting reports whether joined rows wait for the aggregate.
func (t *intervalJoin) waiting() bool { return t.j.Pending() > 0 }

func (t *intervalJoin) push(side int, b *rowBatch) (int, error) {
	n := t.n
	if side == 1 {
		n = &t.right.n
	}
	for i, row := range b.rows {
		op0 := t.op0()
		if err := t.pushed(side, n, op0, b.raw(i), t.pushRow(side, row, b.raw(i), b.owned)); err != nil {
			return i + 1, err
		}
	}
	return len(b.rows), nil
}

// pushRow hands one decoded row of an input to the join.
func (t *intervalJoin) pushRow(side int, row []types.Value, raw []byte, owned bool) error {
	if t.sp != nil {
		return t.pushSplit(side, row, raw, owned)
	}
	var late bool
	var err error
	if owned {
		late, err = t.j.PushOwned(side, row)
	} else {
		late, err = t.j.Push(side, row)
	}
	if errors.Is(err, exec.ErrIntervalJoinFull) {
		return t.fail(err) // the row was not taken: the host cannot go on
	}
	if err != nil {
		t.evalErrs++
		e := t.sideErr(side, err)
		if !t.strict {
			if perr := t.pump(); perr != nil {
				return perr
			}
		}
		return e
	}
	t.taken(side, row, raw, late)
	if late {
		return nil
	}
	return t.pump()
}

// taken counts a row the join took, and reports it if it was late.
func (t *intervalJoin) taken(side int, row []types.Value, raw []byte, late bool) {
	if side == 0 {
		t.n.Applied++
	} else {
		t.right.n.Applied++
	}
	if !late {
		return
	}
	hook := t.late
	if side == 1 {
		t.right.n.Late++
		hook = t.lateTable
	}
	if hook != nil {
		src := t.source(side)
		hook(&exec.LateEvent{Row: row, EventTime: row[src.TimeCol].I, Watermark: t.j.Watermark(side), Event: raw, Source: src,
			Reason: fmt.Sprintf("behind the watermark of %s less the allowed lateness at the interval join", src.Name)})
	}
}

func (t *intervalJoin) sideErr(side int, err error) error {
	if side == 0 {
		return t.eventErr(err)
	}
	return t.right.eventErr(err)
}

// pump applies the joined rows the aggregate may take now, then moves
// its watermark to the joined stream's once none waits.
func (t *intervalJoin) pump() error {
	if t.sp != nil {
		return nil // the joined rows are merged in batches (ijoin_split.go)
	}
	for t.j.Pending() > 0 {
		if t.blocked() {
			return nil
		}
		if err := t.apply(t.j.Take()); err != nil {
			return err
		}
	}
	if wm := t.j.OutputWatermark(); wm > t.agg.watermark() && wm != math.MaxInt64 && wm != math.MinInt64 {
		if err := t.advanceAgg(wm); err != nil {
			return err
		}
	}
	if t.closing && !t.finished && !t.agg.queued() {
		t.finished = true
		return t.finishAgg()
	}
	return nil
}

// advance moves input side's watermark (a host that knows no earlier
// row will come, or a graph's marker).
func (t *intervalJoin) advance(side int, wm int64) error {
	if t.sp != nil {
		return t.advanceSplit(side, wm)
	}
	t.j.Advance(side, wm)
	return t.settle(t.pump())
}

// end ends input side: its watermark goes to the end.
func (t *intervalJoin) end(side int) error {
	if t.sp != nil {
		t.endSplit(side)
		return nil
	}
	t.j.End(side)
	return t.settle(t.pump())
}

func (t *intervalJoin) ended(side int) bool { return t.j.Ended(side) }

// closeOpen releases nothing: the joined rows are applied as they are
// made. The aggregate's windows close.
func (t *intervalJoin) closeOpen() error {
	if err := t.sync(); err != nil {
		return err
	}
	return t.settle(t.closeAgg())
}

// tick is the aggregate's, after the joined rows so far.
func (t *intervalJoin) tick() error {
	if err := t.sync(); err != nil {
		return err
	}
	return t.agg.tick()
}

// sync applies every joined row of the rows taken so far (on threads,
// they are in flight).
func (t *intervalJoin) sync() error {
	if t.sp == nil {
		return nil
	}
	return t.sp.sync(t)
}

func (t *intervalJoin) finish() error {
	if t.sp != nil {
		return t.finishSplit()
	}
	t.j.End(0)
	t.j.End(1)
	t.closing = true
	return t.settle(t.pump())
}

func (t *intervalJoin) queued() bool {
	return t.j.Pending() > 0 || t.closing && !t.finished || t.agg.queued()
}

// checkpoint writes the join's entry, or an entry per held row; nothing
// while joined rows or records of finalized windows wait (they are in no
// checkpoint). Then the aggregate's.
func (t *intervalJoin) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := t.sync(); err != nil {
		return err
	}
	if t.agg.queued() || t.j.Pending() > 0 {
		return checkpointWaits()
	}
	var err error
	switch {
	case t.sp != nil:
		err = put([]byte(exec.JoinStateKey), t.j.AppendSplitState(t.counters(nil), t.sp.parts))
	case t.incr:
		err = t.j.AppendEntries(full, []byte(exec.JoinStateKey), t.counters(nil), put)
	default:
		err = put([]byte(exec.JoinStateKey), t.j.AppendState(t.counters(nil)))
	}
	if err != nil {
		return err
	}
	return t.agg.checkpoint(full, position, put)
}

func (t *intervalJoin) restore(key, val []byte) ([]byte, error) {
	if string(key) == exec.JoinStateKey {
		return nil, t.restoreState(val)
	}
	if exec.IsIntervalEntry(key) {
		// Either format restores into either driver: a held row's entry
		// into one that writes a single entry, a single entry's rows into
		// an incremental one (its next checkpoint writes them as entries).
		return nil, t.j.RestoreEntry(key, val)
	}
	return t.agg.restore(key, val)
}

func (t *intervalJoin) finishRestore() error {
	t.j.FinishEntries()
	if t.sp != nil {
		t.j.SplitHeld(t.sp.parts, t.sp.pick)
	}
	return t.agg.finishRestore()
}

func (t *intervalJoin) counts(input int) Counts {
	if input == 1 {
		return t.right.n
	}
	return Counts{EvalErrors: t.evalErrs, Late: t.j.Stats().LateLeft}
}

func (t *intervalJoin) inputWatermark(side int) int64 { return t.j.Watermark(side) }

func (t *intervalJoin) source(side int) *plan.Source {
	if side == 0 {
		return t.q.IJoin.Left
	}
	return t.q.IJoin.Right
}

// input 1 is the right input; either input ends alone.
func (t *intervalJoin) input(i int) *joinInput {
	if i == 1 {
		return &t.right
	}
	return nil
}

func (t *intervalJoin) alone(input int) bool    { return input == 0 || input == 1 }
func (t *intervalJoin) setLateFloor(int, int64) {}
func (t *intervalJoin) intervalStats() IntervalStats {
	st := t.j.Stats()
	if t.sp != nil {
		st.Matches += t.sp.matches
	}
	return st
}

func (t *intervalJoin) counters(b []byte) []byte {
	c := t.right.n
	for _, x := range []int64{c.Records, c.Events, c.Malformed, c.Headers, c.Applied, c.Late, t.evalErrs} {
		b = binary.AppendVarint(b, x)
	}
	return b
}

func (t *intervalJoin) restoreState(val []byte) error {
	c := &t.right.n
	for _, p := range []*int64{&c.Records, &c.Events, &c.Malformed, &c.Headers, &c.Applied, &c.Late, &t.evalErrs} {
		x, n := binary.Varint(val)
		if n <= 0 {
			return fmt.Errorf("%w: bad interval join counters", exec.ErrBadState)
		}
		if x < 0 {
			return fmt.Errorf("%w: interval join entry: a negative count", exec.ErrBadState)
		}
		*p, val = x, val[n:]
	}
	return t.j.RestoreState(val)
}
