package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ubiksql/ubik/internal/dataflow"
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
// fails, or (UntilCaughtUp) the last has drained: one stage per segment
// of the plan (planStages), each run by the loop its nodes need (a
// routing stage for a segment that decodes and feeds exchanges, the dedup
// stage, the aggregating stage of a segment's joins and aggregates).
func (p *Pipeline) runStages(ctx context.Context) error {
	if p.vj != nil {
		return p.runViewJoin(ctx)
	}
	g := newStageGroup(ctx)
	pl, specs, err := planStages(p.opts, p.name)
	if err != nil {
		return g.fail(err)
	}
	aggs := p.segs // the pipelines of the aggregating stages, one per segment of the chain
	if len(aggs) == 0 {
		aggs = []*Pipeline{p}
	}
	head := aggs[0] // the first segment's: it reads the source and a join's second input
	for _, spec := range specs {
		switch {
		case decodesOnly(pl, spec.seg) != nil:
			if err := head.runRoute(g, pl, spec); err != nil {
				return g.fail(err)
			}
		case hasNode(pl, spec.seg, dataflow.Dedup) && spec.name == dedupName(head.name):
			g.run("dedup stage", head.runDedupStage, nil)
		default:
			k := slices.IndexFunc(aggs, func(c *Pipeline) bool { return c.name == spec.name })
			if k < 0 {
				return g.fail(fmt.Errorf("kafka: the plan's stage %s runs in no pipeline of query %s", spec.name, p.q.Name))
			}
			c, last := aggs[k], k == len(aggs)-1
			name := "aggregate stage"
			if k > 0 {
				name = fmt.Sprintf("aggregate stage %d (from %s)", k+1, c.root.Name)
			}
			g.run(name, c.runStage2, func() bool {
				if last && c.caughtUp.Load() {
					p.caughtUp.Store(true)
					return true
				}
				return false
			})
		}
	}
	return g.wait()
}

// hasNode reports whether segment seg of pl has a node of kind k.
func hasNode(pl *dataflow.Plan, seg int, k dataflow.Kind) bool {
	return slices.ContainsFunc(pl.Segments[seg].Nodes, func(id int) bool { return pl.Node(id).Kind == k })
}

// shareSegments gives the pipelines of a chain cut into segments what
// Run found on the cluster (partition counts, end offsets, the source)
// and binds their inputs: the first's to the source, each next one's to
// the rows of the one before.
func (p *Pipeline) shareSegments() {
	for k, c := range p.segs {
		c.nParts, c.nSource, c.sourceEnd = p.nParts, p.nSource, p.sourceEnd
		c.sourceMeta, c.resumed = p.sourceMeta, p.resumed
		if k == 0 {
			c.bindInputs()
		} else {
			c.nSource = p.nParts // its marker table: the partitions of the segment before
			c.bindRows(p.nParts, p.segs[k-1])
		}
		if c.fwd != nil && k < len(p.segs)-1 {
			c.fwd.parts = p.nParts // the last's, a side's of a join of two views, is the join stage's (prepareViewJoin)
		}
	}
}
