package exec

import (
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

// The hash is not a field of the group, which it would take past 64 bytes
// (groups.go). A query that publishes records before its finals (EMIT
// EARLY, EMIT CHANGES) keeps it in a word of its own: a bucket's chunk
// keeps its groups' hash words after all their aggregate words
// (bucket.chunkWords), a group restored before its bucket exists after its
// own aggregate words; group.hashOff finds it either way. A session
// publishes only when it closes, and a query that publishes only finals
// never compares values: neither keeps a hash word. A group restored from
// a checkpoint that carries a hash anyway (written by the same query with
// another EMIT clause) keeps it in a side table, so the group's next
// checkpoint entry carries it on as the entry was; so does every group of
// a query whose aggregate words are too many for hashOff.

// keepsHashWord reports whether q's groups, of stride aggregate words,
// keep a value hash word: q may publish a record that is not final, and
// the word's offset from a chunk's first group fits group.hashOff.
func keepsHashWord(q *plan.Query, stride int) bool {
	return q.Emit.Mode != plan.EmitFinal && (q.Window == nil || q.Window.Kind != plan.Session) &&
		chunkSize*stride < 1<<16
}

// lastValue returns the hash of the last value published for g (valid
// when g has flag published).
func (o *Operator) lastValue(g *group) uint64 {
	if o.hashWord {
		return *g.hashWord()
	}
	return o.sideHashes[g]
}

// setLastValue records h as the hash of the last value published for g.
func (o *Operator) setLastValue(g *group, h uint64) {
	if o.hashWord {
		*g.hashWord() = h
		return
	}
	if o.sideHashes == nil {
		o.sideHashes = make(map[*group]uint64)
	}
	o.sideHashes[g] = h
}
