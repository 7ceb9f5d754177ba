package drive

import (
	"errors"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// A driver's per-event path: an input record decoded, admitted and
// applied to the head of its chain, and the outcome of an event the
// aggregate took.

// decode reads one input record. A nil row and a nil error is a CSV
// header record (counted, not an event). A malformed event is counted and
// returned as an *EventError; a header that does not fit the source is
// fatal.
func (d *Driver) decode(raw []byte) ([]types.Value, error) {
	row, err := d.in.decode(raw)
	if err == nil {
		return row, nil
	}
	if fatalInput(err) {
		// The input does not fit the source: stop, as for any fatal error.
		d.fatal = err
		return nil, err
	}
	return nil, d.eventErr(err)
}

// Mark returns the last decoded event's time less the source's watermark
// delay: what that event proposes as the watermark of its input partition.
func (d *Driver) Mark() (int64, bool) { return d.in.mark, d.in.marked }

func (d *Driver) eventErr(err error) error {
	e := &EventError{Seq: d.n.Events, Err: err}
	if d.strict {
		d.fatal = e
	}
	return e
}

// admit refuses a push on input of a driver whose head has no such input,
// a failed or closed driver and, when buffering, while records of
// finalized windows wait: queued work is rendered into the room first,
// and a push is taken only when nothing waits before it.
func (d *Driver) admit(input int) error {
	if input > 0 && d.first.input(input) == nil {
		return d.errNoInput()
	}
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed {
		return ErrClosed
	}
	if d.solo != nil {
		return d.solo.admit(input)
	}
	return d.first.admit(input)
}

// Push decodes one input record and applies it. A malformed event or one
// that fails to evaluate returns an *EventError (counted) and the driver
// goes on, unless Strict. ErrBackpressure means nothing was done, not even
// the decoding: take records with Next and push the same record again.
func (d *Driver) Push(raw []byte) error { return d.push(raw, nil, false) }

// PushKeyed is Push for a record a router keyed: key is its canonical
// group key (Route's result), so the GROUP BY is not evaluated again.
func (d *Driver) PushKeyed(raw, key []byte) error { return d.push(raw, key, true) }

func (d *Driver) push(raw, key []byte, keyed bool) error {
	if err := d.admit(0); err != nil {
		return err
	}
	row, err := d.decode(raw)
	if err != nil || row == nil {
		return err
	}
	return d.apply(row, raw, key, keyed)
}

// apply hands one decoded event (raw its record, nil for a typed row) to
// the head of the chain.
func (d *Driver) apply(row []types.Value, raw, key []byte, keyed bool) error {
	if d.solo != nil {
		return d.solo.pushOne(row, raw, key, keyed)
	}
	b := d.one.set(row, raw, key, keyed)
	b.owned = d.ownRow
	_, err := d.first.push(0, b)
	return err
}

// applied is the outcome of an event the aggregate took at the head of the
// chain (aggIn): an evaluation error is the event's (fatal when strict),
// any other is fatal; every few hundred events the processing clock is
// looked at for an early emission.
func (d *Driver) applied(err error) error {
	if err != nil {
		var ee *exec.EvalError
		if !errors.As(err, &ee) {
			d.fatal = err
			return err
		}
		// The event counts toward the next look at the clock, as any
		// applied event does, so where ticks fall never depends on
		// which events fail to evaluate (a parallel driver's reader sees
		// only its own checks fail).
		err = d.eventErr(err)
		if d.strict {
			return err
		}
	}
	if d.every > 0 && !d.hostTicks {
		d.sinceTick++
		if d.sinceTick >= tickEvery {
			d.sinceTick = 0
			if terr := d.tick(); terr != nil {
				return terr
			}
		}
	}
	return err
}
