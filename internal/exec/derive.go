package exec

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Deriver is the step after decoding for a source with derived columns
// (plan.Source.HasDerived): the decoders read only the physical columns
// (those an event carries), into the row of Physical(); Apply spreads them
// into the source's row, rounds each TIMESTAMP(p) cell to its precision and
// evaluates the computed columns in declaration order. Keeping this out of
// the JSON and CSV decoders keeps their fast paths untouched: a source
// without derived columns never meets a Deriver.
//
// A Deriver is not safe for concurrent use; the row Apply returns is its
// own buffer, valid until the next Apply.
type Deriver struct {
	src      *plan.Source
	phys     *plan.Source
	physCol  []int  // physical ordinal -> source ordinal
	computed []int  // source ordinals of the computed columns, in order
	used     []bool // source columns to derive; nil: all
	row      []types.Value
}

// NewDeriver returns the Deriver of src, or nil when src has no derived
// columns.
func NewDeriver(src *plan.Source) *Deriver {
	if !src.HasDerived() {
		return nil
	}
	d := &Deriver{src: src, row: make([]types.Value, len(src.Columns))}
	phys := &plan.Source{Name: src.Name, TimeCol: -1, WatermarkDelay: src.WatermarkDelay, Options: src.Options}
	for i, c := range src.Columns {
		if c.Computed != nil {
			d.computed = append(d.computed, i)
			continue
		}
		if i == src.TimeCol {
			phys.TimeCol = len(phys.Columns) // its decoder reports a missing event time
		}
		d.physCol = append(d.physCol, i)
		pc := c
		pc.TimeUnit = 0
		phys.Columns = append(phys.Columns, pc)
	}
	d.phys = phys
	return d
}

// Physical is the source the decoders read: the physical columns in
// declaration order, the event-time column among them when it is physical.
func (d *Deriver) Physical() *plan.Source { return d.phys }

// SetUsed limits the computed columns Apply evaluates to those marked (the
// query's UsedColumns, which hold the columns each one reads) and returns
// the physical columns' marks, for the decoder.
func (d *Deriver) SetUsed(used []bool) []bool {
	if used == nil {
		return nil
	}
	d.used = used
	pu := make([]bool, len(d.physCol))
	for p, i := range d.physCol {
		pu[p] = used[i]
	}
	return pu
}

// Apply turns a row of Physical() into a row of the source. A computed
// column that fails to evaluate, a TIMESTAMP(p) rounded out of range and a
// NULL computed event time are malformed events (*DecodeError naming the
// column): the event cannot be made into the source's row.
func (d *Deriver) Apply(phys []types.Value) ([]types.Value, error) {
	row := d.row
	for p, i := range d.physCol {
		v := phys[p]
		if u := d.src.Columns[i].TimeUnit; u > 1 && !v.Null {
			us, ok := plan.RoundTimestamp(v.I, u)
			if !ok {
				return nil, &DecodeError{Column: d.src.Columns[i].Name, Msg: fmt.Sprintf("%s rounded to the column's precision is out of the TIMESTAMP range", plan.ValueText(v))}
			}
			v = types.TS(us)
		}
		row[i] = v
	}
	for _, i := range d.computed {
		c := &d.src.Columns[i]
		if d.used != nil && !d.used[i] {
			row[i] = types.NullOf(c.Type)
			continue
		}
		v, err := c.Computed.Eval(row)
		if err != nil {
			return nil, &DecodeError{Column: c.Name, Msg: fmt.Sprintf("computed column (%s): %v", c.ComputedSQL, err)}
		}
		if v.Null && i == d.src.TimeCol {
			return nil, &DecodeError{Column: c.Name, Msg: fmt.Sprintf("event time is null (computed as %s)", c.ComputedSQL)}
		}
		row[i] = v
	}
	return row, nil
}
