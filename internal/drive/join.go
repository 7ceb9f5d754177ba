package drive

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A query with a temporal join (plan.Query.Join) has two inputs: the
// stream, pushed with Push and PushRow as any query's events, and the
// versioned table, input 1, pushed with PushInput and PushInputRow. The driver's
// join node (temporalJoin) holds the join state (exec.TemporalJoin) in
// front of the aggregate: every event waits in it until the table's
// watermark has passed its time (or the table has ended), then the joined
// row goes to the aggregate.
//
// Released rows are applied under the same rule as pushed events: when
// buffering, only while nothing is queued and the buffer has room; the
// rest wait in the join, releasable, and Refill (Next) applies them. The
// aggregate's watermark follows the joined rows' times; a watermark the
// host advances reaches it only as far as the oldest waiting event, so no
// waiting event is late when it is released.

// JoinStats are a temporal join's counters (exec.JoinStats).
type JoinStats = exec.JoinStats

// JoinStateKey is the key of the join's checkpoint entry.
const JoinStateKey = exec.JoinStateKey

// IsIntervalEntry reports whether key is one held row's checkpoint entry of
// an interval join or a join of two views (exec.IsIntervalEntry).
func IsIntervalEntry(key []byte) bool { return exec.IsIntervalEntry(key) }

// temporalJoin is the join node of a temporal join: the join state, the
// table input, and the stream watermark the host advanced to.
type temporalJoin struct {
	*joinEnv
	j        *exec.TemporalJoin
	table    joinInput
	max      int   // Config.JoinBuffer
	hostWM   int64 // the stream watermark the host advanced to
	closing  bool  // Close was called: the aggregate finishes once the join is empty
	finished bool
	evalErrs int64 // released events rejected by a join key evaluation error
	incr     bool  // Config.IncrementalJoinState
	// settled: the last pump ran to its end, so nothing it could hand
	// on waits (no row was left for want of room, the watermark went
	// through). Every call that changes what the join holds or the
	// watermarks ends with a pump; a new or restored join is unsettled
	// until its first.
	settled bool
	joinDedup
}

func newTemporalJoin(env *joinEnv, cfg Config) (*temporalJoin, error) {
	q := env.q
	j, err := exec.NewTemporalJoin(q, cfg.JoinBuffer)
	if err != nil {
		return nil, err
	}
	if cfg.ExternalWatermark {
		// The host moves both watermarks: the stream's with
		// AdvanceWatermark, the table's with AdvanceInput(1)
		// (Kafka: the minimum over each input's partitions).
		j.SetExternalWatermarks()
	}
	if cfg.IncrementalJoinState {
		j.SetIncremental()
	}
	t := &temporalJoin{joinEnv: env, j: j, max: cfg.JoinBuffer, hostWM: math.MinInt64, incr: cfg.IncrementalJoinState}
	t.initDedup()
	t.table = joinInput{env: env, src: q.Join.Table, dec: cfg.TableDecoder, noun: "table", call: "PushTable"}
	if t.table.dec == nil {
		t.table.dec = exec.NewSourceDecoder(q.Join.Table, q.TableUsed())
	}
	if err := t.table.dec.Err(); err != nil {
		return nil, fmt.Errorf("table %s: %w", q.Join.Table.Name, err)
	}
	return t, nil
}

func (t *temporalJoin) admit(input int) error {
	if input == 1 && t.j.Ended() {
		return t.tableEnded()
	}
	if t.settled && !t.blocked() {
		// Nothing waits: the pump would find nothing to do.
		t.skip = nil
	} else if err := t.backlog(t.pump, t.j.Ready); err != nil {
		return err
	}
	if input == 0 && t.j.Waiting() >= t.bound() {
		return t.full()
	}
	return nil
}

func (t *temporalJoin) tableEnded() error {
	return fmt.Errorf("%w: the input of table %s has ended", ErrClosed, t.q.Join.Table.Name)
}

// full is the error of a stream push refused while the join's buffer is
// full (before anything is decoded or counted).
func (t *temporalJoin) full() error {
	st := t.j.Stats()
	return fmt.Errorf("%w: %d events wait for the watermark of table %s (at %s) to pass their time; push table rows first (or end the table input)",
		ErrJoinBuffer, st.Buffered, t.q.Join.Table.Name, wmText(st.TableWM))
}

func (t *temporalJoin) bound() int {
	if t.max > 0 {
		return t.max
	}
	return plan.DefaultJoinBuffer
}

func (t *temporalJoin) push(input int, b *rowBatch) (int, error) {
	for i, row := range b.rows {
		var err error
		op0, n := t.op0(), t.n
		if input == 1 {
			err, n = t.pushTable(row, b.raw(i)), &t.table.n
		} else {
			err = t.pushEvent(row, b.raw(i))
		}
		if t.sh != nil || t.skip != nil {
			// Only shards or a skipped record give pushed more to do
			// than return err.
			err = t.pushed(input, n, op0, b.raw(i), err)
		}
		if err != nil {
			return i + 1, err
		}
	}
	return len(b.rows), nil
}

