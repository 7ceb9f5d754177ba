package exec

import "github.com/ubiksql/ubik/internal/types"

// CountCopy reports whether row, an event its host turns away before it
// reaches the operator (an event late at a temporal join: the stream
// columns lead the joined row, so the dedup column and time read the
// same), is a later copy of an event the input dedup already admitted
// within its horizon, and counts it as a duplicate if so. A copy is a
// duplicate wherever it is turned away, as in a query without a join,
// whose dedup runs before anything else; the host then does not count it
// as late.
func (o *Operator) CountCopy(row []types.Value) bool {
	d := o.dedup
	if d == nil {
		return false
	}
	v := row[d.col]
	ts := row[o.q.Source.TimeCol]
	if v.Null || ts.Null || satAdd(ts.I, d.within) <= o.watermark {
		return false
	}
	d.keyBuf = appendKeyBytes(d.keyBuf[:0], v)
	if _, ok := d.seen[string(d.keyBuf)]; !ok {
		return false
	}
	o.stats.Duplicates++
	return true
}

// IsCopy is Operator.CountCopy for a host that runs the input dedup on
// its own (a sharded aggregate): whether row is a later copy of a key
// admitted within the horizon, watermark the dedup's. It only looks.
func (x *Dedup) IsCopy(row []types.Value, watermark int64) bool {
	d := x.d
	v, ts := row[d.col], row[x.tc]
	if v.Null || ts.Null || satAdd(ts.I, d.within) <= watermark {
		return false
	}
	d.keyBuf = appendDistinctCell(d.keyBuf[:0], v)
	_, ok := d.seen[string(d.keyBuf)]
	return ok
}
