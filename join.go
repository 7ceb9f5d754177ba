package ubik

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/types"
)

// ErrJoinBuffer is returned by Push for an event a temporal join cannot
// hold: QueryOptions.JoinBuffer events wait already for the table's
// watermark to pass their time. Nothing was done; push table rows (or
// end the table input) and push the event again.
var ErrJoinBuffer = drive.ErrJoinBuffer

// ErrUnknownInput is returned by PushInput for a name that is none of the
// query's inputs; nothing was done.
var ErrUnknownInput = errors.New("ubik: unknown input")

// TableStats are the counters of a query's versioned table input.
type TableStats struct {
	RowsIn    int64 // rows pushed
	Malformed int64 // rows that could not be decoded, or with a NULL primary key cell
	Late      int64 // rows behind the table's watermark (not applied)
}

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
func (q *Query) PushTableRow(row []types.Value) (err error) {
	if err := q.d.Enter(); err != nil {
		return err
	}
	defer q.d.Leave(&err)
	return q.d.PushTableRow(row)
}

// PushInput pushes one record to the input named input: the query's
// stream (as Push) or its versioned table (as PushTable).
func (q *Query) PushInput(input string, record []byte) error {
	name, err := q.inputKind(input)
	if err != nil {
		return err
	}
	if name == "table" {
		return q.PushTable(record)
	}
	return q.Push(record)
}

func (q *Query) inputKind(input string) (string, error) {
	src := q.plan.Source
	if j := q.plan.Join; j != nil {
		if strings.EqualFold(input, j.Table.Name) {
			return "table", nil
		}
		src = j.Stream
	}
	if strings.EqualFold(input, src.Name) {
		return "stream", nil
	}
	names := src.Name
	if j := q.plan.Join; j != nil {
		names += ", " + j.Table.Name
	}
	return "", fmt.Errorf("%w: query %s has no input %q (its inputs: %s)", ErrUnknownInput, q.plan.Name, input, names)
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
