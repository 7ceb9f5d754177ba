package kafka

import (
	"context"
	"fmt"
)

// Running a join of two views (viewjoin.go builds it): preparing its
// sides and its join stage's inputs, running its plan's stages, adding up
// its counters.

// prepareViewJoin prepares the sides (each as a query of its own: its
// sink, internal topics, binding, end offsets), then the join stage's
// source if it decodes one, its sinks, internal topics and binding, and
// the segments after it.
func (p *Pipeline) prepareViewJoin(ctx context.Context, adm *admClient) error {
	for _, sd := range p.vj.sides {
		if !sd.owned {
			continue // its join prepared it
		}
		if err := sd.p.prepareAll(ctx, adm); err != nil {
			return fmt.Errorf("view %s: %w", sd.p.q.Name, err)
		}
	}
	if !p.readsRows() {
		if err := p.describeSource(ctx, adm); err != nil {
			return err
		}
	}
	for _, sd := range p.vj.sides {
		p.nParts = max(p.nParts, sd.p.nParts)
	}
	if p.opts.RepartitionPartitions > 0 {
		p.nParts = p.opts.RepartitionPartitions
	}
	if p.readsRows() {
		p.nSource = p.nParts
	}
	if err := p.prepareOwn(ctx, adm, p.views); err != nil {
		return err
	}
	if !p.readsRows() {
		if err := p.prepareInputs(ctx, adm); err != nil {
			return err
		}
	}
	for _, sd := range p.vj.sides {
		sd.fwd.parts = p.nParts
	}
	p.bindInputs()
	p.bindAfter()
	return ensureSegmentTopics(ctx, adm, p.after, p.nParts, p.log)
}

// sideEvents counts a second stream (the right input of an interval
// join of two streams, read by its table stage) as events: a join of two
// views reads no versioned table (CheckQuery), so each of its inputs is
// a declared stream, as a file run counts it.
func sideEvents(s Stats) Stats {
	s.EventsIn += s.TableRows
	s.Malformed += s.TableMalformed
	s.Late += s.TableLate
	s.TableRows, s.TableMalformed, s.TableLate = 0, 0, 0
	return s
}

// viewJoinAdvice says what makes a join of two views hold many rows.
const viewJoinAdvice = "a row waits until the other view's watermark passes its window, so one view far behind the other (a source partition that gets no events holds its view's watermark back until its idle timeout) makes the other's rows wait; produce to every partition, shorten idle_timeout, run with more partitions, or raise the bound (ubik run --join-buffer, Options.JoinBuffer)"

// heldRows holds a join of two views to its bound on the rows it holds
// per partition.
func (st *stage2) heldRows(t *task) error {
	s, limit := t.g.IntervalStats(), st.p.vj.limit
	if held := s.LeftHeld + s.RightHeld; held > int64(limit) {
		j := st.p.top.IJoin
		if j == nil {
			j = viewJoinBelow(st.p.top).IJoin
		}
		return fmt.Errorf("%w: partition %d holds %d rows of %s and %d of %s, more than %d (Options.JoinBuffer): %s",
			ErrViewJoinState, t.part, s.LeftHeld, j.Left.Name, s.RightHeld, j.Right.Name, limit, viewJoinAdvice)
	}
	return nil
}
