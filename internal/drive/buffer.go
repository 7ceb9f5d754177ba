package drive

import (
	"math"

	"github.com/ubiksql/ubik/changelog"
)

// outbox is where a driver's records go, and the rule of pushed events
// the host passes to the nodes: the room, how many more records the
// aggregate may render now. A host that pulls its records (no
// Config.Emit) bounds it: the operator renders into the buffer's room,
// what it cannot render yet waits in its queue, and Next and Refill hand
// the records over. A host with Emit takes every record as it is
// rendered: its room never ends, so nothing ever waits for it. The nodes
// obey the room alike in both; none asks which host it has.
type outbox struct {
	max     int // MaxPending, or math.MaxInt with Emit
	pending []changelog.Record
	head    int
}

func newOutbox(cfg Config) outbox {
	if cfg.Emit != nil {
		return outbox{max: math.MaxInt}
	}
	return outbox{max: cfg.MaxPending}
}

// add is the operator's Emit of a pulling host.
func (o *outbox) add(r *changelog.Record) error {
	o.pending = append(o.pending, r.Clone())
	return nil
}

// room is how many more records the buffer can hold.
func (o *outbox) room() int { return o.max - (len(o.pending) - o.head) }

// Next pops the next buffered record; it renders nothing (see Refill).
func (d *Driver) Next() (rec changelog.Record, ok bool) {
	o := &d.out
	if o.head >= len(o.pending) {
		return changelog.Record{}, false
	}
	rec = o.pending[o.head]
	o.pending[o.head] = changelog.Record{}
	o.head++
	if o.head == len(o.pending) {
		o.pending, o.head = o.pending[:0], 0
	}
	return rec, true
}

// Refill renders queued records into the buffer's room and reports
// whether any record is buffered.
func (d *Driver) Refill() (bool, error) {
	// A join's waiting rows are applied into the room that is left.
	err := d.agg.pump()
	if err == nil {
		err = d.first.pump()
	}
	if err == nil {
		err = d.agg.pump()
	}
	return d.out.head < len(d.out.pending), err
}

// Pending is the number of buffered records.
func (d *Driver) Pending() int { return len(d.out.pending) - d.out.head }

// Queued reports whether finalized windows or flushes wait, unrendered.
func (d *Driver) Queued() bool { return d.first.queued() }
