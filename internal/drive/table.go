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

// A join's second input (a temporal join's versioned table, an interval
// join's right input) is pushed with PushTable and PushTableRow; the root
// package names both inputs by source. Its records are decoded and
// counted here, into the join node's joinInput, and the rows go to the
// node as input 1.

// joinInput is a join node's second input: its decoder and counters, and
// how its errors name it.
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

// errNoTable is the error of a second-input call on a driver without a join.
func (d *Driver) errNoTable() error {
	return fmt.Errorf("drive: query %s has no versioned table input", d.q.Name)
}

// admitTable refuses second-input rows on a driver without a join, failed
// or closed, or that the join cannot take now (joinNode.admit).
func (d *Driver) admitTable() error {
	if d.jn == nil {
		return d.errNoTable()
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed {
		return ErrClosed
	}
	return d.jn.admit(1)
}

// PushTable decodes one record of the join's second input (a temporal
// join's versioned table: the version of its key valid from its time; an
// interval join's right input) and joins it. A malformed row is an
// *EventError (counted in TableCounts); a late one is counted and handed
// to the late hook. The joined rows it releases are applied.
func (d *Driver) PushTable(raw []byte) error {
	if err := d.admitTable(); err != nil {
		return err
	}
	row, err := d.jn.second().decode(raw)
	if err != nil || row == nil {
		return err
	}
	_, err = d.first.push(1, d.one.set(row, raw, nil, false))
	return err
}

// PushTableBehind is PushTable for a host whose table watermark is a
// minimum over the table's partitions (Kafka): the row is late when it
// is behind the join's table watermark or behind floor, the watermark
// of the rows before it in its own table partition (math.MinInt64: not
// known), so what is late does not depend on the other partitions or
// on when the host moved the watermark. Without a temporal join it is
// PushTable.
func (d *Driver) PushTableBehind(raw []byte, floor int64) error {
	if t, ok := d.jn.(temporalNode); ok {
		t.setLateFloor(floor)
		defer t.setLateFloor(math.MinInt64)
	}
	return d.PushTable(raw)
}

// PushTableRow applies one typed row of the second input, in its column
// order (a table with computed or TIMESTAMP(p) columns takes its rows
// through PushTable). A row of the wrong shape or kinds, or without a
// time, is malformed.
func (d *Driver) PushTableRow(row []types.Value) error {
	if err := d.admitTable(); err != nil {
		return err
	}
	row, err := d.jn.second().check(row)
	if err != nil {
		return err
	}
	_, err = d.first.push(1, d.one.set(row, nil, nil, false))
	return err
}

// AdvanceTableWatermark moves the second input's watermark to wm (µs) if
// that is later: an input that is idle, or whose host knows no earlier
// row will come. What it releases is joined and applied.
func (d *Driver) AdvanceTableWatermark(wm int64) error {
	if d.jn == nil {
		return d.errNoTable()
	}
	if d.closed {
		return ErrClosed
	}
	return d.delivering(d.first.advance(1, wm))
}

// EndTable ends the second input: no row will come, so every waiting
// event of a temporal join joins the versions there are. Later rows are
// refused (a temporal join's table rows: late).
func (d *Driver) EndTable() error {
	if d.jn == nil {
		return d.errNoTable()
	}
	return d.delivering(d.jn.end(1))
}

// EndFirst ends the left input of an interval join alone, as EndTable
// ends the right: no row of it will come, its watermark goes to the end,
// so the join holds no right row for it any more (a host whose left file
// ended while the right goes on calls it, or the rest of the right input
// would be held until Close). Close ends both; ending twice is a no-op.
func (d *Driver) EndFirst() error {
	if !d.HasIntervalJoin() {
		return errNoEndFirst(d.q)
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed || d.jn.ended(0) {
		return nil
	}
	return d.delivering(d.jn.end(0))
}

func errNoEndFirst(q *plan.Query) error {
	return fmt.Errorf("drive: query %s has no interval join: its input ends with Close", q.Name)
}

// endSide ends input side of the join, delivering nothing yet (a graph's
// close marker for one input of a join of two views).
func (d *Driver) endSide(side int) error { return d.jn.end(side) }

// inputEnded reports whether a join's input has ended (false without a
// join).
func (d *Driver) inputEnded(input int) bool { return d.jn != nil && d.jn.ended(input) }

// TableCounts returns the second input's counters (Late: rows behind its
// watermark; Applied: rows taken, as versions or held rows, or late).
func (d *Driver) TableCounts() Counts {
	if d.muted {
		return Counts{}
	}
	return d.first.counts(1)
}

// JoinStats returns the temporal join's counters and state sizes (zero
// without one).
func (d *Driver) JoinStats() JoinStats {
	if t, ok := d.jn.(temporalNode); ok {
		return t.joinStats()
	}
	return JoinStats{}
}

// IntervalStats returns the interval join's counters (zero without one).
func (d *Driver) IntervalStats() IntervalStats {
	if j, ok := d.jn.(intervalNode); ok {
		return j.intervalStats()
	}
	return IntervalStats{}
}

// HasJoin reports whether the query has a temporal join (a table input).
func (d *Driver) HasJoin() bool {
	_, ok := d.jn.(temporalNode)
	return ok
}

// HasIntervalJoin reports whether the query has an interval join.
func (d *Driver) HasIntervalJoin() bool {
	_, ok := d.jn.(intervalNode)
	return ok
}

// InputWatermarks are the watermarks (µs) of a join's two inputs: an
// interval join's left and right, a temporal join's stream and table
// (math.MinInt64 without a join, or before an input's first row).
func (d *Driver) InputWatermarks() (first, second int64) {
	if d.jn == nil {
		return math.MinInt64, math.MinInt64
	}
	return d.jn.watermarks()
}
