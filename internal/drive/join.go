package drive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A query with a temporal join (plan.Query.Join) has two inputs: the
// stream, pushed with Push and PushRow as any query's events, and the
// versioned table, pushed with PushTable and PushTableRow. The driver
// holds the join state (exec.TemporalJoin) in front of the operator:
// every event waits in it until the table's watermark has passed its time
// (or the table has ended), then the joined row goes to the operator.
//
// Released rows are applied under the same rule as pushed events: when
// buffering, only while nothing is queued and the buffer has room; the
// rest wait in the join, releasable, and Refill (Next) applies them. The
// operator's watermark follows the joined rows' times; a watermark the
// host advances reaches it only as far as the oldest waiting event, so no
// waiting event is late when it is released.

// ErrJoinBuffer: see exec.ErrJoinBuffer.
var ErrJoinBuffer = exec.ErrJoinBuffer

// JoinStats are a temporal join's counters (exec.JoinStats).
type JoinStats = exec.JoinStats

// JoinStateKey is the key of the join's checkpoint entry.
const JoinStateKey = exec.JoinStateKey

// IsIntervalEntry reports whether key is one held row's checkpoint entry of
// an interval join or a join of two views (exec.IsIntervalEntry).
func IsIntervalEntry(key []byte) bool { return exec.IsIntervalEntry(key) }

// joinState is a join driver's part.
type joinState struct {
	j        *exec.TemporalJoin
	tdec     *exec.Decoder
	tn       Counts // the table input's counters
	hostWM   int64  // the stream watermark the host advanced to
	finish   bool   // Close was called: the operator finishes once the join is empty
	finished bool
	evalErrs int64 // released events rejected by a join key evaluation error
	incr     bool  // Config.IncrementalJoinState
	onJoined func([]types.Value) error
}

func (d *Driver) initJoin(cfg Config) error {
	q := d.q
	j, err := exec.NewTemporalJoin(q, cfg.JoinBuffer)
	if err != nil {
		return err
	}
	if cfg.ExternalWatermark {
		// The host moves both watermarks: the stream's with
		// AdvanceWatermark, the table's with AdvanceTableWatermark
		// (Kafka: the minimum over each input's partitions).
		j.SetExternalWatermarks()
	}
	if cfg.IncrementalJoinState {
		j.SetIncremental()
	}
	js := &joinState{j: j, tdec: cfg.TableDecoder, hostWM: math.MinInt64, incr: cfg.IncrementalJoinState, onJoined: cfg.OnJoined}
	if js.tdec == nil {
		js.tdec = exec.NewSourceDecoder(q.Join.Table, q.TableUsed())
	}
	if err := js.tdec.Err(); err != nil {
		return fmt.Errorf("table %s: %w", q.Join.Table.Name, err)
	}
	d.join = js
	return nil
}

// joinEvent hands one decoded stream row to the join.
func (d *Driver) joinEvent(row []types.Value) error {
	d.n.Applied++
	if !d.buffered || !d.agg.queued() && d.room() > 0 {
		// An event that need not wait joins in place: no copy.
		out, ok, err := d.join.j.JoinNow(row)
		if ok {
			if err := d.applyJoined(out, err); err != nil {
				return err
			}
			return d.pump()
		}
	}
	if d.join.j.Late(row[d.q.Join.Stream.TimeCol].I) && d.agg.countCopy(row) {
		return nil // a copy of an admitted event: a duplicate, not late
	}
	late, err := d.join.j.PushEvent(row)
	if err != nil {
		d.n.Applied--
		return err
	}
	if late {
		if d.late != nil {
			st := d.join.j.Stats()
			d.late(&exec.LateEvent{Row: row, EventTime: row[d.q.Join.Stream.TimeCol].I, Watermark: st.StreamWM, Event: d.raw, Source: d.q.Join.Stream,
				Reason: "behind the stream watermark less the allowed lateness at the temporal join"})
		}
		return nil
	}
	return d.pump()
}

