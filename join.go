package ubik

import (
	"fmt"
	"strings"
	"time"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TableStats are the counters of a query's versioned table input.
type TableStats struct {
	RowsIn    int64 // rows pushed
	Malformed int64 // rows that could not be decoded, or with a NULL primary key cell
	Late      int64 // rows behind the table's watermark (not applied)
}

// A query with an interval join of two streams (FROM l JOIN r ON l.k =
// r.k AND r.ts BETWEEN l.ts - INTERVAL ... AND l.ts + INTERVAL ...) has
// two inputs too: l, pushed with Push and PushRow, and r, pushed with
// PushTable and PushTableRow, both also by name (PushInput, PushInputRow,
// AdvanceInputWatermark, EndInput). A row is matched with the other
// input's rows when it arrives; a row is kept until the other input's
// watermark makes a match impossible. Stats.Interval has its counters.

// A query with a temporal join (FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts
// ON ...) has two inputs: the stream s, pushed with Push and PushRow, and
// the versioned table t, pushed with PushTable and PushTableRow (or both
// by name with PushInput). Each event waits until the table's watermark
// has passed its time, then joins the version of its key valid then, so
// the result does not depend on how the two inputs interleave. Close ends
// both inputs; EndTable ends the table's alone.

// PushTable decodes and applies one record of the query's versioned
// table: the version of its key valid from its time. A malformed row
// returns an *EventError (counted in Stats.Table); a row behind the
// table's watermark is late (counted, handed to OnLateTable). Without a
// callback it returns ErrBackpressure, having done nothing, while records
// wait for Next.
func (q *Query) PushTable(row []byte) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.PushTable(row)
}

// PushTableRow applies one typed row of the versioned table, in its column
// order.
func (q *Query) PushTableRow(row []Value) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.PushTableRow(cells(row))
}

// PushInput pushes one record to the input named input: the query's
// stream (as Push), its versioned table (as PushTable), or either stream
// of an interval join (the left as Push, the right as PushTable).
func (q *Query) PushInput(input string, record []byte) error {
	second, err := q.inputKind(input)
	if err != nil {
		return err
	}
	if second {
		return q.PushTable(record)
	}
	return q.Push(record)
}

// PushInputRow pushes one typed row, in its source's column order, to the
// input named input (see PushInput).
func (q *Query) PushInputRow(input string, row []Value) error {
	second, err := q.inputKind(input)
	if err != nil {
		return err
	}
	if second {
		return q.PushTableRow(row)
	}
	return q.PushRow(row)
}

// AdvanceInputWatermark moves the watermark of the input named input
// forward (an idle input, or a host that knows no earlier row will come).
// For a query with one input, or the first input of a join, it is
// AdvanceWatermark.
func (q *Query) AdvanceInputWatermark(input string, t time.Time) error {
	second, err := q.inputKind(input)
	if err != nil {
		return err
	}
	if second {
		return q.AdvanceTableWatermark(t)
	}
	return q.AdvanceWatermark(t)
}

// EndInput ends one input of a join, named input: no row of it will
// come. Either input of two streams (an interval join, or a join of two
// views over two sources) ends on its own, so once one input is over the
// join holds no row of the other for it (a host whose first file ended
// ends it before reading the rest of the second); a versioned table ends
// on its own, its stream with Close. Close ends both; ending an input
// twice is a no-op, and a row pushed to an ended input returns ErrClosed.
func (q *Query) EndInput(input string) (err error) {
	second, err := q.inputKind(input)
	if err != nil {
		return err
	}
	if second {
		return q.EndTable()
	}
	if !q.d.TwoStreams() {
		return fmt.Errorf("ubik: %s is the first input of query %s: it ends with Close", input, q.plan.Name)
	}
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.EndFirst()
}

// InputWatermarks returns the watermarks (µs) of a join's two inputs:
// the first (Push) and the second (PushTable); math.MinInt64 before an
// input's first row, or for a query without a join. A host reading two
// inputs feeds the one behind. They are those of every record fed so far,
// on any number of threads (a graph over two sources then decodes each
// record as it is fed), so an order chosen by them is the same on every
// run.
func (q *Query) InputWatermarks() (first, second int64) { return q.d.InputWatermarks() }

// Inputs names the query's inputs, as PushInput takes them: its source,
// or a join's two (the first pushed with Push, the second with
// PushTable). A query over views names the declared inputs of its
// graph: the source its views read, and the second input of a view's
// join (a versioned table, an interval join's right stream) or of a
// join of two views over two sources.
func (q *Query) Inputs() []string {
	first, second := q.inputNames()
	if second == "" {
		return []string{first.Name}
	}
	return []string{first.Name, second}
}

// inputNames are the first input's source and the second input's name
// ("" without one).
func (q *Query) inputNames() (*plan.Source, string) {
	return q.d.Sources()[0], q.d.SecondInput()
}

// inputKind reports whether input names the query's second input.
func (q *Query) inputKind(input string) (bool, error) {
	src, second := q.inputNames()
	if second != "" && strings.EqualFold(input, second) {
		return true, nil
	}
	if strings.EqualFold(input, src.Name) {
		return false, nil
	}
	names := src.Name
	if second != "" {
		names += ", " + second
	}
	return false, fmt.Errorf("%w: query %s has no input %q (its inputs: %s)", ErrUnknownInput, q.plan.Name, input, names)
}

// AdvanceTableWatermark moves the versioned table's watermark forward (an
// idle table, or a host that knows no earlier row will come): waiting
// events it passes are joined.
func (q *Query) AdvanceTableWatermark(t time.Time) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.AdvanceTableWatermark(t.UnixMicro())
}

// EndTable ends the versioned table's input: every waiting event, and
// every later one, joins the versions there are. A table row pushed after
// it returns ErrClosed; ending the table twice is a no-op.
func (q *Query) EndTable() (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.EndTable()
}
