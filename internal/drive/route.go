package drive

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A Router is the decode, key and route node of a host that repartitions
// an input (the Kafka repartitioning stage): it decodes each record and
// computes the bytes that place it, and runs no join and no aggregate.
// The bytes are the record's canonical group key (the aggregating host
// hands it to Driver.PushKeyed, so the GROUP BY is evaluated once) or an
// interval join input's join key.
type Router struct {
	in    decodeNode
	keys  *exec.GroupKeys     // a query's group key
	ikeys *exec.IntervalRoute // an interval join input's join key
	last  []types.Value       // the row the last Route decoded
	n     Counts
	taken Counts
}

// NewRouter returns the router of q's events by their group key. Only
// cfg.Decoder is read (default: JSON or CSV per the source's options).
//
// A temporal join whose GROUP BY reads the table's columns knows an
// event's group only after the join, and every partition holds the whole
// table: its stream needs no placement (the host joins it where it is and
// repartitions the joined rows by the GROUP BY key, Config.OnJoined), so
// it has no router.
func NewRouter(q *plan.Query, cfg Config) (*Router, error) {
	switch {
	case q != nil && q.IJoin != nil:
		return nil, fmt.Errorf("drive: query %s has an interval join: its inputs are routed by the join key (NewIntervalRouter)", q.Name)
	case q != nil && q.Join != nil && !dataflow.StreamGrouped(q):
		return nil, fmt.Errorf("drive: query %s's temporal join is grouped by a column of the table: its stream needs no placement (it joins where it is)", q.Name)
	}
	r, err := newRouter(q, cfg.Decoder, -1)
	if err != nil {
		return nil, err
	}
	r.keys = exec.NewGroupKeys(q)
	return r, nil
}

// NewIntervalRouter returns the router of the records of input side (0
// left, 1 right) of q's interval join, decoded with cfg.Decoder (the
// input's, required), by their join key under the group key rules
// (exec.IntervalRoute), so that rows that may match meet in one
// partition.
func NewIntervalRouter(q *plan.Query, side int, cfg Config) (*Router, error) {
	if q.IJoin == nil || side < 0 || side > 1 {
		return nil, fmt.Errorf("drive: query %s has no interval join input %d", q.Name, side)
	}
	if cfg.Decoder == nil {
		return nil, fmt.Errorf("drive: the router of an interval join input needs its decoder")
	}
	keys, err := exec.NewIntervalRoute(q, side)
	if err != nil {
		return nil, err
	}
	r, err := newRouter(q, cfg.Decoder, side)
	if err != nil {
		return nil, err
	}
	r.ikeys = keys
	return r, nil
}

// newRouter returns a router of the records of q's input side (-1: its
// first input).
func newRouter(q *plan.Query, dec *exec.Decoder, side int) (*Router, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	dec, err := inputDecoder(q, dec)
	if err != nil {
		return nil, err
	}
	src := firstSource(q)
	if side == 1 {
		src = q.IJoin.Right
	}
	r := &Router{}
	r.in = decodeNode{dec: dec, src: src, n: &r.n}
	return r, nil
}

// Route decodes one input record and appends its placing bytes to dst. A
// nil key and a nil error is a CSV header record, skipped; a bad event is
// an *EventError, counted; a CSV header that does not fit the source is
// returned as is (the input cannot be read).
func (r *Router) Route(dst, raw []byte) ([]byte, error) {
	row, err := r.in.decode(raw)
	r.last = row
	if err != nil {
		if fatalInput(err) {
			return nil, err
		}
		return nil, r.eventErr(err)
	}
	if row == nil {
		return nil, nil
	}
	return r.Place(dst, raw, row)
}

// Place appends the placing bytes of row, raw decoded elsewhere, to dst
// (Placer.Place).
func (r *Router) Place(dst, raw []byte, row []types.Value) ([]byte, error) {
	key, err := r.place(dst, raw, row)
	if err != nil {
		r.n.EvalErrors++
		return nil, r.eventErr(err)
	}
	return key, nil
}

// Decoded is the row the last Route decoded (Placer.Decoded).
func (r *Router) Decoded() []types.Value { return r.last }

// place appends the placing bytes of a decoded record (row, read from
// raw) to dst; an error is the key's evaluation error.
func (r *Router) place(dst, raw []byte, row []types.Value) ([]byte, error) {
	if r.ikeys != nil {
		return r.ikeys.Append(dst, row)
	}
	return r.keys.Append(dst, row)
}

func (r *Router) eventErr(err error) error { return &EventError{Seq: r.n.Events, Err: err} }

// Mark returns the last decoded event's time less the source's watermark
// delay: what that event proposes as the watermark of its input partition.
func (r *Router) Mark() (int64, bool) { return r.in.mark, r.in.marked }

// Counts returns the input counters (EvalErrors: the events whose key
// failed to evaluate).
func (r *Router) Counts() Counts { return r.n }

// TakeCounts returns what the counters gained since the previous call.
func (r *Router) TakeCounts() Counts {
	delta := r.n.minus(r.taken)
	r.taken = r.n
	return delta
}

// firstSource is the declared source of the records q's first input
// takes: a temporal join's stream, an interval join's left input, or the
// query's source.
func firstSource(q *plan.Query) *plan.Source {
	switch {
	case q.Join != nil:
		return q.Join.Stream
	case q.IJoin != nil:
		return q.IJoin.Left
	}
	return q.Source
}
