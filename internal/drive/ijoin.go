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

// A query with an interval join (plan.Query.IJoin) has two stream
// inputs: the left, pushed with Push and PushRow as any query's events,
// and the right, pushed with PushTable and PushTableRow (the driver's
// second input; the root package names both by source). The driver holds
// the join state (exec.IntervalJoin) in front of the operator: a row is
// matched against the other input's held rows when it arrives, and the
// joined rows go to the operator, whose watermark only the join moves
// (exec.Config.ExternalWatermark): to the joined stream's watermark
// (plan.IntervalJoin.OutputWatermark), once every joined row made so far
// is applied. Joined rows are applied under the same rule as pushed
// events: when buffering, only while nothing is queued and the buffer has
// room; the rest wait in the join and Refill (Next) applies them.

// IntervalStats are an interval join's counters (exec.IntervalStats).
type IntervalStats = exec.IntervalStats

// ijState is an interval join driver's part.
type ijState struct {
	j        *exec.IntervalJoin
	rdec     *exec.Decoder
	rn       Counts // the right input's counters
	finish   bool
	finished bool
	evalErrs int64
	incr     bool // Config.IncrementalJoinState
	onJoined func([]types.Value) error
}

// ErrIntervalJoinFull: see exec.ErrIntervalJoinFull.
var ErrIntervalJoinFull = exec.ErrIntervalJoinFull

// NewIntervalRouter returns a driver that decodes the records of input
// side (0 left, 1 right) of q's interval join, with cfg.Decoder (the
// input's), and computes their route bytes (Route: the join key under
// the group key rules, exec.IntervalRoute), running no join and no
// operator: a host that splits both inputs by the join key so that rows
// that may match meet in one partition.
func NewIntervalRouter(q *plan.Query, side int, cfg Config) (*Driver, error) {
	if q.IJoin == nil || side < 0 || side > 1 {
		return nil, fmt.Errorf("drive: query %s has no interval join input %d", q.Name, side)
	}
	if cfg.Decoder == nil {
		return nil, fmt.Errorf("drive: the router of an interval join input needs its decoder")
	}
	r, err := exec.NewIntervalRoute(q, side)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(q, cfg)
	if err != nil {
		return nil, err
	}
	d.ikeys, d.side = r, side
	return d, nil
}

func (d *Driver) initIJoin(cfg Config) error {
	q := d.q
	j, err := exec.NewIntervalJoin(q, cfg.ExternalWatermark)
	if err != nil {
		return err
	}
	j.SetMaxHeld(cfg.JoinBuffer)
	if cfg.IncrementalJoinState {
		j.SetIncremental()
	}
	st := &ijState{j: j, rdec: cfg.TableDecoder, incr: cfg.IncrementalJoinState, onJoined: cfg.OnJoined}
	if st.rdec == nil {
		st.rdec = exec.NewSourceDecoder(q.IJoin.Right, q.RightUsed())
	}
	if err := st.rdec.Err(); err != nil {
		return fmt.Errorf("source %s: %w", q.IJoin.Right.Name, err)
	}
	d.ij = st
	return nil
}

// ijRow hands one decoded row of input side to the join.
func (d *Driver) ijRow(side int, row []types.Value, raw []byte) error {
	st := d.ij
	late, err := st.j.Push(side, row)
	if errors.Is(err, exec.ErrIntervalJoinFull) {
		d.fatal = err // the row was not taken: the host cannot go on
		return err
	}
	if err != nil {
		st.evalErrs++
		e := d.sideErr(side, err)
		if !d.strict {
			if perr := d.ijPump(); perr != nil {
				return perr
			}
		}
		return e
	}
	if side == 0 {
		d.n.Applied++
	} else {
		st.rn.Applied++
	}
	if late {
		hook := d.late
		if side == 1 {
			st.rn.Late++
			hook = d.lateTable
		}
		if hook != nil {
			tc := d.sideSrc(side).TimeCol
			hook(&exec.LateEvent{Row: row, EventTime: row[tc].I, Watermark: st.j.Watermark(side), Event: raw, Source: d.sideSrc(side),
				Reason: fmt.Sprintf("behind the watermark of %s less the allowed lateness at the interval join", d.sideSrc(side).Name)})
		}
		return nil
	}
	return d.ijPump()
}

func (d *Driver) sideSrc(side int) *plan.Source {
	if side == 0 {
		return d.q.IJoin.Left
	}
	return d.q.IJoin.Right
}

func (d *Driver) sideErr(side int, err error) error {
	if side == 0 {
		return d.eventErr(err)
	}
	e := &EventError{Seq: d.ij.rn.Events, Err: fmt.Errorf("source %s: %w", d.q.IJoin.Right.Name, err)}
	if d.strict {
		d.fatal = e
	}
	return e
}

