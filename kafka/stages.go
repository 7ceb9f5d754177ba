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

// runStages runs p's stages, prepared, until ctx is canceled, a stage
// fails, or (UntilCaughtUp) the last has drained (a stage that drained
// first waits for it): one stage per segment of the plan (planStages),
// each run by the loop its nodes need and by the pipeline that holds
// it: a routing stage (a segment that decodes and feeds exchanges) by
// the pipeline whose source it decodes, the dedup stage by the pipeline
// whose source it deduplicates, each aggregating stage (a segment's
// joins and aggregates) by the pipeline of its name.
func (p *Pipeline) runStages(ctx context.Context) error {
	g := newStageGroup(ctx)
	opts := p.opts
	if p.vj != nil {
		opts = p.vj.opts // the query's: p.opts are the join stage's
	}
	pl, specs, err := planStages(opts, p.name)
	if err != nil {
		return g.fail(err)
	}
	pipes, last := p.stagePipes(), p.out()
	for _, spec := range specs {
		if err := p.runSpec(g, pl, spec, pipes, last); err != nil {
			return g.fail(err)
		}
	}
	return g.wait()
}

// runSpec starts the stage of spec in the pipeline of pipes that holds it.
func (p *Pipeline) runSpec(g *stageGroup, pl *dataflow.Plan, spec stageSpec, pipes []*Pipeline, last *Pipeline) error {
	if src := decodesOnly(pl, spec.seg); src != nil {
		c := p.routerOf(src, spec.name)
		if c == nil {
			c = p // its routeInOf names what it cannot route
		}
		return c.runRoute(g, pl, spec)
	}
	if hasNode(pl, spec.seg, dataflow.Dedup) && len(spec.queries) == 0 { // a dedup stage (a join's may dedup where it joins)
		return p.runDedupSpec(g, pl, spec, pipes)
	}
	k := slices.IndexFunc(pipes, func(c *Pipeline) bool { return c.name == spec.name })
	if k < 0 {
		return fmt.Errorf("kafka: the plan's stage %s runs in no pipeline of query %s", spec.name, p.q.Name)
	}
	c := pipes[k]
	g.run("aggregate stage "+c.name, c.runStage2, func() bool { return c == last && c.caughtUp.Load() })
	return nil
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

// runDedupSpec starts the dedup stage of spec in the pipeline of pipes
// that holds it: the first stream's dedup of a pipeline, or the dedup of
// a join of two views' second source.
func (p *Pipeline) runDedupSpec(g *stageGroup, pl *dataflow.Plan, spec stageSpec, pipes []*Pipeline) error {
	for _, c := range pipes {
		var d *ddStage
		switch {
		case c.dedup && dedupName(c.name) == spec.name:
			d = c.firstDedup(nil)
		case c.tj != nil && c.tj.dedup && dedupName(c.tableGroup()) == spec.name:
			d = c.secondDedup(nil)
		default:
			continue
		}
		if p.vj != nil {
			// One dedup for every segment reading the source, each
			// placing its events as its reader needs.
			dec := drive.NewMessageDecoder(d.src, c.formatOf(d.src)) // every reader's columns
			outs, err := c.dedupOutsOf(pl, spec, pipes, d.src, dec)
			if err != nil {
				return err
			}
			d.outs = outs
		}
		g.run(spec.name, func(ctx context.Context) error { return c.runDedupStage(ctx, d) }, nil)
		return nil
	}
	return fmt.Errorf("kafka: the plan's dedup stage %s runs in no pipeline of query %s", spec.name, p.q.Name)
}