// joinFull refuses a stream push while the join's buffer is full (before
// anything is decoded or counted).
func (d *Driver) joinFull() error {
	if d.join.j.Waiting() < d.joinMax() {
		return nil
	}
	st := d.join.j.Stats()
	return fmt.Errorf("%w: %d events wait for the watermark of table %s (at %s) to pass their time; push table rows first (or end the table input)",
		ErrJoinBuffer, st.Buffered, d.q.Join.Table.Name, wmText(st.TableWM))
}

func (d *Driver) joinMax() int {
	if d.joinBuffer > 0 {
		return d.joinBuffer
	}
	return plan.DefaultJoinBuffer
}

// pump applies the releasable joined rows the operator may take now, then
// lets the host's watermark through as far as the oldest waiting event.
func (d *Driver) pump() error {
	js := d.join
	for js.j.Ready() {
		if d.buffered && (d.agg.queued() || d.room() <= 0) {
			return nil
		}
		row, ok, err := js.j.Release()
		if !ok {
			break
		}
		if err := d.applyJoined(row, err); err != nil {
			return err
		}
	}
	if wm := min(js.hostWM, js.j.Oldest()); wm > d.agg.watermark() && wm != math.MaxInt64 {
		d.setRoom()
		if err := d.agg.advance(wm); err != nil {
			return err
		}
	}
	if js.finish && !js.finished && !js.j.Ready() && js.j.Waiting() == 0 && !(d.buffered && d.agg.queued()) {
		js.finished = true
		d.setRoom()
		return d.agg.finish()
	}
	return nil
}

// applyJoined applies one joined row to the operator (jerr: the join's
// key evaluation failed; row nil: an inner join's event without a
// version). Only a fatal error is returned.
func (d *Driver) applyJoined(row []types.Value, jerr error) error {
	if jerr != nil {
		d.join.evalErrs++
		if d.strict {
			d.fatal = jerr
			return jerr
		}
		return nil
	}
	if row == nil {
		return nil
	}
	if d.join.onJoined != nil {
		if err := d.join.onJoined(row); err != nil {
			d.fatal = err
			return err
		}
		return nil
	}
	d.raw = nil
	d.setRoom()
	if err := d.agg.process(row, nil, false); err != nil {
		var ee *exec.EvalError
		if errors.As(err, &ee) && !d.strict {
			return nil
		}
		d.fatal = err
		return err
	}
	return nil
}

// PushTable decodes one record of the versioned table and applies it: the
// version of its key valid from its time. A malformed row is an
// *EventError (counted in TableCounts); a late one is counted and handed
// to the late hook. Waiting events it releases are joined and applied.
func (d *Driver) PushTable(raw []byte) error {
	if d.ij != nil {
		return d.pushRight(raw)
	}
	if err := d.joinAdmit(); err != nil {
		return err
	}
	js := d.join
	js.tn.Records++
	row, err := js.tdec.Decode(raw)
	if err != nil {
		var he *exec.HeaderError
		if errors.As(err, &he) {
			d.fatal = fmt.Errorf("table %s: %w", d.q.Join.Table.Name, err)
			return d.fatal
		}
		js.tn.Events++
		js.tn.Malformed++
		return d.tableErr(err)
	}
	if row == nil {
		js.tn.Headers++
		return nil
	}
	js.tn.Events++
	return d.tableRow(row, raw)
}

// PushTableBehind is PushTable for a host whose table watermark is a
// minimum over the table's partitions (Kafka): the row is late when it
// is behind the join's table watermark or behind floor, the watermark
// of the rows before it in its own table partition (math.MinInt64: not
// known), so what is late does not depend on the other partitions or
// on when the host moved the watermark.
func (d *Driver) PushTableBehind(raw []byte, floor int64) error {
	if d.join == nil {
		return d.PushTable(raw)
	}
	d.join.j.SetLateFloor(floor)
	defer d.join.j.SetLateFloor(math.MinInt64)
	return d.PushTable(raw)
}

func (d *Driver) tableErr(err error) error {
	e := &EventError{Seq: d.join.tn.Events, Err: fmt.Errorf("table %s: %w", d.q.Join.Table.Name, err)}
	if d.strict {
		d.fatal = e
	}
	return e
}