// ijPump applies the joined rows the operator may take now, then moves
// its watermark to the joined stream's once none waits.
func (d *Driver) ijPump() error {
	st := d.ij
	for st.j.Pending() > 0 {
		if d.buffered && (d.agg.queued() || d.room() <= 0) {
			return nil
		}
		row := st.j.Take()
		if st.onJoined != nil {
			if err := st.onJoined(row); err != nil {
				d.fatal = err
				return err
			}
			continue
		}
		d.raw = nil
		d.setRoom()
		if err := d.agg.process(row, nil, false); err != nil {
			var ee *exec.EvalError
			if errors.As(err, &ee) {
				if d.strict {
					d.fatal = err
					return err
				}
				continue
			}
			d.fatal = err
			return err
		}
	}
	if wm := st.j.OutputWatermark(); wm > d.agg.watermark() && wm != math.MaxInt64 && wm != math.MinInt64 {
		d.setRoom()
		if err := d.agg.advance(wm); err != nil {
			return err
		}
	}
	if st.finish && !st.finished && !(d.buffered && d.agg.queued()) {
		st.finished = true
		d.setRoom()
		return d.agg.finish()
	}
	return nil
}

// ijAdmit refuses right input on a failed or closed driver; when
// buffering it first applies what waits.
func (d *Driver) ijAdmit() error {
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed {
		return ErrClosed
	}
	if d.buffered {
		if err := d.drain(); err != nil {
			return err
		}
		if err := d.ijPump(); err != nil {
			return err
		}
		if d.agg.queued() || d.room() <= 0 || d.ij.j.Pending() > 0 {
			return ErrBackpressure
		}
	}
	return nil
}

// rightEnded refuses a row of the right input once it has ended.
func (d *Driver) rightEnded() error {
	if d.ij.j.Ended(1) {
		return fmt.Errorf("%w: the input of source %s has ended", ErrClosed, d.q.IJoin.Right.Name)
	}
	return nil
}

// pushRight decodes one record of the right input and joins it.
func (d *Driver) pushRight(raw []byte) error {
	if err := d.ijAdmit(); err != nil {
		return err
	}
	if err := d.rightEnded(); err != nil {
		return err
	}
	st := d.ij
	st.rn.Records++
	row, err := st.rdec.Decode(raw)
	if err != nil {
		var he *exec.HeaderError
		if errors.As(err, &he) {
			d.fatal = fmt.Errorf("source %s: %w", d.q.IJoin.Right.Name, err)
			return d.fatal
		}
		st.rn.Events++
		st.rn.Malformed++
		return d.sideErr(1, err)
	}
	if row == nil {
		st.rn.Headers++
		return nil
	}
	st.rn.Events++
	return d.ijRow(1, row, raw)
}

