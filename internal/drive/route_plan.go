package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Placer decodes an input's records and computes the bytes that place
// each on an exchange of the plan (Router, DedupRouter).
type Placer interface {
	// Route decodes raw and appends its placing bytes to dst: a nil key
	// and a nil error is a CSV header record; a bad event is an
	// *EventError, counted.
	Route(dst, raw []byte) ([]byte, error)
	// Place appends to dst the placing bytes of row, the record raw
	// already decoded (by a Route of another placer of the same input,
	// or a HostDedup's Push) with every column this placer's decoder
	// converts: a host that places one record on several exchanges
	// decodes it once. It counts no event, only a key that fails to
	// evaluate (an *EventError).
	Place(dst, raw []byte, row []types.Value) ([]byte, error)
	// Decoded is the row the last Route decoded (nil if it failed): it
	// stays valid until the decoder's next record.
	Decoded() []types.Value
	// Mark is the last decoded event's proposal for its partition's
	// watermark.
	Mark() (int64, bool)
	// TakeCounts returns what the counters gained since the last call.
	TakeCounts() Counts
}

// NewExchangeRouter returns the placer of the records that decode node
// feeds to exchange x of p, as x's consumer needs them placed: by its
// dedup key for a Dedup node, by the join key of its side for an
// interval join, else by the consumer's group key (an aggregate, or a
// temporal join's stream grouped by its columns). An exchange to every
// partition (Broadcast: a versioned table) has none: it returns nil. cfg
// gives the input's decoder (Config.Decoder, required).
func NewExchangeRouter(p *dataflow.Plan, x int, cfg Config) (Placer, error) {
	if cfg.Decoder == nil {
		return nil, fmt.Errorf("drive: the router of exchange %d needs its input's decoder", x)
	}
	n := p.Node(x)
	cs := p.Consumers(x)
	switch {
	case n.Kind != dataflow.Exchange:
		return nil, fmt.Errorf("drive: node %d of the plan is no exchange", x)
	case n.Out.Kind == dataflow.Broadcast:
		return nil, nil
	case len(cs) == 0:
		return nil, fmt.Errorf("drive: exchange %d of the plan has no consumer", x)
	}
	c := p.Node(cs[0])
	switch c.Kind {
	case dataflow.Dedup:
		q := queryBelow(p, c.ID)
		if q == nil {
			return nil, fmt.Errorf("drive: dedup %d of the plan feeds no query", c.ID)
		}
		return NewDedupRouter(q, cfg)
	case dataflow.IntervalJoin:
		side := 0
		if roleOf(c, x) == "right" {
			side = 1
		}
		return NewIntervalRouter(c.Query, side, cfg)
	case dataflow.Aggregate, dataflow.TemporalJoin:
		// The key is the consumer's group key, which its host uses as
		// it is (Driver.PushKeyed): only where the exchange places by
		// it. A view placed for a join after it (by the join key) is
		// placed by other cells.
		if need := dataflow.GroupNeed(c.Query); n.Out.String() != need.String() {
			return nil, fmt.Errorf("drive: exchange %d of the plan places %s by %s, not by its group key (%s)", x, c.Name, n.Out, need)
		}
		return NewRouter(c.Query, cfg)
	}
	return nil, fmt.Errorf("drive: exchange %d of the plan feeds a %s node, which reads no records", x, c.Kind)
}

// queryBelow is the query of the first node fed by node id, directly or
// through others, that has one.
func queryBelow(p *dataflow.Plan, id int) *plan.Query {
	for _, n := range p.Nodes {
		if n.Query != nil && p.Upstream(n.ID)[id] {
			return n.Query
		}
	}
	return nil
}

// roleOf is the role of n's input from node x ("" if none).
func roleOf(n *dataflow.Node, x int) string {
	for _, e := range n.Inputs {
		if e.From == x {
			return e.Role
		}
	}
	return ""
}
