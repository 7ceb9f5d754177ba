package drive

import "github.com/ubiksql/ubik/changelog"

// The bounded buffer of a driver whose host pulls its records (no
// Config.Emit): the operator renders into the buffer's room, and Next and
// Refill hand the records over.

func (d *Driver) onRecord(r *changelog.Record) error {
	d.pending = append(d.pending, r.Clone())
	return nil
}

// room is how many more records the buffer can hold.
func (d *Driver) room() int { return d.max - (len(d.pending) - d.head) }

// setRoom tells the operator how many records it may render now: all of
// them with a callback (the operator's default), the buffer's room without.
func (d *Driver) setRoom() {
	if d.buffered {
		d.op.SetRoom(d.room())
	}
}

// drain renders queued records into the buffer's room. A record skipped
// by an evaluation error is counted by the operator; it fails a Strict
// driver.
func (d *Driver) drain() error {
	if d.op == nil || !d.op.Queued() {
		return nil
	}
	d.op.SetRoom(d.room())
	err := d.op.Drain()
	if err == nil || Skipped(err) && !d.strict {
		return nil
	}
	d.fatal = err
	return err
}

// Next pops the next buffered record; it renders nothing (see Refill).
func (d *Driver) Next() (rec changelog.Record, ok bool) {
	if d.head >= len(d.pending) {
		return changelog.Record{}, false
	}
	rec = d.pending[d.head]
	d.pending[d.head] = changelog.Record{}
	d.head++
	if d.head == len(d.pending) {
		d.pending, d.head = d.pending[:0], 0
	}
	return rec, true
}

// Refill renders queued records into the buffer's room and reports
// whether any record is buffered.
func (d *Driver) Refill() (bool, error) {
	// A join's waiting rows are applied into the room that is left.
	err := d.drain()
	if err == nil {
		err = d.first.pump()
	}
	if err == nil {
		err = d.drain()
	}
	return d.head < len(d.pending), err
}

// Pending is the number of buffered records.
func (d *Driver) Pending() int { return len(d.pending) - d.head }

// Queued reports whether finalized windows or flushes wait, unrendered.
func (d *Driver) Queued() bool { return d.first.queued() }
