package drive

import (
	"strings"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// LateRows renders a late event's row as an object of its source's
// declared columns, by name (what a late output shows). The row a query hands over holds
// only the columns it reads (a JSON decoder skips the rest), so a JSON
// event is decoded again, whole, by a decoder of its source; a CSV
// decoder already converts every column. Not safe for concurrent use.
type LateRows struct {
	decs map[*plan.Source]*exec.Decoder
}

// Append appends the event's declared columns as a JSON object, or,
// when the source is not known (a row pushed without its record, a view's
// row), the row as the query read it, as an array.
func (lr *LateRows) Append(b []byte, ev *exec.LateEvent) []byte {
	row := lr.sourceRow(ev)
	if row == nil {
		return changelog.AppendKey(b, ev.Row)
	}
	b = append(b, '{')
	for i, c := range ev.Source.Columns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = changelog.AppendCell(b, types.Str(c.Name))
		b = append(b, ": "...)
		b = changelog.AppendCell(b, row[i])
	}
	return append(b, '}')
}

// sourceRow is the event's row of every declared column of its source,
// or nil when it cannot be had.
func (lr *LateRows) sourceRow(ev *exec.LateEvent) []types.Value {
	src := ev.Source
	if src == nil || src.View != nil || ev.Event == nil {
		return nil
	}
	if strings.EqualFold(src.Options["format"], "csv") {
		if len(ev.Row) == len(src.Columns) {
			return ev.Row
		}
		return nil
	}
	if lr.decs == nil {
		lr.decs = map[*plan.Source]*exec.Decoder{}
	}
	dec := lr.decs[src]
	if dec == nil {
		dec = exec.NewDecoder(src)
		lr.decs[src] = dec
	}
	row, err := dec.Decode(ev.Event)
	if err != nil || len(row) != len(src.Columns) {
		return nil
	}
	return row
}
