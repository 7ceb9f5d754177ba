package kafka

import (
	"bytes"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/types"
)

// A stage's reports (OnLate, OnViewLate, OnBadEvent) wait for its
// transaction's end, as its counts do (txnCounts): handed over if it
// commits, dropped if it aborts, since the stage then reads the same
// records again and reports them again. A report copies what the hook
// may keep only during the call. They are at most one per record the
// transaction read (per view a late event is late at), so they are bounded
// as the transaction is (Options.CommitRecords, CommitInterval).

// report queues f, run when the open transaction commits.
func (t *txn) report(f func()) { t.reports = append(t.reports, f) }

// lateHook is late, its calls queued in t; nil stays nil.
func (t *txn) lateHook(late func(*drive.LateEvent)) func(*drive.LateEvent) {
	if late == nil {
		return nil
	}
	return func(ev *drive.LateEvent) {
		c := copyLate(ev)
		t.report(func() { late(c) })
	}
}

// viewLateHook is lateHook for a hook that names the view.
func (t *txn) viewLateHook(late func(string, *drive.LateEvent)) func(string, *drive.LateEvent) {
	if late == nil {
		return nil
	}
	return func(name string, ev *drive.LateEvent) {
		c := copyLate(ev)
		t.report(func() { late(name, c) })
	}
}

// badEvent queues a bad event for p's OnBadEvent.
func (t *txn) badEvent(p *Pipeline, e BadEvent) {
	if p.opts.OnBadEvent != nil {
		t.report(func() { p.opts.OnBadEvent(&e) })
	}
}

// copyLate copies ev and what it points into (the decoder's and the
// operator's buffers, reused by the next record).
func copyLate(ev *drive.LateEvent) *drive.LateEvent {
	c := *ev
	c.Row, c.Key, c.Event = types.CloneRow(ev.Row), types.CloneRow(ev.Key), bytes.Clone(ev.Event)
	return &c
}

// deliver runs the reports of a committed transaction in order.
func (t *txn) deliver(committed bool) {
	if committed {
		for _, f := range t.reports {
			f()
		}
	}
	clear(t.reports)
	t.reports = t.reports[:0]
}
