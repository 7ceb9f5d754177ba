package drive

import (
	"errors"
	"fmt"
	"math"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A driver's inputs are numbered as its head node's: input 0 is the
// records Push and PushRow take, decoded by the driver's decode node; a
// later one (a join's second input: a temporal join's versioned table, an
// interval join's right input) is pushed with PushInput and PushInputRow,
// decoded and counted by the head's decode node of that input (joinInput,
// node.input), and its rows go to the head as that input. The root
// package names the inputs by source.

// joinInput is the decode node of a join node's second input: its decoder
// and counters, and how its errors name it.
type joinInput struct {
	env  *joinEnv
	src  *plan.Source
	dec  *exec.Decoder
	n    Counts
	noun string // "table" (a temporal join's), "source" (an interval join's right input)
	call string // the call that takes its records (a table with computed columns is refused typed rows)
}

// eventErr is the error of a row of the input that was not applied
// (fatal when strict).
func (in *joinInput) eventErr(err error) error {
	e := &EventError{Seq: in.n.Events, Err: fmt.Errorf("%s %s: %w", in.noun, in.src.Name, err)}
	if in.env.strict {
		*in.env.fatal = e
	}
	return e
}

// decode reads one record of the input. A nil row and a nil error is a
// CSV header record; a header that does not fit the source is fatal.
func (in *joinInput) decode(raw []byte) ([]types.Value, error) {
	in.n.Records++
	row, err := in.dec.Decode(raw)
	if err != nil {
		var he *exec.HeaderError
		if errors.As(err, &he) {
			return nil, in.env.fail(fmt.Errorf("%s %s: %w", in.noun, in.src.Name, err))
		}
		in.n.Events++
		in.n.Malformed++
		return nil, in.eventErr(err)
	}
	if row == nil {
		in.n.Headers++
		return nil, nil
	}
	in.n.Events++
	return row, nil
}

// check takes one typed row of the input, in its column order (a source
// with computed or TIMESTAMP(p) columns takes records). A row of the
// wrong shape or kinds, or without a time, is malformed.
func (in *joinInput) check(row []types.Value) ([]types.Value, error) {
	in.n.Records++
	in.n.Events++
	src := in.src
	bad := func(col, msg string) ([]types.Value, error) {
		in.n.Malformed++
		return nil, in.eventErr(&exec.DecodeError{Column: col, Msg: msg})
	}
	if src.HasDerived() {
		return bad("", fmt.Sprintf("a %s with computed or TIMESTAMP(p) columns takes its rows as records (%s)", in.noun, in.call))
	}
	if len(row) != len(src.Columns) {
		return bad("", fmt.Sprintf("row has %d cells, %s %q has %d columns", len(row), in.noun, src.Name, len(src.Columns)))
	}
	row, de := typedCells(row, src.Columns)
	if de != nil {
		return bad(de.Column, de.Msg)
	}
	if row[src.TimeCol].Null {
		return bad(src.Columns[src.TimeCol].Name, "event time is null")
	}
	return row, nil
}

// typedCells checks a typed row's cells against the columns' kinds, and
// turns invalid UTF-8 into U+FFFD as the decoders do: the caller's row is
// copied, not changed.
func typedCells(row []types.Value, cols []plan.Column) ([]types.Value, *exec.DecodeError) {
	copied := false
	for i, c := range cols {
		if !row[i].Null && row[i].Kind != c.Type.Kind {
			return nil, &exec.DecodeError{Column: c.Name, Msg: fmt.Sprintf("cell is %s, column is %s", row[i].Kind, c.Type)}
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
	return row, nil
}

// errNoInput is the error of a call on an input the head of the chain
// does not have (a driver without a join has no second input).
func (d *Driver) errNoInput() error {
	return fmt.Errorf("drive: query %s has no versioned table input", d.q.Name)
}

// PushInput decodes one record of input and applies it: input 0 as Push;
// a later input (a temporal join's versioned table: the version of its key
// valid from its time; an interval join's right input) through the head's
// decode node of that input. A malformed row is an *EventError (counted
// in InputCounts); a late one is counted and handed to the late hook. The
// joined rows it releases are applied.
func (d *Driver) PushInput(input int, raw []byte) error {
	if input == 0 {
		return d.Push(raw)
	}
	if err := d.admit(input); err != nil {
		return err
	}
	row, err := d.first.input(input).decode(raw)
	if err != nil || row == nil {
		return err
	}
	_, err = d.first.push(input, d.one.set(row, raw, nil, false))
	return err
}

// PushBehind is PushInput for a host whose input watermark is a minimum
// over the input's partitions (Kafka, a temporal join's table): the row is
// late when it is behind the input's watermark or behind floor, the
// watermark of the rows before it in its own partition (math.MinInt64:
// not known), so what is late does not depend on the other partitions or
// on when the host moved the watermark. A node without such a floor
// ignores it.
func (d *Driver) PushBehind(input int, raw []byte, floor int64) error {
	d.first.setLateFloor(input, floor)
	defer d.first.setLateFloor(input, math.MinInt64)
	return d.PushInput(input, raw)
}

// PushInputRow applies one typed row of input, in its column order: input
// 0 as PushRow; a later input's (a table with computed or TIMESTAMP(p)
// columns takes its rows through PushInput). A row of the wrong shape or
// kinds, or without a time, is malformed.
func (d *Driver) PushInputRow(input int, row []types.Value) error {
	if input == 0 {
		return d.PushRow(row)
	}
	if err := d.admit(input); err != nil {
		return err
	}
	row, err := d.first.input(input).check(row)
	if err != nil {
		return err
	}
	b := d.one.set(row, nil, nil, false)
	b.owned = d.ownRow
	_, err = d.first.push(input, b)
	return err
}

// pushViewRow is PushInputRow of a view's row that a graph node reads;
// owned: the row is the graph's own copy, whose cells a join may hold
// without copying them (exec.IntervalJoin.PushOwned).
func (d *Driver) pushViewRow(input int, row []types.Value, owned bool) error {
	d.ownRow, d.viewRow = owned, true
	err := d.PushInputRow(input, row)
	d.ownRow, d.viewRow = false, false
	return err
}

// AdvanceInput moves input's watermark to wm (µs) if that is later: input
// 0 as AdvanceWatermark; a later input that is idle, or whose host knows
// no earlier row will come. What it releases is joined and applied.
func (d *Driver) AdvanceInput(input int, wm int64) error {
	if input == 0 {
		return d.AdvanceWatermark(wm)
	}
	if d.first.input(input) == nil {
		return d.errNoInput()
	}
	if d.closed {
		return ErrClosed
	}
	return d.delivering(d.first.advance(input, wm))
}

// EndInput ends one input alone: no row of it will come. A temporal
// join's table: every waiting event joins the versions there are, and
// later table rows are late. An interval join's either input: its
// watermark goes to the end, so the join holds no row of the other for it
// (a host whose left file ended while the right goes on ends input 0, or
// the rest of the right input would be held until Close). An input that
// does not end alone (a temporal join's stream, a query without a join)
// is refused: it ends with Close. Close ends every input; ending an input
// twice is a no-op.
func (d *Driver) EndInput(input int) error {
	if input > 0 {
		if d.first.input(input) == nil {
			return d.errNoInput()
		}
		return d.delivering(d.first.end(input))
	}
	if !d.first.alone(input) {
		return errNoEndFirst(d.q)
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed || d.first.ended(input) {
		return nil
	}
	return d.delivering(d.first.end(input))
}

func errNoEndFirst(q *plan.Query) error {
	return fmt.Errorf("drive: query %s has no interval join: its input ends with Close", q.Name)
}

// InputCounts returns input's counters: input 0's are Counts; a later
// input's (Late: rows behind its watermark; Applied: rows taken, as
// versions or held rows, or late) are its decode node's and the head's.
func (d *Driver) InputCounts(input int) Counts {
	switch {
	case input == 0:
		return d.Counts()
	}
	return d.first.counts(input)
}

// JoinStats returns the temporal join's counters and state sizes (zero
// without one).
func (d *Driver) JoinStats() JoinStats {
	if t, ok := d.first.(temporalNode); ok {
		return t.joinStats()
	}
	return JoinStats{}
}

// IntervalStats returns the interval join's counters (zero without one).
func (d *Driver) IntervalStats() IntervalStats {
	if j, ok := d.first.(intervalNode); ok {
		return j.intervalStats()
	}
	return IntervalStats{}
}

// InputWatermark is the watermark (µs) of input of the head: an interval
// join's left (0) and right (1), a temporal join's stream and table
// (math.MinInt64 without a join, or before an input's first row).
func (d *Driver) InputWatermark(input int) int64 { return d.first.inputWatermark(input) }
