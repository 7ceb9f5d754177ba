package drive

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ubiksql/ubik/internal/exec"
)

// A driver's counters, checkpoint and restore: its aggregate's entries,
// its join's, and the meta entry (with the host's position) last.

// Counts are a driver's input counters.
type Counts struct {
	Records    int64 // input records handed over: events and skipped CSV header records
	Events     int64 // events (records that are not header records)
	Malformed  int64 // events that could not be decoded
	Headers    int64 // CSV header records skipped
	Applied    int64 // events handed to the operator
	EvalErrors int64 // events rejected by an evaluation error, and records skipped by one
	Late       int64 // events for a window already final
}

// Stats are the operator's counters. A parallel driver's are the shards'
// as of the last batch merged (exact after a call that delivers
// everything); its peaks are the sums of the shards' peaks, its latency
// quantiles the largest shard's.
func (d *Driver) Stats() exec.Stats {
	_ = d.settleFed() // an error is fatal: the next call returns it
	s := d.agg.stats()
	if t, ok := d.first.(*temporalJoin); ok {
		t.addDedupStats(&s) // a temporal join's stream is deduplicated before the join
	}
	return s
}

// Counts returns the input counters.
func (d *Driver) Counts() Counts {
	s := d.Stats() // first: it sequences the records fed
	c := d.n
	j := d.first.counts(0)
	c.EvalErrors, c.Late = s.EvalErrors+j.EvalErrors, s.Late+j.Late
	return c
}

// TakeCounts returns what the counters gained since the previous call: a
// host that adds up several drivers (Kafka, one per partition) adds these.
func (d *Driver) TakeCounts() Counts {
	c := d.Counts()
	delta := c.minus(d.taken)
	d.taken = c
	return delta
}

// Checkpoint writes the state entries through put: all of them when full
// is set, else only those changed since the previous checkpoint (a nil
// value deletes one). position is the host's input position, stored in
// the meta entry (which comes last) and given back by Restore. When
// buffering it first renders queued records into the room, and returns
// ErrBackpressure, writing nothing, while work is still queued.
func (d *Driver) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := d.feeder.drain(); err != nil {
		return err
	}
	if err := d.agg.pump(); err != nil {
		return err
	}
	if d.counts {
		b := binary.AppendVarint(nil, d.n.Events)
		b = binary.AppendVarint(b, d.n.Malformed)
		position = append(b, position...)
	}
	// A join's entries first, so the meta entry stays last; nothing is
	// written while work is queued.
	err := d.first.checkpoint(full, position, put)
	if errors.Is(err, exec.ErrQueued) {
		return checkpointWaits()
	}
	return err
}

// Restore loads one checkpoint entry into a driver that has applied
// nothing yet. For the meta entry (key exec.MetaKey) it returns the
// host's position given to Checkpoint. Call FinishRestore after the last.
func (d *Driver) Restore(key, val []byte) (position []byte, err error) {
	pos, err := d.first.restore(key, val)
	if err != nil || pos == nil || !d.counts {
		return pos, err
	}
	events, n := binary.Varint(pos)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad position", exec.ErrBadState)
	}
	bad, m := binary.Varint(pos[n:])
	if m <= 0 {
		return nil, fmt.Errorf("%w: bad position", exec.ErrBadState)
	}
	if events < 0 || bad < 0 {
		return nil, fmt.Errorf("%w: meta entry: a negative count of events (%d) or malformed ones (%d)", exec.ErrBadState, events, bad)
	}
	d.n.Records, d.n.Events, d.n.Malformed = events, events, bad
	return pos[n+m:], nil
}

// FinishRestore completes a restore: the driver continues where the
// checkpoint left it (revisions continue, no window finalizes twice).
// What the checkpoint's counters held is not news to TakeCounts. A
// restored state that cannot be carried over is refused here
// (ErrBadState): what it needs of its entries is known only once all of
// them came, in any order.
func (d *Driver) FinishRestore() error {
	if err := d.first.finishRestore(); err != nil {
		return err
	}
	d.taken = d.Counts()
	return nil
}
