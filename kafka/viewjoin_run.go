package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/sql/plan"
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
	if len(p.vj.after) > 0 {
		p.fwd.parts = p.nParts
		up := p
		for k, c := range p.vj.after {
			c.nParts = p.nParts
			c.nSource = p.nParts // its marker table: the partitions of the stage before
			c.bindRows(p.nParts, up)
			if c.fwd != nil && k < len(p.vj.after)-1 {
				c.fwd.parts = p.nParts
			}
			up = c
		}
	}
	return ensureSegmentTopics(ctx, adm, p.vj.after, p.nParts, p.log)
}

// viewJoinPipes are the pipelines a join of two views runs: each side's
// stages, the join stage, and the segments after it.
func (p *Pipeline) viewJoinPipes() []*Pipeline {
	var out []*Pipeline
	for _, sd := range p.vj.sides {
		sp := sd.p
		if !sd.owned || sd.apart {
			continue // its join runs it, or it runs its own stages
		}
		switch {
		case sp.vj != nil: // a join of two views itself
			out = append(out, sp.viewJoinPipes()...)
		case len(sp.segs) > 0:
			out = append(out, sp.segs...)
		default:
			out = append(out, sp)
		}
	}
	return append(append(out, p), p.vj.after...)
}

// runViewJoin runs the stages of the join's plan, prepared, until ctx is
// canceled, a stage fails, or (UntilCaughtUp) the last has drained (a
// stage that drained first waits for it): each routing stage by the
// pipeline whose source it decodes, each aggregating stage by the
// pipeline of its name.
func (p *Pipeline) runViewJoin(ctx context.Context) error {
	g := newStageGroup(ctx)
	pl, specs, err := planStages(p.vj.opts, p.name)
	if err != nil {
		return g.fail(err)
	}
	pipes := p.viewJoinPipes()
	last := p.out()
	apart := map[*plan.Source]bool{} // read by a side apart, which runs its own stages
	for _, sp := range p.apartSides() {
		streams, _ := inputsOf(sp.q)
		for _, s := range streams {
			apart[s] = true
		}
		g.run("view "+sp.q.Name, sp.runStages, nil)
	}
	for _, spec := range specs {
		if src := specSource(pl, spec.seg); apart[src] {
			continue
		}
		if src := decodesOnly(pl, spec.seg); src != nil {
			c := p.routerOf(src, spec.name)
			if c == nil {
				c = p // its routeInOf names what it cannot route
			}
			if err := c.runRoute(g, pl, spec); err != nil {
				return g.fail(err)
			}
			continue
		}
		if hasNode(pl, spec.seg, dataflow.Dedup) {
			// One dedup for every segment reading the source.
			k := slices.IndexFunc(pipes, func(c *Pipeline) bool { return c.dedup && dedupName(c.name) == spec.name })
			if k < 0 {
				return g.fail(fmt.Errorf("kafka: the plan's dedup stage %s runs in no pipeline of query %s", spec.name, p.q.Name))
			}
			if err := pipes[k].dedupOutsOf(pl, spec, pipes); err != nil {
				return g.fail(err)
			}
			g.run(spec.name, pipes[k].runDedupStage, nil)
			continue
		}
		k := slices.IndexFunc(pipes, func(c *Pipeline) bool { return c.name == spec.name })
		if k < 0 {
			return g.fail(fmt.Errorf("kafka: the plan's stage %s runs in no pipeline of query %s", spec.name, p.q.Name))
		}
		c := pipes[k]
		g.run("aggregate stage "+c.name, c.runStage2, func() bool { return c == last && c.caughtUp.Load() })
	}
	return g.wait()
}

// apartSides are the sides of p's joins of two views that run their own
// stages (side.apart).
func (p *Pipeline) apartSides() []*Pipeline {
	var out []*Pipeline
	for _, sd := range p.vj.sides {
		switch {
		case sd.apart:
			out = append(out, sd.p)
		case sd.owned && sd.p.vj != nil:
			out = append(out, sd.p.apartSides()...)
		}
	}
	return out
}

// specSource is the source segment seg of pl decodes or deduplicates
// and feeds on, if that is all it does; else nil.
func specSource(pl *dataflow.Plan, seg int) *plan.Source {
	if src := decodesOnly(pl, seg); src != nil {
		return src
	}
	for _, id := range pl.Segments[seg].Nodes {
		if n := pl.Node(id); n.Kind == dataflow.Dedup {
			return n.Source
		}
	}
	return nil
}

// routerOf is the pipeline whose routing stage named group decodes src:
// p, a side, or a side's own (a side that joins two views); nil if none.
func (p *Pipeline) routerOf(src *plan.Source, group string) *Pipeline {
	if !p.readsRows() && firstStream(p.root) == src && p.inGroup() == group || p.tj != nil && p.tableGroup() == group {
		return p
	}
	if p.vj == nil {
		return nil
	}
	for _, sd := range p.vj.sides {
		if c := sd.p.routerOf(src, group); c != nil {
			return c
		}
	}
	return nil
}

// viewJoinStats adds the sides' counters to the join stage's.
func (p *Pipeline) viewJoinStats(s Stats) Stats {
	if n := len(p.vj.after); n > 0 {
		s.CaughtUp = p.vj.after[n-1].caughtUp.Load() // the last segment's drain
	}
	s = sideEvents(s)
	var pipes []*Pipeline
	for _, sd := range p.vj.sides {
		if sd.owned { // a side two joins read counts once, in the join that runs it
			pipes = append(pipes, sd.p)
		}
	}
	for i, sp := range append(pipes, p.vj.after...) {
		x := sideEvents(sp.Stats())
		if i == 0 && p.readsRows() {
			s.IdlePartitions, s.SilentPartitions = x.IdlePartitions, x.SilentPartitions
		}
		s.add(x)
	}
	return s
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
		j := st.p.vj.top.IJoin
		if j == nil {
			j = viewJoinBelow(st.p.vj.top).IJoin
		}
		return fmt.Errorf("%w: partition %d holds %d rows of %s and %d of %s, more than %d (Options.JoinBuffer): %s",
			ErrViewJoinState, t.part, s.LeftHeld, j.Left.Name, s.RightHeld, j.Right.Name, limit, viewJoinAdvice)
	}
	return nil
}
