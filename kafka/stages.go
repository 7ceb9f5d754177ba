package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// stageGroup runs a pipeline's stages, each on a goroutine of its own,
// until ctx is canceled, a stage fails (the others are canceled: the
// query stops as a whole), or the stage that finishes the query reports
// it caught up (UntilCaughtUp: the stages before it have nothing left to
// do).
type stageGroup struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    firstErr
}

func newStageGroup(ctx context.Context) *stageGroup {
	g := &stageGroup{}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

// run starts stage name. If done is set, a clean return of a stage for
// which done reports true ends the group.
func (g *stageGroup) run(name string, f func(context.Context) error, done func() bool) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := f(g.ctx)
		switch {
		case err != nil && g.ctx.Err() == nil:
			g.err.set(fmt.Errorf("%s: %w", name, err))
			g.cancel()
		case err == nil && done != nil && done():
			g.cancel()
		}
	}()
}

// wait waits for every stage and returns the first failure.
func (g *stageGroup) wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err.take()
}

// fail ends the group with err before every stage started.
func (g *stageGroup) fail(err error) error {
	g.cancel()
	g.wg.Wait()
	return err
}

// stageKind is what a stage of the plan runs: a routing stage (a segment
// that decodes and feeds exchanges), a dedup stage, or an aggregating
// stage (a segment's joins and aggregates).
type stageKind int

const (
	routeKind stageKind = iota
	dedupKind
	aggregateKind
)

// stageRun is one stage of the plan and the pipeline that holds it
// (whose options, counters and partitions it runs with): a routing stage
// the pipeline whose source it decodes, a dedup stage the pipeline whose
// source it deduplicates, an aggregating stage the pipeline of its name.
type stageRun struct {
	spec stageSpec
	kind stageKind
	p    *Pipeline
}

// queryStages binds every stage of the query's plan to the pipeline of
// p's that holds it (New): a stage no pipeline holds, or a pipeline whose
// aggregating stage the plan does not give, is an internal error, found
// before anything runs.
func (p *Pipeline) queryStages() error {
	opts := p.opts
	if p.vj != nil {
		opts = p.vj.opts // the query's: p.opts are the join stage's
	}
	pl, specs, err := planStages(opts, p.name)
	if err != nil {
		return err
	}
	pipes := p.stagePipes()
	p.plan, p.stages = pl, nil
	for _, spec := range specs {
		r := stageRun{spec: spec, kind: aggregateKind}
		switch {
		case decodesOnly(pl, spec.seg) != nil:
			r.kind, r.p = routeKind, p.routerOf(decodesOnly(pl, spec.seg), spec.name)
		case hasNode(pl, spec.seg, dataflow.Dedup) && len(spec.queries) == 0: // a join's stage may dedup where it joins
			r.kind = dedupKind
			r.p = pipeOf(pipes, func(c *Pipeline) bool { return c.dedupOf(spec.name) != nil })
		default:
			r.p = pipeOf(pipes, func(c *Pipeline) bool { return c.name == spec.name })
		}
		if r.p == nil && r.kind == routeKind {
			if _, err := p.routeInOf(decodesOnly(pl, spec.seg)); err != nil {
				return err // what it cannot route
			}
		}
		if r.p == nil {
			return fmt.Errorf("%w: the plan's stage %s runs in no pipeline of query %s", drive.ErrInternal, spec.name, p.q.Name)
		}
		p.stages = append(p.stages, r)
	}
	for _, c := range pipes {
		if !slices.ContainsFunc(p.stages, func(r stageRun) bool { return r.p == c && r.kind == aggregateKind }) {
			return fmt.Errorf("%w: the plan of query %s has no stage %s", drive.ErrInternal, p.q.Name, c.name)
		}
	}
	return nil
}

// pipeOf is the first of pipes that match reports, or nil.
func pipeOf(pipes []*Pipeline, match func(*Pipeline) bool) *Pipeline {
	if k := slices.IndexFunc(pipes, match); k >= 0 {
		return pipes[k]
	}
	return nil
}

// runStages runs p's stages (queryStages), prepared, until ctx is
// canceled, a stage fails, or (UntilCaughtUp) the last has drained (a
// stage that drained first waits for it), each by the loop its nodes
// need.
func (p *Pipeline) runStages(ctx context.Context) error {
	g := newStageGroup(ctx)
	// The dedup stages first bind their readers' marker tables to their
	// partitions, before any stage runs.
	dds := map[int]*ddStage{}
	for i, r := range p.stages {
		if r.kind == dedupKind {
			d, err := p.dedupStage(r)
			if err != nil {
				return g.fail(err)
			}
			dds[i] = d
		}
	}
	last := p.out()
	for i, r := range p.stages {
		var err error
		switch c := r.p; r.kind {
		case routeKind:
			err = c.runRoute(g, p.plan, r.spec)
		case dedupKind:
			g.run(r.spec.name, func(ctx context.Context) error { return c.runDedupStage(ctx, dds[i]) }, nil)
		default:
			g.run("aggregate stage "+c.name, c.runStage2, func() bool { return c == last && c.caughtUp.Load() })
		}
		if err != nil {
			return g.fail(err)
		}
	}
	return g.wait()
}

// stagePipes are the pipelines of p's aggregating stages: each side's
// (a side two joins read runs in the join that made it), then p's and
// the segments' after it, upstream first.
func (p *Pipeline) stagePipes() []*Pipeline {
	var out []*Pipeline
	if p.vj != nil {
		for _, sd := range p.vj.sides {
			if sd.owned {
				out = append(out, sd.p.stagePipes()...)
			}
		}
	}
	return append(append(out, p), p.after...)
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

// hasNode reports whether segment seg of pl has a node of kind k.
func hasNode(pl *dataflow.Plan, seg int, k dataflow.Kind) bool {
	return slices.ContainsFunc(pl.Segments[seg].Nodes, func(id int) bool { return pl.Node(id).Kind == k })
}

// bindAfter gives the segments after p what Run found on the cluster
// (partition counts: the internal topics' are p's) and binds each one's
// input to the rows of the one before.
func (p *Pipeline) bindAfter() {
	if p.fwd != nil && len(p.after) > 0 {
		p.fwd.parts = p.nParts
	}
	up := p
	for k, c := range p.after {
		c.nParts = p.nParts
		c.nSource = p.nParts // its marker table: the partitions of the segment before
		c.bindRows(p.nParts, up)
		if c.fwd != nil && k < len(p.after)-1 {
			c.fwd.parts = p.nParts // the last's, a side's of a join of two views, is the join stage's (prepareViewJoin)
		}
		up = c
	}
}

// dedupOf is p's dedup stage named name: its first stream's, or its
// join's second source's; nil if none.
func (p *Pipeline) dedupOf(name string) *ddStage {
	switch {
	case p.dedup && dedupName(p.name) == name:
		return p.firstDedup(nil)
	case p.tj != nil && p.tj.dedup && dedupName(p.tableGroup()) == name:
		return p.secondDedup(nil)
	}
	return nil
}

// dedupStage is dedup stage r as it runs. In a join of two views the
// plan's one dedup of a source feeds every segment reading it, each
// placing its events as its reader needs.
func (p *Pipeline) dedupStage(r stageRun) (*ddStage, error) {
	c, d := r.p, r.p.dedupOf(r.spec.name)
	if p.vj != nil {
		dec := drive.NewMessageDecoder(d.src, c.formatOf(d.src)) // every reader's columns
		outs, err := c.dedupOutsOf(p.plan, r.spec, p.counted(), d.src, dec)
		if err != nil {
			return nil, err
		}
		d.outs = outs
	}
	return d, nil
}
