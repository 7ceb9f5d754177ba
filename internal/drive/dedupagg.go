package drive

import (
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// dedupAgg is the dedup node in front of a single aggregate (the chain
// decode -> dedup -> aggregate; a temporal join's query has it in front
// of the join instead, dedupjoin.go): it admits each row at the
// operator's watermark, hands the survivors on and tells the operator of
// the dropped ones (exec.Operator.Skip), so Rows, the watermark and
// StateBytes read as if the dedup were the operator's first step. Its
// entries go between the operator's groups and its meta entry, whose
// Duplicates and DedupLate it adds (dedupNode.metaPut): the layout of the
// operator that kept the keys itself.
type dedupAgg struct {
	*single
	dd *dedupNode
}

// dedupFront returns the dedup node of q's source for the single
// aggregate ecfg configures, nil without a dedup_key: the node forgets
// keys as the operator's watermark moves (ecfg.OnAdvance) and reports
// dedup-late events where the operator reports late ones (ecfg.Late).
func dedupFront(q *plan.Query, ecfg *exec.Config) *dedupNode {
	dd := newAggDedup(q, ecfg.Late)
	if dd != nil {
		ecfg.OnAdvance = dd.advance
	}
	return dd
}

// front is s behind dd, s itself without a dedup.
func (dd *dedupNode) front(s *single) aggregate {
	if dd == nil {
		return s
	}
	return &dedupAgg{single: s, dd: dd}
}

func (x *dedupAgg) push(_ int, b *rowBatch) (int, error) {
	for i, row := range b.rows {
		x.setRoom() // the operator renders into the host's room, as single.push has it
		x.take(b, i)
		if err := x.taken(x.apply(b, i, row)); err != nil {
			return i + 1, err
		}
	}
	return len(b.rows), nil
}

// apply admits row i of b and applies it, or counts it as skipped.
func (x *dedupAgg) apply(b *rowBatch, i int, row []types.Value) error {
	op := x.op
	if err := op.Taking(); err != nil {
		return err // not admitted: it comes again
	}
	before := x.dd.st.Bytes()
	v := x.dd.admit(row, b.raw(i), op.Watermark())
	op.AddStateBytes(x.dd.st.Bytes() - before) // the dedup keys are live state too
	switch {
	case v == dedupCopy:
		return op.Skip(row, true)
	case v == dedupBeyond:
		return op.Skip(row, false)
	case b.keyed:
		return op.ProcessKeyed(row, b.keys[i])
	}
	return op.Process(row)
}

func (x *dedupAgg) stats() exec.Stats {
	s := x.single.stats()
	x.dd.addStats(&s)
	return s
}

func (x *dedupAgg) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	return x.single.checkpoint(full, position, x.dd.metaPut(full, put))
}

// metaPut is put with the node's entries written before the meta entry,
// whose counters it adds.
func (dd *dedupNode) metaPut(full bool, put func(key, val []byte) error) func(key, val []byte) error {
	return func(k, v []byte) error {
		if string(k) != exec.MetaKey {
			return put(k, v)
		}
		if err := dd.checkpoint(full, put); err != nil {
			return err
		}
		m, err := exec.ParseMeta(v)
		if err != nil {
			return err
		}
		dd.addMeta(&m)
		return put(k, exec.AppendMeta(nil, m))
	}
}

func (x *dedupAgg) restore(key, val []byte) ([]byte, error) {
	x.dd.st.Track() // the store holds the node's entries
	if !x.dd.isEntry(key) {
		return x.single.restore(key, val)
	}
	before := x.dd.st.Bytes()
	err := x.dd.restore(key, val)
	x.op.AddStateBytes(x.dd.st.Bytes() - before)
	return nil, err
}

var _ aggregate = (*dedupAgg)(nil)
