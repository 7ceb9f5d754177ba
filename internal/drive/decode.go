package drive

import (
	"errors"
	"fmt"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// decodeNode is the decode node of an input (the plan's dataflow.Decode):
// it turns the input's records (JSON or CSV bytes, or a host's typed
// rows) into rows of the input's declared source, counts them in its
// owner's counters, and keeps what the last event proposes as its input
// partition's watermark. A Driver and a Router each read their input
// through one.
type decodeNode struct {
	dec *exec.Decoder
	src *plan.Source // the declared source read: its columns, time column and watermark delay
	// used marks the columns the reader reads, for the deriver of typed
	// rows of a source with computed or TIMESTAMP(p) columns (made on
	// first use).
	used   []bool
	derive *exec.Deriver
	n      *Counts // the owner's counters
	mark   int64   // the last event's time less the watermark delay
	marked bool
}

// inputDecoder is dec, or the default decoder of the records of q's first
// input: JSON or CSV per the source's options, converting only the
// columns q reads (a join's stream or left input, whose columns start the
// joined row).
func inputDecoder(q *plan.Query, dec *exec.Decoder) (*exec.Decoder, error) {
	if dec == nil {
		switch {
		case q.Join != nil:
			dec = exec.NewSourceDecoder(q.Join.Stream, q.StreamUsed())
		case q.IJoin != nil:
			dec = exec.NewSourceDecoder(q.IJoin.Left, q.LeftUsed())
		default:
			dec = exec.NewQueryDecoder(q)
		}
	}
	return dec, dec.Err()
}

// fatalInput reports whether a decode error stops the input: a CSV header
// that does not fit the source (any other is one event's).
func fatalInput(err error) bool {
	var he *exec.HeaderError
	return errors.As(err, &he)
}

// decode reads one record. A nil row and a nil error is a CSV header
// record (counted, not an event). A malformed event is counted and its
// error returned; a header that does not fit the source is returned as is
// (fatalInput).
func (x *decodeNode) decode(raw []byte) ([]types.Value, error) {
	x.n.Records++
	row, err := x.dec.Decode(raw)
	if err == nil {
		if row == nil {
			x.n.Headers++
			return nil, nil
		}
		x.n.Events++
		x.observe(row, x.src.TimeCol)
		return row, nil
	}
	if fatalInput(err) {
		return nil, err
	}
	x.n.Events++
	x.n.Malformed++
	return nil, err
}

// observe keeps the event's proposal for the watermark.
func (x *decodeNode) observe(row []types.Value, timeCol int) {
	if timeCol >= 0 {
		x.mark, x.marked = row[timeCol].I-x.src.WatermarkDelay, true
	}
}

// typed checks one typed row a host hands over, in the source's column
// order, and completes it: a row of the wrong shape or kinds, or without
// an event time, is malformed (counted, its error returned). For a source
// with computed or TIMESTAMP(p) columns the row holds the physical
// columns (in declaration order, computed ones left out), or every column
// with each computed cell NULL; the computed cells are evaluated and the
// TIMESTAMP(p) cells rounded, as the decoders do.
func (x *decodeNode) typed(row []types.Value) ([]types.Value, error) {
	x.n.Records++
	x.n.Events++
	row, err := x.complete(row)
	if err != nil {
		x.n.Malformed++
		return nil, err
	}
	x.observe(row, x.src.TimeCol)
	return row, nil
}

func (x *decodeNode) complete(row []types.Value) ([]types.Value, error) {
	src := x.src
	cols, tc := src.Columns, src.TimeCol
	if src.HasDerived() {
		phys, err := x.physical(row)
		if err != nil {
			return nil, err
		}
		row = phys
		cols, tc = x.derive.Physical().Columns, x.derive.Physical().TimeCol
	} else if len(row) != len(cols) {
		return nil, &exec.DecodeError{Msg: fmt.Sprintf("row has %d cells, source %q has %d columns", len(row), src.Name, len(cols))}
	}
	row, de := typedCells(row, cols)
	if de != nil {
		return nil, de
	}
	if tc >= 0 && row[tc].Null {
		return nil, &exec.DecodeError{Column: cols[tc].Name, Msg: "event time is null"}
	}
	if x.derive != nil {
		full, err := x.derive.Apply(row)
		if err != nil {
			return nil, err
		}
		row = full
	}
	if tc := src.TimeCol; tc >= 0 && row[tc].Null {
		return nil, &exec.DecodeError{Column: src.Columns[tc].Name, Msg: "event time is null"}
	}
	return row, nil
}

// physical returns the physical cells of a row of a source with derived
// columns: the row itself, or the row without its (NULL) computed cells.
func (x *decodeNode) physical(row []types.Value) ([]types.Value, error) {
	src := x.src
	if x.derive == nil {
		x.derive = exec.NewDeriver(src)
		x.derive.SetUsed(x.used)
	}
	phys := x.derive.Physical()
	if len(row) == len(src.Columns) && len(row) != len(phys.Columns) {
		cells := make([]types.Value, 0, len(phys.Columns))
		for i, c := range src.Columns {
			if c.Computed == nil {
				cells = append(cells, row[i])
			} else if !row[i].Null {
				return nil, &exec.DecodeError{Column: c.Name, Msg: "a computed column's cell must be NULL: it is evaluated from the other columns"}
			}
		}
		row = cells
	}
	if len(row) != len(phys.Columns) {
		return nil, &exec.DecodeError{Msg: fmt.Sprintf("row has %d cells, source %q has %d physical columns (of %d)", len(row), src.Name, len(phys.Columns), len(src.Columns))}
	}
	return row, nil
}
