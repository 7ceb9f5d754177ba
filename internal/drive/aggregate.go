package drive

import (
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// aggregate is a driver's window-aggregate node: the query's WHERE, GROUP
// BY, windows and emission, fed rows in input order. It runs as one
// operator on the driver's goroutine (single) or as K shards joined to the
// driver by an in-memory exchange, the groups split by key and the records
// merged back into one operator's order (sharded, sharded.go). Whatever
// feeds it (the decoded events of a query, a temporal join's or an
// interval join's joined rows, a view's rows in a graph) is the same
// code on one thread or several: threading is a property of the node,
// not of the query's shape.
type aggregate interface {
	// process applies one row; key is its group key when a router
	// computed it (keyed).
	process(row []types.Value, key []byte, keyed bool) error
	// advance moves the watermark to wm if that is later. A sharded
	// node applies it at this input position but delivers its records
	// only at the next sync.
	advance(wm int64) error
	// tick is an early emission at this input position (the processing
	// clock decided it); emitEarly is one whose records are delivered
	// before it returns.
	tick() error
	emitEarly() error
	// closeOpen finalizes every open window, moving the watermark only as
	// far as their ends, and publishes what an early emission would.
	closeOpen() error
	// finish ends the input: every window finalizes.
	finish() error
	// sync delivers every record of the rows taken so far.
	sync() error
	// watermark is the watermark of the rows taken; delivered is the
	// watermark whose records have all been delivered (behind watermark
	// while a sharded node has rows in flight).
	watermark() int64
	delivered() int64
	// queued reports whether finalized windows wait, unrendered (one
	// operator with a bounded buffer).
	queued() bool
	// countCopy reports whether row, turned away before the node (late at
	// a temporal join), is a copy of an event the input dedup admitted,
	// counting it as a duplicate if so.
	countCopy(row []types.Value) bool
	stats() exec.Stats
	checkpoint(full bool, position []byte, put func(key, val []byte) error) error
	restore(key, val []byte) ([]byte, error)
	finishRestore()
	threads() int
}

// single is the aggregate as one operator on the driver's goroutine.
type single struct{ op *exec.Operator }

func (s single) process(row []types.Value, key []byte, keyed bool) error {
	if keyed {
		return s.op.ProcessKeyed(row, key)
	}
	return s.op.Process(row)
}

func (s single) advance(wm int64) error { return s.op.AdvanceWatermark(wm) }
func (s single) tick() error            { return s.op.EmitEarly() }
func (s single) emitEarly() error       { return s.op.EmitEarly() }
func (s single) finish() error          { return s.op.Finish() }
func (s single) sync() error            { return nil }
func (s single) watermark() int64       { return s.op.Watermark() }
func (s single) delivered() int64       { return s.op.Watermark() }
func (s single) queued() bool           { return s.op.Queued() }
func (s single) stats() exec.Stats      { return s.op.Stats() }
func (s single) finishRestore()         { s.op.FinishRestore() }
func (s single) threads() int           { return 1 }

func (s single) closeOpen() error {
	if err := s.op.CloseOpenWindows(); err != nil {
		return err
	}
	return s.op.EmitEarly()
}

func (s single) countCopy(row []types.Value) bool { return s.op.CountCopy(row) }

func (s single) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	return s.op.Checkpoint(full, position, put)
}

func (s single) restore(key, val []byte) ([]byte, error) { return s.op.Restore(key, val) }

// sharded is the aggregate as a parallel driver's shards. An error of the
// shards other than a skipped record's is the driver's fatal error.
type sharded struct {
	p *par
	d *Driver
}

func (s sharded) process(row []types.Value, _ []byte, _ bool) error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.p.push(row)
}

func (s sharded) advance(wm int64) error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	s.p.advance(wm)
	return nil
}

func (s sharded) tick() error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.d.parErr(s.p.flush())
}

func (s sharded) emitEarly() error {
	if err := s.tick(); err != nil {
		return err
	}
	return s.d.parErr(s.p.sync())
}

func (s sharded) closeOpen() error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.d.parErr(s.p.closeOpenWindows())
}

func (s sharded) finish() error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.d.parErr(s.p.finish())
}

func (s sharded) sync() error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.d.parErr(s.p.sync())
}

func (s sharded) watermark() int64                 { return s.p.wm }
func (s sharded) delivered() int64                 { return s.p.outWM }
func (s sharded) queued() bool                     { return false }
func (s sharded) countCopy(row []types.Value) bool { return s.p.countCopy(row) }
func (s sharded) stats() exec.Stats                { return s.p.stats() }
func (s sharded) finishRestore()                   { s.p.finishRestore() }
func (s sharded) threads() int                     { return len(s.p.shards) }

func (s sharded) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := s.d.drainFeed(); err != nil {
		return err
	}
	return s.d.parErr(s.p.checkpoint(full, position, put))
}

func (s sharded) restore(key, val []byte) ([]byte, error) { return s.p.restore(key, val) }
