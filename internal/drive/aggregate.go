package drive

import (
	"math"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// aggregate is a driver's window-aggregate node (node.go): the query's
// WHERE, GROUP BY, windows and emission, fed rows in input order. It runs
// as one operator on the driver's goroutine (single) or as K shards
// joined to the driver by an in-memory exchange, the groups split by key
// and the records merged back into one operator's order (sharded,
// sharded.go). Whatever feeds it (the decoded events of a query, a
// temporal join's or an interval join's joined rows, a view's rows in a
// graph) is the same code on one thread or several: threading is a
// property of the node, not of the query's shape. Beyond the node
// interface it has what only the last node of a chain has: the
// watermark, and the delivery of its records.
type aggregate interface {
	node
	// emitEarly is an early emission whose records are delivered before
	// it returns.
	emitEarly() error
	// sync delivers every record of the rows taken so far.
	sync() error
	// watermark is the watermark of the rows taken; delivered is the
	// watermark whose records have all been delivered (behind watermark
	// while a sharded node has rows in flight).
	watermark() int64
	delivered() int64
	stats() exec.Stats
	threads() int
	// mark ends a host's call, setStep names the step of the calls that
	// follow, outStep is the step of what is being delivered, and
	// pendingStep the earliest step not all delivered (sharded: batch.go).
	mark()
	setStep(s uint64)
	outStep() uint64
	pendingStep() uint64
}

// aggIn is how an aggregate node takes its rows. At the head of the chain
// they are the driver's events: each is counted as applied, an
// evaluation error becomes the event's, and the processing clock is
// looked at (Driver.applied). Behind a join they are joined rows, whose
// errors the join judges.
type aggIn struct {
	d    *Driver
	head bool
}

// take readies the aggregate for row i of b.
func (a aggIn) take(b *rowBatch, i int) {
	d := a.d
	d.raw = b.raw(i)
	if a.head {
		d.n.Applied++
	}
}

// taken is the outcome of a row the aggregate took.
func (a aggIn) taken(err error) error {
	if !a.head {
		return err
	}
	return a.d.applied(err)
}

// admit refuses a push on an input the aggregate does not have.
func (a aggIn) admit(input int) error {
	if input != 0 {
		return a.d.errNoInput()
	}
	return nil
}

// The aggregate has one input, which ends with the host (finish).
func (a aggIn) input(int) *joinInput     { return nil }
func (a aggIn) alone(int) bool           { return false }
func (a aggIn) ended(int) bool           { return false }
func (a aggIn) inputWatermark(int) int64 { return math.MinInt64 }
func (a aggIn) setLateFloor(int, int64)  {}
func (a aggIn) end(input int) error {
	if input == 0 {
		return errNoEndFirst(a.d.q)
	}
	return a.d.errNoInput()
}

func (a aggIn) counts(int) Counts   { return Counts{} }
func (a aggIn) mark()               {}
func (a aggIn) setStep(uint64)      {}
func (a aggIn) pendingStep() uint64 { return math.MaxUint64 }

// single is the aggregate as one operator on the driver's goroutine. It
// renders into the host's room (outbox): what does not fit waits in the
// operator's queue, and a push is refused while anything waits.
type single struct {
	aggIn
	op  *exec.Operator
	out *outbox
}

// setRoom tells the operator how many records it may render now.
func (s *single) setRoom() { s.op.SetRoom(s.out.room()) }

// admit refuses a push while records of finalized windows wait for room,
// rendering them into the room first.
func (s *single) admit(input int) error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	if input != 0 || s.op.Queued() || s.out.room() <= 0 {
		return s.admitSlow(input)
	}
	return nil
}

// admitSlow is admit when something may refuse the push: kept apart so
// admit, called for every event, stays small enough to inline.
func (s *single) admitSlow(input int) error {
	if err := s.aggIn.admit(input); err != nil {
		return err
	}
	if err := s.pump(); err != nil {
		return err
	}
	if s.op.Queued() || s.out.room() <= 0 {
		return ErrBackpressure
	}
	return nil
}

// pump renders queued records into the room. A record skipped by an
// evaluation error is counted by the operator; it fails a Strict driver.
func (s *single) pump() error {
	if !s.op.Queued() {
		return nil
	}
	s.setRoom()
	err := s.op.Drain()
	if err == nil || Skipped(err) && !s.d.strict {
		return nil
	}
	s.d.fatal = err
	return err
}

func (s *single) push(_ int, b *rowBatch) (int, error) {
	for i, row := range b.rows {
		var key []byte
		if b.keyed {
			key = b.keys[i]
		}
		if err := s.pushOne(row, b.raw(i), key, b.keyed); err != nil {
			return i + 1, err
		}
	}
	return len(b.rows), nil
}

// pushOne applies one row (raw its record; key its group key if keyed).
// A driver whose head is a single aggregate calls it for each event
// (Driver.solo), without a batch of one.
func (s *single) pushOne(row []types.Value, raw, key []byte, keyed bool) error {
	s.setRoom()
	d := s.d
	d.raw = raw
	if s.head {
		d.n.Applied++
	}
	var err error
	if keyed {
		err = s.op.ProcessKeyed(row, key)
	} else {
		err = s.op.Process(row)
	}
	return s.taken(err)
}

