package exec

import (
	"strings"

	metro "github.com/dgryski/go-metro"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A changelog carries changes: a record that is not final is published only
// when its value bytes differ from the last value published for its
// (group, window). Each group keeps a 64-bit hash of that value, not the
// bytes: 8 bytes a group whatever the value's width, and two different
// values hash alike with probability 2^-64 per comparison (a billion
// changes a second would take centuries to suppress one wrongly). The hash
// is a fixed function (MetroHash64, fixed seed), so a checkpoint carries it
// across a restart.

// valueSeed seeds the value hash. It must never change: checkpoints carry
// hashes made with it.
const valueSeed = 0x75_62_69_6b // "ubik"

// valueHash hashes the value just rendered (o.valOut). When a SELECT column
// may read REVISION(), which changes with every record, the value is
// rendered again with the revision fixed at 1 and that is hashed: the
// comparison is of everything the value says besides its revision. If that
// second rendering fails to evaluate, the real value is hashed (it differs
// from every earlier one by its revision, so the record is published).
func (o *Operator) valueHash(row []types.Value) uint64 {
	if !o.revDep {
		return metro.Hash64(o.valOut, valueSeed)
	}
	q := o.q
	slot := q.RevisionSlot()
	saved := row[slot]
	row[slot] = types.Big(1)
	defer func() { row[slot] = saved }()
	b := append(o.revBuf[:0], '{')
	for i := range q.Select {
		v := o.outRow[i]
		switch {
		case o.selKey[i] >= 0:
			v = row[o.selKey[i]]
		case o.selRef[i] >= 0:
			v = row[o.selRef[i]]
		default:
			var err error
			if v, err = q.Select[i].Expr.Eval(row); err != nil {
				return metro.Hash64(o.valOut, valueSeed)
			}
		}
		b = append(b, o.prefixes[i]...)
		b = changelog.AppendCell(b, v)
	}
	o.revBuf = append(b, '}')
	return metro.Hash64(o.revBuf, valueSeed)
}

// readsRevision reports whether a SELECT column of q may read REVISION().
// It looks for the function in the columns' rendering: a false positive
// (the text in a string literal) costs a second rendering per record, never
// a suppressed change.
func readsRevision(q *plan.Query) bool {
	for _, c := range q.Select {
		if strings.Contains(strings.ToLower(c.Expr.String()), "revision()") {
			return true
		}
	}
	return false
}
