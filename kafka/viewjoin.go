package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// A query that joins two windowed EMIT FINAL views (Nexmark q8: new
// persons and new sellers of a window, on the person and the window's
// start) runs as three pipelines (DESIGN.md, "A join of two views"):
// each view is a query of its own over its source (stage 1 and an
// aggregating stage, named Q-left and Q-right), publishing its changelog
// to its own topic and forwarding its final rows, tagged with the side,
// to the join's repartition topic Q-repartition, keyed by the join's
// partition cells, with its view watermark as markers to every
// partition; the join stage (group Q) runs, per partition of that
// topic, the query's driver: the interval join of the two sides' rows,
// each side's watermark the least of its upstream partitions' markers,
// and the query's aggregate over the joined rows.

// sideHeader tags a record of the join's repartition topic with the side
// it comes from: one byte, 0 the left view, 1 the right.
const sideHeader = "ubik.side"

// DefaultViewJoinRows bounds the rows a join of two views holds per
// partition when Options.JoinBuffer is not set.
const DefaultViewJoinRows = 100_000

// ErrViewJoinState stops a join of two views whose held rows pass their
// bound (Options.JoinBuffer): the sides' watermarks are too far apart (one view is behind the
// other) for the rows of one partition to be kept.
var ErrViewJoinState = errors.New("kafka: a join of two views holds more rows than it may")

// viewJoin is a join of two views: the pipelines of its sides.
type viewJoin struct {
	sides [2]*Pipeline
	limit int // held rows per partition
}

// sideKey computes the join's partition cells of one side's rows: the
// side's terms of the equalities the query's GROUP BY names.
type sideKey struct {
	exprs   []plan.Expr
	off     int
	scratch []types.Value
	cells   []types.Value
}

// isViewJoin reports whether q is an interval join of two views.
func isViewJoin(q *plan.Query) bool {
	return q.IJoin != nil && q.IJoin.Left.View != nil && q.IJoin.Right.View != nil
}