// pushRightRow joins one typed row of the right input, in its column
// order (a source with computed or TIMESTAMP(p) columns takes records).
func (d *Driver) pushRightRow(row []types.Value) error {
	if err := d.ijAdmit(); err != nil {
		return err
	}
	if err := d.rightEnded(); err != nil {
		return err
	}
	st := d.ij
	st.rn.Records++
	st.rn.Events++
	src := d.q.IJoin.Right
	bad := func(col, msg string) error {
		st.rn.Malformed++
		return d.sideErr(1, &exec.DecodeError{Column: col, Msg: msg})
	}
	if src.HasDerived() {
		return bad("", "a source with computed or TIMESTAMP(p) columns takes its rows as records (PushInput)")
	}
	if len(row) != len(src.Columns) {
		return bad("", fmt.Sprintf("row has %d cells, source %q has %d columns", len(row), src.Name, len(src.Columns)))
	}
	copied := false
	for i, c := range src.Columns {
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
	if row[src.TimeCol].Null {
		return bad(src.Columns[src.TimeCol].Name, "event time is null")
	}
	return d.ijRow(1, row, nil)
}

// advanceSide moves input side's watermark (a host that knows no earlier
// row will come, or a graph's marker).
func (d *Driver) advanceSide(side int, wm int64) error {
	if d.closed {
		return ErrClosed
	}
	d.ij.j.Advance(side, wm)
	return d.ijPump()
}

// EndFirst ends the left input of an interval join alone, as EndTable
// ends the right: no row of it will come, its watermark goes to the end,
// so the join holds no right row for it any more (a host whose left file
// ended while the right goes on calls it, or the rest of the right input
// would be held until Close). Close ends both; ending twice is a no-op.
func (d *Driver) EndFirst() error {
	if d.ij == nil {
		return fmt.Errorf("drive: query %s has no interval join: its input ends with Close", d.q.Name)
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed || d.ij.j.Ended(0) {
		return nil
	}
	return d.delivering(d.endSide(0))
}

// endSide ends input side: its watermark goes to the end.
func (d *Driver) endSide(side int) error {
	d.ij.j.End(side)
	return d.ijPump()
}

// IntervalStats returns the interval join's counters (zero without one).
func (d *Driver) IntervalStats() IntervalStats {
	if d.ij == nil {
		return IntervalStats{}
	}
	return d.ij.j.Stats()
}

// HasIntervalJoin reports whether the query has an interval join.
func (d *Driver) HasIntervalJoin() bool { return d.ij != nil }

func (d *Driver) ijCounts(b []byte) []byte {
	t := d.ij.rn
	for _, x := range []int64{t.Records, t.Events, t.Malformed, t.Headers, t.Applied, t.Late, d.ij.evalErrs} {
		b = binary.AppendVarint(b, x)
	}
	return b
}

func (d *Driver) restoreIJoin(val []byte) error {
	t := &d.ij.rn
	for _, p := range []*int64{&t.Records, &t.Events, &t.Malformed, &t.Headers, &t.Applied, &t.Late, &d.ij.evalErrs} {
		x, n := binary.Varint(val)
		if n <= 0 {
			return fmt.Errorf("%w: bad interval join counters", exec.ErrBadState)
		}
		if x < 0 {
			return fmt.Errorf("%w: interval join entry: a negative count", exec.ErrBadState)
		}
		*p, val = x, val[n:]
	}
	return d.ij.j.RestoreState(val)
}

// InputWatermarks are the watermarks (µs) of a join's two inputs: an
// interval join's left and right, a temporal join's stream and table
// (math.MinInt64 without a join, or before an input's first row).
func (d *Driver) InputWatermarks() (first, second int64) {
	switch {
	case d.ij != nil:
		return d.ij.j.Watermark(0), d.ij.j.Watermark(1)
	case d.join != nil:
		st := d.join.j.Stats()
		return st.StreamWM, st.TableWM
	}
	return math.MinInt64, math.MinInt64
}

// IntervalKeyed reports whether an interval join's GROUP BY puts each
// group in one partition of a host that splits both inputs by the join
// key (NewIntervalRouter): every equality of the ON has a side that reads
// one column alone, and that column is a GROUP BY term by itself. Equal
// groups then have equal join keys, so equal route bytes.
func IntervalKeyed(q *plan.Query) bool {
	j := q.IJoin
	if j == nil {
		return false
	}
	plain := map[int]bool{}
	for _, k := range q.Keys {
		if c, ok := k.Expr.(*plan.ColRef); ok && k.Kind == plan.KeyExpr {
			plain[c.Index] = true
		}
	}
	for i := range j.LeftKey {
		ok := false
		for _, e := range []plan.Expr{j.LeftKey[i], j.RightKey[i]} {
			cols := map[int]bool{}
			columnsOf(reflect.ValueOf(e), cols)
			for c := range cols {
				ok = ok || len(cols) == 1 && plain[c]
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// KeyTermOf returns the position in q's GROUP BY of a term that is, by
// itself, the one column expression e reads (e an equality's side of q's
// interval join: the column, or the column under a cast), or -1.
func KeyTermOf(q *plan.Query, e plan.Expr) int {
	cols := map[int]bool{}
	columnsOf(reflect.ValueOf(e), cols)
	if len(cols) != 1 {
		return -1
	}
	for i, k := range q.Keys {
		if c, ok := k.Expr.(*plan.ColRef); ok && k.Kind == plan.KeyExpr && cols[c.Index] {
			return i
		}
	}
	return -1
}

// columnsOf adds the column indexes an expression tree reads to set
// (the walk of maxColumn).
func columnsOf(v reflect.Value, set map[int]bool) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			columnsOf(v.Elem(), set)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type() == colRefType {
			set[int(v.Elem().FieldByName("Index").Int())] = true
			return
		}
		if v.Type().Implements(exprType) && v.Elem().Kind() == reflect.Struct {
			columnsOf(v.Elem(), set)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if t := f.Type(); t.Kind() == reflect.Interface && t.Implements(exprType) || t.Kind() == reflect.Pointer && t.Implements(exprType) ||
				t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Struct && t.Implements(exprType) {
				columnsOf(f, set)
			}
		}
	case reflect.Slice, reflect.Array:
		if !v.Type().Elem().Implements(exprType) && v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		for i := range v.Len() {
			columnsOf(v.Index(i), set)
		}
	}
}