// pushEvent hands one decoded stream row to the join, unless the
// stream's input dedup drops it.
func (t *temporalJoin) pushEvent(row []types.Value, raw []byte) error {
	t.n.Applied++
	if t.dd != nil && t.dedup(row, raw) {
		return nil
	}
	if !t.blocked() {
		// An event that need not wait joins in place: no copy.
		out, ok, err := t.j.JoinNow(row)
		if ok {
			if err == nil && out != nil {
				err = t.apply(out)
			} else {
				err = t.applyJoined(out, err)
			}
			if err != nil {
				return err
			}
			return t.repump()
		}
	}
	return t.wait(row, raw)
}

// wait puts a stream row in the join's buffer until the table's
// watermark passes its time, or reports it late.
func (t *temporalJoin) wait(row []types.Value, raw []byte) error {
	stream := t.q.Join.Stream
	late, err := t.j.PushEvent(row)
	if err != nil {
		t.n.Applied--
		return err
	}
	if late {
		if t.late != nil {
			st := t.j.Stats()
			t.late(&exec.LateEvent{Row: row, EventTime: row[stream.TimeCol].I, Watermark: st.StreamWM, Event: raw, Source: stream,
				Reason: "behind the stream watermark less the allowed lateness at the temporal join"})
		}
		return nil
	}
	return t.pump()
}

// pushTable applies one decoded table row: the version of its key valid
// from its time.
func (t *temporalJoin) pushTable(row []types.Value, raw []byte) error {
	tn := &t.table.n
	late, err := t.j.PushTable(row)
	if err != nil {
		tn.Malformed++
		return t.table.eventErr(err)
	}
	tn.Applied++
	if late {
		tn.Late++
		if t.lateTable != nil {
			tab := t.q.Join.Table
			t.lateTable(&exec.LateEvent{Row: row, EventTime: row[tab.TimeCol].I, Watermark: t.j.TableWatermark(), Event: raw, Source: tab,
				Reason: "table row behind the table watermark: not applied"})
		}
		return nil
	}
	return t.repump()
}

// repump is pump after a row the join took without keeping an event.
// Events enter the buffer only with a pump after (wait) and leave it only
// in pump: with none waiting now, none waited when the last pump ended,
// so if that one ran to its end the host's watermark went through then;
// nothing can be released, and applied rows never lower the aggregate's
// watermark: it would find nothing to do.
func (t *temporalJoin) repump() error {
	if t.settled && t.j.Waiting() == 0 {
		return nil
	}
	return t.pump()
}

// pump applies the releasable joined rows the aggregate may take now, then
// lets the host's watermark through as far as the oldest waiting event.
func (t *temporalJoin) pump() error {
	t.settled = false
	for t.j.Ready() {
		if t.blocked() {
			return nil
		}
		row, ok, err := t.j.Release()
		if !ok {
			break
		}
		if err := t.applyJoined(row, err); err != nil {
			return err
		}
	}
	// No watermark is behind math.MinInt64: the aggregate's is not read
	// while the host has advanced none (ubik run's).
	if wm := min(t.hostWM, t.j.Oldest()); wm != math.MinInt64 && wm != math.MaxInt64 && wm > t.aggWatermark() {
		if err := t.advanceAgg(wm); err != nil {
			return err
		}
	}
	if t.closing && !t.finished && !t.j.Ready() && t.j.Waiting() == 0 && !t.agg.queued() {
		t.finished = true
		return t.finishAgg()
	}
	t.settled = true
	return nil
}

// applyJoined applies one joined row to the aggregate (jerr: the join's
// key evaluation failed; row nil: an inner join's event without a
// version). Only a fatal error is returned.
func (t *temporalJoin) applyJoined(row []types.Value, jerr error) error {
	if jerr != nil {
		return t.keyErr(jerr)
	}
	if row == nil {
		return nil
	}
	return t.apply(row)
}

// keyErr counts an event whose join key failed to evaluate: fatal when
// strict.
func (t *temporalJoin) keyErr(err error) error {
	t.evalErrs++
	if t.strict {
		return t.fail(err)
	}
	return nil
}

// advance moves the stream's watermark (the join's state follows it; the
// aggregate's waits for the oldest waiting event) or the table's.
func (t *temporalJoin) advance(input int, wm int64) error {
	if input == 0 {
		t.j.AdvanceStream(wm)
		t.hostWM = max(t.hostWM, wm)
		if t.dd != nil {
			t.dd.advance(t.j.StreamWatermark())
		}
	} else {
		t.j.AdvanceTable(wm)
	}
	return t.settle(t.pump())
}