func (s *single) advance(_ int, wm int64) error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	s.setRoom()
	return s.op.AdvanceWatermark(wm)
}

func (s *single) tick() error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	s.setRoom()
	return s.op.EmitEarly()
}

func (s *single) finish() error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	s.setRoom()
	return s.op.Finish()
}

func (s *single) closeOpen() error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	s.setRoom()
	if err := s.op.CloseOpenWindows(); err != nil {
		return err
	}
	return s.op.EmitEarly()
}

func (s *single) emitEarly() error     { return s.tick() }
func (s *single) sync() error          { return s.d.settleFed() }
func (s *single) watermark() int64     { _ = s.d.settleFed(); return s.op.Watermark() }
func (s *single) delivered() int64     { _ = s.d.settleFed(); return s.op.Watermark() }
func (s *single) queued() bool         { return s.op.Queued() }
func (s *single) stats() exec.Stats    { return s.op.Stats() }
func (s *single) finishRestore() error { s.op.FinishRestore(); return nil }
func (s *single) threads() int         { return 1 }
func (s *single) outStep() uint64      { return 0 }

func (s *single) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := s.d.settleFed(); err != nil {
		return err
	}
	return s.op.Checkpoint(full, position, put)
}

func (s *single) restore(key, val []byte) ([]byte, error) { return s.op.Restore(key, val) }

// sharded is the aggregate as a parallel driver's shards. An error of the
// shards other than a skipped record's is the driver's fatal error. When
// it decodes its own input in blocks (feed: its blockFeed), every call
// first sequences the records fed so far.
type sharded struct {
	aggIn
	p     *par
	out   *parOut // the merge's callbacks, which p holds only weakly
	feed  feeder  // the driver's feeder: its blockFeed, or direct
	sk    skipState
	holds bool // the outcomes of events fed one by one wait for the records before them (shardskip.go)
}

// parErr makes an error of the shards (other than a skipped record's)
// the driver's fatal error.
func (s *sharded) parErr(err error) error {
	if err != nil && !Skipped(err) {
		s.d.fatal = err
	}
	return err
}

func (s *sharded) push(_ int, b *rowBatch) (int, error) {
	for i, row := range b.rows {
		s.take(b, i)
		err := s.feed.drain()
		op0 := s.p.op + 1
		if err == nil {
			err = s.p.push(row)
		}
		err = s.taken(err)
		s.called(op0)
		if err != nil {
			return i + 1, s.callEnd(err, false)
		}
	}
	// Behind a join the join's push returns an earlier push's error
	// (joinEnv.pushed): a joined row is not the host's event.
	return len(b.rows), s.callEnd(nil, s.head)
}

func (s *sharded) advance(_ int, wm int64) error {
	if err := s.feed.drain(); err != nil {
		return err
	}
	s.p.advance(wm)
	return nil
}

func (s *sharded) tick() error {
	if err := s.feed.drain(); err != nil {
		return err
	}
	return s.parErr(s.p.flush())
}

func (s *sharded) emitEarly() error {
	if err := s.tick(); err != nil {
		return s.callEnd(err, false)
	}
	return s.callEnd(s.parErr(s.p.sync()), false)
}

func (s *sharded) closeOpen() error {
	if err := s.feed.drain(); err != nil {
		return s.callEnd(err, false)
	}
	return s.callEnd(s.parErr(s.p.closeOpenWindows()), false)
}

func (s *sharded) finish() error {
	if err := s.feed.drain(); err != nil {
		return err
	}
	return s.callEnd(s.parErr(s.p.finish()), false)
}

func (s *sharded) sync() error {
	if err := s.feed.drain(); err != nil {
		return s.callEnd(err, false)
	}
	return s.callEnd(s.parErr(s.p.sync()), false)
}

func (s *sharded) watermark() int64     { return s.p.wm }
func (s *sharded) delivered() int64     { return s.p.outWM }
func (s *sharded) queued() bool         { return false }
func (s *sharded) pump() error          { return nil }
func (s *sharded) stats() exec.Stats    { return s.p.stats() }
func (s *sharded) finishRestore() error { s.p.finishRestore(); return nil }
func (s *sharded) threads() int         { return len(s.p.shards) + 1 } // and the reader
func (s *sharded) mark()                { s.p.mark() }
func (s *sharded) setStep(step uint64)  { s.p.step = step }
func (s *sharded) outStep() uint64      { return s.p.outStep }
func (s *sharded) pendingStep() uint64  { return s.p.pendingStep() }

func (s *sharded) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := s.feed.drain(); err != nil {
		return err
	}
	return s.parErr(s.p.checkpoint(full, position, put))
}

func (s *sharded) restore(key, val []byte) ([]byte, error) { return s.p.restore(key, val) }

var (
	_ aggregate = (*single)(nil)
	_ aggregate = (*sharded)(nil)
)