// partitionTerms returns the equalities (indexes into LeftKey/RightKey)
// the joined rows are partitioned by: those one of whose sides is a
// column the query's GROUP BY names as it is. Equal group keys then have
// equal cells there (the key rules make one group of what the equality
// matches), so each group of the query lies in one partition, and rows
// that match share every equality's cells, so they meet.
func partitionTerms(q *plan.Query) []int {
	j := q.IJoin
	grouped := map[int]bool{}
	for _, k := range q.Keys {
		if ref, ok := k.Expr.(*plan.ColRef); k.Kind == plan.KeyExpr && ok {
			grouped[ref.Index] = true
		}
	}
	var out []int
	for i := range j.LeftKey {
		for _, e := range []plan.Expr{j.LeftKey[i], j.RightKey[i]} {
			if ref, ok := e.(*plan.ColRef); ok && grouped[ref.Index] {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// checkViewJoin refuses the joins of two views the pipeline does not run.
func checkViewJoin(q *plan.Query) error {
	j := q.IJoin
	if len(partitionTerms(q)) == 0 {
		return fmt.Errorf("%w: query %s joins views %s and %s and groups by none of the join's equality columns: over Kafka the rows of both views are partitioned by the equalities' columns so that matching rows meet, and a group must lie in one partition; group by one of %s's or %s's join columns as it is, or run the query from files",
			ErrUnsupported, q.Name, j.Left.Name, j.Right.Name, j.LeftAlias, j.RightAlias)
	}
	for _, v := range []*plan.Query{j.Left.View, j.Right.View} {
		if err := viewJoinSideStreamJoin(q, v); err != nil { // viewijoin.go
			return err
		}
		views, err := chain(v)
		if err != nil {
			return err
		}
		if len(views) > 0 {
			segs, err := segmentsOf(v, views)
			if err != nil {
				return err
			}
			if len(segs) > 1 {
				return fmt.Errorf("%w: query %s joins view %s, whose chain of views has a repartition inside it (a reader grouping by less than the view it reads, or a join whose joined rows are repartitioned by its GROUP BY); over Kafka a side of a join of two views runs as one chain without a repartition: run the graph from files", ErrUnsupported, q.Name, v.Name)
			}
		}
	}
	return nil
}

// rootSource is the declared source under view v's chain.
func rootSource(v *plan.Query) *plan.Source {
	for vs := v.Views(); len(vs) > 0; vs = v.Views() {
		v = vs[0]
	}
	return v.Source
}

// newViewJoin builds the pipelines of a join of two views (New, after
// the common checks): p is the join stage, each side a pipeline of its
// own whose primary's rows go to p's repartition topic.
func newViewJoin(p *Pipeline) error {
	opts := p.opts
	q := p.q
	if err := checkViewJoin(q); err != nil {
		return err
	}
	j := q.IJoin
	if opts.Table.Topic != "" {
		return fmt.Errorf("%w: query %s has no temporal join; Options.Table is for one", ErrConfig, q.Name)
	}
	srcs := [2]*plan.Source{rootSource(j.Left.View), rootSource(j.Right.View)}
	eps := [2]Endpoint{opts.Source, opts.Source}
	if srcs[0] != srcs[1] {
		if opts.JoinSource.Topic == "" {
			return fmt.Errorf("%w: query %s joins view %s (over source %s) and view %s (over source %s): source %s needs its topic too (Options.JoinSource)", ErrConfig, q.Name, j.Left.Name, srcs[0].Name, j.Right.Name, srcs[1].Name, srcs[1].Name)
		}
		eps[1] = opts.JoinSource
		if eps[1].Config.Brokers == nil {
			eps[1].Config = opts.Source.Config
		}
		if eps[1].IdleTimeout == 0 {
			eps[1].IdleTimeout = DefaultIdleTimeout
		}
		if err := eps[1].Config.Validate(); err != nil {
			return fmt.Errorf("join source: %w", err)
		}
		if !sameCluster(opts.Source.Config, eps[1].Config) {
			return fmt.Errorf("%w: source %s's topic (%s) must be on the cluster of the source (%s): a Kafka transaction cannot span two", ErrConfig, srcs[1].Name, eps[1].Config, opts.Source.Config)
		}
		if eps[1].Topic == opts.Source.Topic || eps[1].Topic == opts.Sink.Topic {
			return fmt.Errorf("%w: source %s's topic %s is also the first source's or the sink's", ErrConfig, srcs[1].Name, eps[1].Topic)
		}
	} else if opts.JoinSource.Topic != "" {
		return fmt.Errorf("%w: both views query %s joins read source %s: Options.JoinSource is for a join of views over two sources", ErrConfig, q.Name, srcs[0].Name)
	}
	if err := checkTopicName(q.Name + "-right-repartition"); err != nil {
		return fmt.Errorf("%w: query name %q cannot name the internal topics of its join's sides", ErrConfig, q.Name)
	}
	limit := opts.JoinBuffer
	if limit == 0 {
		limit = DefaultViewJoinRows
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative JoinBuffer", ErrConfig)
	}
	vj := &viewJoin{limit: limit}
	terms := partitionTerms(q)
	for side, v := range []*plan.Query{j.Left.View, j.Right.View} {
		so := opts
		so.Query, so.Source, so.JoinSource, so.Table = v, eps[side], Endpoint{}, Endpoint{}
		vs, ok := opts.ViewSinks[v.Name]
		if !ok || vs.Topic == "" {
			return fmt.Errorf("%w: query %s joins view %s, which needs its own sink topic (Options.ViewSinks)", ErrConfig, q.Name, v.Name)
		}
		so.Sink = vs
		so.ViewSinks = map[string]Endpoint{}
		views, _ := chain(v)
		for _, w := range views {
			if s, ok := opts.ViewSinks[w.Name]; ok {
				so.ViewSinks[w.Name] = s
			}
		}
		name := v.Name
		switch {
		case opts.OnViewLate != nil:
			so.OnLate = func(ev *drive.LateEvent) { opts.OnViewLate(name, ev) }
		default:
			so.OnLate = opts.OnLate
		}
		sp, err := New(so)
		if err != nil {
			return fmt.Errorf("view %s: %w", v.Name, err)
		}
		sp.name = q.Name + [2]string{"-left", "-right"}[side]
		sp.repTopic, sp.stateTopic = sp.name+"-repartition", sp.name+"-state"
		sp.log = p.log.With("side", v.Name)
		k := &sideKey{scratch: make([]types.Value, j.Offset+len(j.Right.Columns))}
		for _, i := range terms {
			k.exprs = append(k.exprs, [2][]plan.Expr{j.LeftKey, j.RightKey}[side][i])
		}
		if side == 1 {
			k.off = j.Offset
		}
		sp.fwd = &forward{topic: p.repTopic, view: v, side: side, join: k}
		vj.sides[side] = sp
	}
	topics := map[string]string{opts.Sink.Topic: q.Name}
	for name, vs := range opts.ViewSinks {
		if other, dup := topics[vs.Topic]; dup {
			return fmt.Errorf("%w: view %s's sink topic %s is also %s's", ErrConfig, name, vs.Topic, other)
		}
		topics[vs.Topic] = name
		if !sameCluster(opts.Sink.Config, vs.Config) {
			return fmt.Errorf("%w: view %s's sink (%s) must be on the cluster of the sink (%s): a Kafka transaction cannot span two", ErrConfig, name, vs.Config, opts.Sink.Config)
		}
		if vj.sides[0].opts.Sink.Topic != vs.Topic && vj.sides[1].opts.Sink.Topic != vs.Topic &&
			vj.sides[0].opts.ViewSinks[name].Topic == "" && vj.sides[1].opts.ViewSinks[name].Topic == "" {
			return fmt.Errorf("%w: a sink for view %s, which query %s does not read", ErrConfig, name, q.Name)
		}
	}
	p.vj = vj
	p.views = q.Views() // the binding records both views' text and topics
	return nil
}

// append appends the partition key of one row of the side: the version
// byte and the cells' group-key bytes. A NULL cell (the row matches
// nothing) or a cell that fails to evaluate (the join stage evaluates it
// again and counts the error) keys the row by the version byte alone.
func (k *sideKey) append(dst []byte, row []types.Value) []byte {
	dst = append(dst, routeKeyVersion)
	copy(k.scratch[k.off:], row)
	k.cells = k.cells[:0]
	for _, e := range k.exprs {
		v, err := e.Eval(k.scratch)
		if err != nil || v.Null {
			return dst
		}
		k.cells = append(k.cells, v)
	}
	return drive.AppendGroupKey(dst, k.cells)
}

// prepareViewJoin prepares the sides (each as a query of its own: its
// sink, internal topics, binding, end offsets), then the join stage's
// sink, internal topics and binding.
func (p *Pipeline) prepareViewJoin(ctx context.Context, adm *admClient) error {
	for _, sp := range p.vj.sides {
		if err := sp.prepare(ctx, adm); err != nil {
			return fmt.Errorf("view %s: %w", sp.q.Name, err)
		}
	}
	l, r := p.vj.sides[0], p.vj.sides[1]
	p.nSource, p.nParts = l.nParts, max(l.nParts, r.nParts)
	if p.opts.RepartitionPartitions > 0 {
		p.nParts = p.opts.RepartitionPartitions
	}
	p.sourceEnd = l.sourceEnd
	if p.opts.ResetState {
		if err := p.resetState(ctx, adm); err != nil {
			return err
		}
	}
	ns, err := topicPartitions(ctx, adm, p.stateTopic)
	if err != nil {
		return err
	}
	if ns > 0 {
		if err := p.checkBinding(ctx); err != nil {
			return err
		}
	}
	sinkParts := p.opts.Sink.Partitions
	if sinkParts == 0 {
		sinkParts = p.nParts
	}
	if err := ensureSinkTopic(ctx, adm, p.opts.Sink.Topic, sinkParts, p.opts.Sink.AllowUncompacted, p.log); err != nil {
		return err
	}
	if err := ensureInternalTopic(ctx, adm, p.repTopic, p.nParts, false, p.log); err != nil {
		return err
	}
	if err := ensureInternalTopic(ctx, adm, p.stateTopic, p.nParts, true, p.log); err != nil {
		return err
	}
	if ns == 0 {
		if err := p.checkBinding(ctx); err != nil {
			return err
		}
	}
	for _, sp := range p.vj.sides {
		sp.fwd.parts = p.nParts
		sp.srcParts = sp.nSource // its drain markers' positions (reachedOf)
	}
	return nil
}

// runViewJoin runs both sides' stages and the join stage until ctx is
// canceled, a stage fails, or (UntilCaughtUp) the join stage has drained
// (a side that drained first waits for it).
func (p *Pipeline) runViewJoin(ctx context.Context, adm *admClient) error {
	if err := p.prepareViewJoin(ctx, adm); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	p.log.Info("kafka: join of two views starting", "left", p.vj.sides[0].opts.Source.Topic, "right", p.vj.sides[1].opts.Source.Topic,
		"sink", p.opts.Sink.Topic, "partitions", p.nParts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	for _, sp := range p.vj.sides {
		if !sp.direct {
			run("repartition stage of view "+sp.q.Name, sp.runStage1)
		}
		run("aggregate stage of view "+sp.q.Name, sp.runStage2)
	}
	run("join stage", func(ctx context.Context) error {
		err := p.runStage2(ctx)
		if err == nil && p.caughtUp.Load() {
			cancel() // the sides have nothing left to do
		}
		return err
	})
	wg.Wait()
	close(errs)
	return <-errs
}

// viewJoinStats adds the sides' counters to the join stage's.
func (p *Pipeline) viewJoinStats(s Stats) Stats {
	for i, sp := range p.vj.sides {
		x := sp.Stats()
		if i == 0 {
			s.IdlePartitions, s.SilentPartitions = x.IdlePartitions, x.SilentPartitions
		}
		s.EventsIn += x.EventsIn
		s.EventsApplied += x.EventsApplied
		s.Malformed += x.Malformed
		s.HeadersSkipped += x.HeadersSkipped
		s.EvalErrors += x.EvalErrors
		s.Late += x.Late
		s.RecordsOut += x.RecordsOut
		s.StateEntriesOut += x.StateEntriesOut
		s.MarkersOut += x.MarkersOut
		s.Commits += x.Commits
		s.Aborts += x.Aborts
		s.Restores += x.Restores
		s.RestoredEntries += x.RestoredEntries
		s.Redos += x.Redos
		s.LiveGroups += x.LiveGroups
		s.StateBytes += x.StateBytes
		s.Duplicates += x.Duplicates
		s.DedupLate += x.DedupLate
		s.DedupKeys += x.DedupKeys
		s.DedupBytes += x.DedupBytes
	}
	return s
}

// joinRunner is a join stage partition's driver: the query with its
// interval join, the left view's rows pushed as its input, the right's
// as its second input.
type joinRunner struct {
	driverRunner
	part  int32
	limit int
}

// newJoinRunner builds a join stage partition's driver.
func (p *Pipeline) newJoinRunner(part int32, emit func(r *changelog.Record) error) (runner, error) {
	// The join's state: a small header entry and an entry per held row,
	// written once and deleted with a tombstone when the row is dropped
	// (exec.IntervalJoin.AppendEntries), so a transaction writes only
	// what changed and no record grows with the rows held. A state topic
	// of an earlier version holds one entry with every row: it is read
	// (drive.Config.IncrementalJoinState) and the first checkpoint after
	// it writes each row's entry.
	d, err := drive.New(p.q, drive.Config{Emit: emit, Late: p.opts.OnLate, Now: p.opts.Now, ExternalWatermark: true, IncrementalJoinState: true})
	if err != nil {
		return nil, err
	}
	return joinRunner{driverRunner: driverRunner{d}, part: part, limit: p.vj.limit}, nil
}

// Push refuses a record without a side: nothing else reaches the
// join's repartition topic.
func (r joinRunner) Push([]byte) error {
	return fmt.Errorf("%w: a record without its side in the join's repartition topic", drive.ErrBadState)
}

func (r joinRunner) PushKeyed(raw, _ []byte) error { return r.Push(raw) }

// TakeCounts keeps the late and evaluation-error counts: a view's row is
// not an event of the input.
func (r joinRunner) TakeCounts() drive.Counts {
	c := r.Driver.TakeCounts()
	return drive.Counts{EvalErrors: c.EvalErrors, Late: c.Late}
}

// viewJoinAdvice says what makes a join of two views hold many rows.
const viewJoinAdvice = "a row waits until the other view's watermark passes its window, so one view far behind the other (a source partition that gets no events holds its view's watermark back until its idle timeout) makes the other's rows wait; produce to every partition, shorten idle_timeout, or run with more partitions"

// push applies one row of side.
func (r joinRunner) push(side byte, row []types.Value) error {
	var err error
	if side == 0 {
		err = r.Driver.PushRow(row)
	} else {
		err = r.Driver.PushTableRow(row)
	}
	var ee *drive.EventError
	if err != nil && (errors.As(err, &ee) || drive.Skipped(err)) {
		return nil // counted, as a join of two views in a file run goes past it
	}
	return err
}

// viewJoinRecord handles a record of the join stage's input: a side's
// row or watermark marker.
func (st *stage2) viewJoinRecord(t *task, r *kgo.Record) error {
	side := -1
	for _, h := range r.Headers {
		if h.Key == sideHeader && len(h.Value) == 1 && h.Value[0] < 2 {
			side = int(h.Value[0])
		}
	}
	jr, ok := t.d.(joinRunner)
	if side < 0 || !ok {
		return fmt.Errorf("%w: a record without its side at %s partition %d offset %d", drive.ErrBadState, r.Topic, r.Partition, r.Offset)
	}
	if isMarker(r) {
		m, err := decodeTracker(r.Value)
		if err != nil {
			return fmt.Errorf("%w at %s partition %d offset %d", err, r.Topic, r.Partition, r.Offset)
		}
		[2]*tracker{t.wm, t.twm}[side].merge(m)
		return nil
	}
	row, err := drive.DecodeRow(r.Value)
	if err != nil {
		return fmt.Errorf("a view row at %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return jr.push(byte(side), row)
}

// advanceViewJoin moves each join's inputs to their markers' minimums
// (the left's is also moved by the stage's loop), then holds the join to
// its bound on held rows.
func (st *stage2) advanceViewJoin() error {
	for _, t := range st.tasks {
		jr, ok := t.d.(joinRunner)
		if !ok {
			continue
		}
		lw, rw := jr.Driver.InputWatermarks()
		if wm := t.wm.watermark(); wm != math.MinInt64 && wm > lw {
			t.touched = true
			if err := jr.Driver.AdvanceWatermark(wm); err != nil && !drive.Skipped(err) {
				return err
			}
		}
		if wm := t.twm.watermark(); wm != math.MinInt64 && wm > rw {
			t.touched = true
			if err := jr.Driver.AdvanceTableWatermark(wm); err != nil && !drive.Skipped(err) {
				return err
			}
		}
		s := jr.Driver.IntervalStats()
		if held := s.LeftHeld + s.RightHeld; held > int64(jr.limit) {
			j := st.p.q.IJoin
			return fmt.Errorf("%w: partition %d holds %d rows of %s and %d of %s, more than %d (Options.JoinBuffer): %s",
				ErrViewJoinState, t.part, s.LeftHeld, j.Left.Name, s.RightHeld, j.Right.Name, jr.limit, viewJoinAdvice)
		}
	}
	return nil
}

// newViewJoinPipeline is New for a join of two views.
func newViewJoinPipeline(opts Options) (*Pipeline, error) {
	base, err := opts.Source.Config.ClientOpts()
	if err != nil {
		return nil, err
	}
	q := opts.Query
	p := &Pipeline{
		opts:       opts,
		q:          q,
		root:       q,
		log:        opts.Logger.With("query", q.Name, "instance", opts.InstanceID),
		base:       append(base, opts.ClientOpts...),
		repTopic:   q.Name + "-repartition",
		stateTopic: q.Name + "-state",
		name:       q.Name,
	}
	if err := newViewJoin(p); err != nil {
		return nil, err
	}
	return p, nil
}
