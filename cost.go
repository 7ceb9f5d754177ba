package ubik

import (
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// DefaultJoinBuffer is QueryOptions.JoinBuffer's default for a temporal
// join: the events it holds while they wait for the table's watermark.
const DefaultJoinBuffer = plan.DefaultJoinBuffer

// StateCost estimates the memory a query holds, for explain: what one
// live (group, window) costs, and what its dedup and interval join keep.
type StateCost struct {
	// Overhead is the bytes of one live (group, window) besides its
	// aggregates' states and its key's text.
	Overhead   int
	Aggregates []AggregateCost
	// Windowed is false for a continuous view (one entry per group, for
	// the life of the query); Session for session windows.
	Windowed, Session bool
	// WindowPositions are the key positions of the window's cells.
	WindowPositions []int
	Dedup           *DedupCost        // nil without deduplication
	IntervalJoin    *IntervalJoinCost // nil without an interval join
}

// AggregateCost is one aggregate's state.
type AggregateCost struct {
	Name  string
	Bytes int  // for an empty state
	Grows bool // the state grows with the input (sets, sketches, exact sums' partials)
}

// DedupCost is what a source's deduplication keeps: one entry per key
// within the horizon, evicted as the watermark passes it.
type DedupCost struct {
	Column     string // the dedup key
	Within     string // the horizon, as SQL's INTERVAL text
	EntryBytes int    // per key, beyond the key's text
}

// IntervalJoinCost is what an interval join holds per row.
type IntervalJoinCost struct {
	Left, Right       string // the inputs' names
	LeftRow, RightRow int    // bytes per held row of each input, beyond its text
	KeyBytes          int    // bytes per distinct join key
}

// StateCost estimates the query's state (see StateCost).
func (p *Plan) StateCost() StateCost {
	q := p.q
	overhead, aggs := drive.StateCost(q)
	c := StateCost{Overhead: overhead, Windowed: q.Window != nil, WindowPositions: q.WindowPositions()}
	c.Session = q.Window != nil && q.Window.Kind == plan.Session
	for _, a := range aggs {
		c.Aggregates = append(c.Aggregates, AggregateCost{Name: a.Name, Bytes: a.Bytes, Grows: a.Grows})
	}
	if d := q.Source.Dedup; d != nil {
		c.Dedup = &DedupCost{Column: q.Source.Columns[d.Col].Name, Within: plan.ValueText(types.Interv(0, 0, d.Within)),
			EntryBytes: drive.DedupEntryBytes}
	}
	if j := q.IJoin; j != nil {
		c.IntervalJoin = &IntervalJoinCost{Left: j.Left.Name, Right: j.Right.Name,
			LeftRow: drive.IntervalRowBytes(j, 0), RightRow: drive.IntervalRowBytes(j, 1), KeyBytes: drive.IntervalKeyBytes}
	}
	return c
}