func (d *Driver) tableRow(row []types.Value, raw []byte) error {
	js := d.join
	late, err := js.j.PushTable(row)
	if err != nil {
		js.tn.Malformed++
		return d.tableErr(err)
	}
	js.tn.Applied++
	if late {
		js.tn.Late++
		if d.lateTable != nil {
			tc := d.q.Join.Table.TimeCol
			d.lateTable(&exec.LateEvent{Row: row, EventTime: row[tc].I, Watermark: js.j.TableWatermark(), Event: raw, Source: d.q.Join.Table,
				Reason: "table row behind the table watermark: not applied"})
		}
		return nil
	}
	return d.pump()
}

// PushTableRow applies one typed table row, in the table's column order
// (a table with computed or TIMESTAMP(p) columns takes its rows through
// PushTable). A row of the wrong shape or kinds, or without a time, is
// malformed.
func (d *Driver) PushTableRow(row []types.Value) error {
	if d.ij != nil {
		return d.pushRightRow(row)
	}
	if err := d.joinAdmit(); err != nil {
		return err
	}
	js := d.join
	js.tn.Records++
	js.tn.Events++
	t := d.q.Join.Table
	bad := func(col, msg string) error {
		js.tn.Malformed++
		return d.tableErr(&exec.DecodeError{Column: col, Msg: msg})
	}
	if t.HasDerived() {
		return bad("", "a table with computed or TIMESTAMP(p) columns takes its rows as records (PushTable)")
	}
	if len(row) != len(t.Columns) {
		return bad("", fmt.Sprintf("row has %d cells, table %q has %d columns", len(row), t.Name, len(t.Columns)))
	}
	copied := false
	for i, c := range t.Columns {
		if !row[i].Null && row[i].Kind != c.Type.Kind {
			return bad(c.Name, fmt.Sprintf("cell is %s, column is %s", row[i].Kind, c.Type))
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
	if row[t.TimeCol].Null {
		return bad(t.Columns[t.TimeCol].Name, "event time is null")
	}
	return d.tableRow(row, nil)
}

// joinAdmit refuses table input on a driver that is not a join's, failed
// or closed; when buffering it first applies what waits.
func (d *Driver) joinAdmit() error {
	if d.join == nil {
		return fmt.Errorf("drive: query %s has no versioned table input", d.q.Name)
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed {
		return ErrClosed
	}
	if d.join.j.Ended() {
		return fmt.Errorf("%w: the input of table %s has ended", ErrClosed, d.q.Join.Table.Name)
	}
	if d.buffered {
		if err := d.drain(); err != nil {
			return err
		}
		if err := d.pump(); err != nil {
			return err
		}
		if d.agg.queued() || d.room() <= 0 || d.join.j.Ready() {
			return ErrBackpressure
		}
	}
	return nil
}

// AdvanceTableWatermark moves the table's watermark to wm (µs) if that is
// later: a table input that is idle, or whose host knows no earlier row
// will come. Waiting events it passes are joined.
func (d *Driver) AdvanceTableWatermark(wm int64) error {
	if d.ij != nil {
		return d.delivering(d.advanceSide(1, wm))
	}
	if d.join == nil {
		return fmt.Errorf("drive: query %s has no versioned table input", d.q.Name)
	}
	if d.closed {
		return ErrClosed
	}
	d.join.j.AdvanceTable(wm)
	return d.delivering(d.pump())
}

// closeJoin releases every waiting event, for CloseOpenWindows: the
// table's watermark moves just past the newest one (not to +infinity,
// nor does the table end), so each joins the versions there are, as at
// the end of a file, and a table row at or before it that comes later is
// late.
func (d *Driver) closeJoin() error {
	if n := d.join.j.Newest(); n != math.MinInt64 && n < math.MaxInt64 {
		d.join.j.AdvanceTable(n + 1)
	}
	return d.pump()
}

// EndTable ends the table input: no row will come, so every waiting event
// joins the versions there are. Later table rows are refused (late).
func (d *Driver) EndTable() error {
	if d.ij != nil {
		return d.delivering(d.endSide(1))
	}
	if d.join == nil {
		return fmt.Errorf("drive: query %s has no versioned table input", d.q.Name)
	}
	d.join.j.EndTable()
	d.join.j.AdvanceTable(math.MaxInt64)
	return d.delivering(d.pump())
}

// TableCounts returns the table input's counters (Late: rows behind the
// table watermark; Applied: rows taken as versions or late).
func (d *Driver) TableCounts() Counts {
	if d.ij != nil {
		return d.ij.rn
	}
	if d.join == nil {
		return Counts{}
	}
	return d.join.tn
}

// JoinStats returns the join's counters and state sizes (zero without a join).
func (d *Driver) JoinStats() JoinStats {
	if d.join == nil {
		return JoinStats{}
	}
	return d.join.j.Stats()
}

// HasJoin reports whether the query has a temporal join (a table input).
func (d *Driver) HasJoin() bool { return d.join != nil }

// joinCounts prefixes the join entry with the table input's counters and
// the watermark the host advanced to.
func (d *Driver) joinCounts(b []byte) []byte {
	t := d.join.tn
	for _, x := range []int64{t.Records, t.Events, t.Malformed, t.Headers, t.Applied, t.Late, d.join.evalErrs, d.join.hostWM} {
		b = binary.AppendVarint(b, x)
	}
	return b
}

func (d *Driver) restoreJoin(val []byte) error {
	t := &d.join.tn
	for _, p := range []*int64{&t.Records, &t.Events, &t.Malformed, &t.Headers, &t.Applied, &t.Late, &d.join.evalErrs, &d.join.hostWM} {
		x, n := binary.Varint(val)
		if n <= 0 {
			return fmt.Errorf("%w: bad temporal join counters", exec.ErrBadState)
		}
		if x < 0 && p != &d.join.hostWM {
			return fmt.Errorf("%w: temporal join entry: a negative count", exec.ErrBadState)
		}
		*p, val = x, val[n:]
	}
	return d.join.j.RestoreState(val)
}

func wmText(wm int64) string {
	if wm == math.MinInt64 {
		return "no row yet"
	}
	return plan.ValueText(types.Value{Kind: types.KindTimestamp, I: wm})
}

// StreamKeyed reports whether a temporal join's GROUP BY reads only the
// stream's columns, so an event's group is known before the join: a host
// that splits the stream by group key (Kafka's repartition stage, NewRouter)
// can route it. A term over a table column is known only once the event
// has joined its version.
func StreamKeyed(q *plan.Query) bool {
	for _, k := range q.Keys {
		if k.Kind == plan.KeyExpr && maxColumn(reflect.ValueOf(k.Expr)) >= q.Join.Offset {
			return false
		}
	}
	return true
}

var (
	exprType   = reflect.TypeFor[plan.Expr]()
	colRefType = reflect.TypeFor[*plan.ColRef]()
)

// maxColumn is the largest column index an expression tree reads (-1:
// none). It walks the tree's plan.Expr values, in fields, slices and
// arrays, whatever their concrete types.
func maxColumn(v reflect.Value) int {
	m := -1
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			m = maxColumn(v.Elem())
		}
	case reflect.Pointer:
		if v.IsNil() {
			return -1
		}
		if v.Type() == colRefType {
			return int(v.Elem().FieldByName("Index").Int()) // not Interface: v may come from an unexported field
		}
		if v.Type().Implements(exprType) && v.Elem().Kind() == reflect.Struct {
			m = maxColumn(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if t := f.Type(); t.Kind() == reflect.Interface && t.Implements(exprType) || t.Kind() == reflect.Pointer && t.Implements(exprType) ||
				t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Struct && t.Implements(exprType) {
				m = max(m, maxColumn(f))
			}
		}
	case reflect.Slice, reflect.Array:
		if !v.Type().Elem().Implements(exprType) && v.Type().Elem().Kind() != reflect.Struct {
			return -1
		}
		for i := range v.Len() {
			m = max(m, maxColumn(v.Index(i)))
		}
	}
	return m
}
