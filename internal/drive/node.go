package drive

import (
	"github.com/ubiksql/ubik/internal/types"
)

// A driver runs a chain of nodes: its decode node (decode.go) turns the
// input's records into rows, and hands them to the head of the chain, a
// join (temporalJoin, join.go; intervalJoin, ijoin.go) or, without one,
// the window aggregate (single, sharded: aggregate.go). A join's output
// edge feeds the aggregate through the same interface. A source's input
// dedup (dedup.go) stands in front of the aggregate: a single one behind
// dedupAgg (dedupagg.go), a sharded one on its reader. The driver calls
// its head and never asks which kind it is, with one exception for speed:
// a single aggregate at the head takes each event by a direct call
// (Driver.solo), the interface's dispatch and its batch of one being a
// measurable share of a one-thread run. Its inputs are the head's,
// numbered: input 0's records are decoded by the driver's decode node, a
// later input's (a join's second) by the head's decode node of that input
// (input), and every call of an input (PushInput, AdvanceInput, EndInput,
// InputCounts, InputWatermark) is a call of the head on that input. What
// only one kind has (a join's counters, the aggregate's watermark and
// delivery) is a small extra interface (temporalNode, intervalNode,
// aggregate).
//
// The driver checks its own state (failed, closed) before it calls a
// node. Rows are applied under the rule of pushed events, which the host
// passes to the nodes as its room (outbox, buffer.go): only while nothing
// is queued and the room is not used up; what cannot be applied yet waits
// in the node that made it, and pump applies it. A host with Emit has
// room for everything; the nodes obey the room alike for both hosts.
type node interface {
	// admit refuses a push on input that the node cannot take now: an
	// input it does not have or that has ended, a full join buffer, or
	// rows that still wait for the host's room (ErrBackpressure, after
	// the queued ones were applied as far as the room goes).
	admit(input int) error
	// push applies the batch's rows of input in order. It stops at the
	// first row that is not applied cleanly and returns how many rows it
	// took (that one included) with its error.
	push(input int, b *rowBatch) (int, error)
	// advance moves input's watermark to wm if that is later.
	advance(input int, wm int64) error
	// input is the decode node of input i > 0, whose records the host
	// decodes and checks into it before push (nil: the node has no such
	// input; input 0's is the host's own decode node).
	input(i int) *joinInput
	// alone reports whether input ends alone (a join's second input, an
	// interval join's either); end ends it: no row of it will come.
	// ended reports whether it has.
	alone(input int) bool
	end(input int) error
	ended(input int) bool
	// inputWatermark is input's watermark (math.MinInt64 before its
	// first row, or for an input the node does not have).
	inputWatermark(input int) int64
	// setLateFloor makes input's rows pushed next late behind floor too
	// (a temporal join's table: PushBehind; math.MinInt64: none); a node
	// without such a floor ignores it.
	setLateFloor(input int, floor int64)
	// tick is an early emission at this input position (the processing
	// clock decided it).
	tick() error
	// pump applies what waits and the node may hand on now (the
	// aggregate: renders its queued records into the room).
	pump() error
	// queued reports whether work waits in the node or after it.
	queued() bool
	// closeOpen releases what an input consumed to its end would, then
	// finalizes every open window, moving the watermark only as far as
	// their ends (CloseOpenWindows).
	closeOpen() error
	// finish ends every input: what the node holds goes on, and the
	// windows finalize (Close).
	finish() error
	// checkpoint writes the node's entries, then the next node's (so the
	// aggregate's meta entry, with the host's position, stays last);
	// restore takes one entry, the node's or the next one's, returning
	// the host's position from the meta entry; finishRestore ends a
	// restore.
	checkpoint(full bool, position []byte, put func(key, val []byte) error) error
	restore(key, val []byte) ([]byte, error)
	finishRestore() error
	// counts are what the node adds to input's counters: all of a join's
	// second input's; of the first, whose records the driver counts,
	// EvalErrors (rows rejected by a join key evaluation error) and Late
	// (rows late at the join). The aggregate's are in its stats.
	counts(input int) Counts
}

// rowBatch is a batch of rows on one input of a node.
type rowBatch struct {
	rows [][]types.Value
	// raws are the records the rows came from, for the late hooks (nil:
	// none; a nil record: a typed row).
	raws [][]byte
	// keys are the rows' group keys when a router computed them (keyed).
	keys  [][]byte
	keyed bool
	// owned: the rows are the caller's to give away (Driver.pushViewRow).
	owned bool
}

// raw is row i's record (nil for a typed or a joined row).
func (b *rowBatch) raw(i int) []byte {
	if b.raws == nil {
		return nil
	}
	return b.raws[i]
}

// one is a batch of one row, reused call after call: the driver's pushes
// and a join's joined rows go one at a time, without an allocation.
type one struct {
	b   rowBatch
	row [1][]types.Value
	raw [1][]byte
	key [1][]byte
}

// set makes the batch row (raw its record; key its group key if keyed).
func (o *one) set(row []types.Value, raw, key []byte, keyed bool) *rowBatch {
	o.row[0], o.raw[0], o.key[0] = row, raw, key
	o.b.rows, o.b.raws, o.b.keyed, o.b.owned = o.row[:], o.raw[:], keyed, false
	if keyed {
		o.b.keys = o.key[:]
	} else {
		o.b.keys = nil
	}
	return &o.b
}