// end ends the table input: every waiting event joins the versions there
// are, and later table rows are late. The stream ends with the driver.
func (t *temporalJoin) end(input int) error {
	if input == 0 {
		return errNoEndFirst(t.q)
	}
	t.j.EndTable()
	t.j.AdvanceTable(math.MaxInt64)
	return t.settle(t.pump())
}

func (t *temporalJoin) ended(input int) bool { return input == 1 && t.j.Ended() }

// closeOpen releases every waiting event: the table's watermark moves just
// past the newest one (not to +infinity, nor does the table end), so
// each joins the versions there are, as at the end of a file, and a table
// row at or before it that comes later is late.
func (t *temporalJoin) closeOpen() error {
	if n := t.j.Newest(); n != math.MinInt64 && n < math.MaxInt64 {
		t.j.AdvanceTable(n + 1)
	}
	if err := t.pump(); err != nil {
		return t.settle(err)
	}
	return t.settle(t.closeAgg())
}

// finish: both inputs end, every waiting event joins, then the windows
// finalize (when buffering, as Next makes room).
func (t *temporalJoin) finish() error {
	t.j.EndTable()
	t.j.AdvanceTable(math.MaxInt64)
	t.closing = true
	return t.settle(t.pump())
}

func (t *temporalJoin) queued() bool {
	return t.j.Ready() || t.closing && !t.finished || t.agg.queued()
}

// checkpoint writes the join's entry whole (events and versions), or its
// incremental entries; nothing while records of finalized windows wait.
// Then the aggregate's.
func (t *temporalJoin) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if t.agg.queued() {
		return checkpointWaits()
	}
	var err error
	if t.incr {
		err = t.j.AppendEntries(full, t.counters(nil), put)
	} else {
		err = put([]byte(exec.JoinStateKey), t.j.AppendState(t.counters(nil)))
	}
	if err != nil {
		return err
	}
	if put, err = t.dedupPut(full, put); err != nil {
		return err
	}
	return t.agg.checkpoint(full, position, put)
}

func (t *temporalJoin) restore(key, val []byte) ([]byte, error) {
	if string(key) == exec.JoinStateKey {
		return nil, t.restoreState(val)
	}
	if t.incr && exec.IsJoinEntry(key) {
		return nil, t.j.RestoreEntry(key, val)
	}
	if ok, err := t.restoreDedup(key, val); ok || err != nil {
		return nil, err
	}
	return t.agg.restore(key, val)
}

func (t *temporalJoin) finishRestore() error {
	t.settled = false
	if t.incr {
		t.j.FinishEntries()
	}
	if err := t.finishDedup(); err != nil {
		return err
	}
	return t.agg.finishRestore()
}

func (t *temporalJoin) counts(input int) Counts {
	if input == 1 {
		return t.table.n
	}
	return Counts{EvalErrors: t.evalErrs, Late: t.j.Stats().LateEvents}
}

func (t *temporalJoin) inputWatermark(input int) int64 {
	st := t.j.Stats()
	if input == 1 {
		return st.TableWM
	}
	return st.StreamWM
}

// input 1 is the table; alone, only the table ends (the stream ends with
// the driver).
func (t *temporalJoin) input(i int) *joinInput {
	if i == 1 {
		return &t.table
	}
	return nil
}

func (t *temporalJoin) alone(input int) bool { return input == 1 }

// setLateFloor: a table row is late behind floor too (PushBehind).
func (t *temporalJoin) setLateFloor(input int, floor int64) {
	if input == 1 {
		t.j.SetLateFloor(floor)
	}
}

func (t *temporalJoin) source(input int) *plan.Source {
	if input == 1 {
		return t.q.Join.Table
	}
	return t.q.Join.Stream
}

func (t *temporalJoin) joinStats() JoinStats { return t.j.Stats() }

// counters prefixes the join entry with the table input's counters and
// the watermark the host advanced to.
func (t *temporalJoin) counters(b []byte) []byte {
	c := t.table.n
	for _, x := range []int64{c.Records, c.Events, c.Malformed, c.Headers, c.Applied, c.Late, t.evalErrs, t.hostWM} {
		b = binary.AppendVarint(b, x)
	}
	return b
}

func (t *temporalJoin) restoreState(val []byte) error {
	c := &t.table.n
	for _, p := range []*int64{&c.Records, &c.Events, &c.Malformed, &c.Headers, &c.Applied, &c.Late, &t.evalErrs, &t.hostWM} {
		x, n := binary.Varint(val)
		if n <= 0 {
			return fmt.Errorf("%w: bad temporal join counters", exec.ErrBadState)
		}
		if x < 0 && p != &t.hostWM {
			return fmt.Errorf("%w: temporal join entry: a negative count", exec.ErrBadState)
		}
		*p, val = x, val[n:]
	}
	return t.j.RestoreState(val)
}

func wmText(wm int64) string {
	if wm == math.MinInt64 {
		return "no row yet"
	}
	return plan.ValueText(types.Value{Kind: types.KindTimestamp, I: wm})
}
