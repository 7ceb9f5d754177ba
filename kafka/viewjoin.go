package kafka

import (
	"context"
	"fmt"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
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

// viewJoin is a join of two views: the pipelines of its sides.
type viewJoin struct {
	sides [2]*Pipeline
	limit int // held rows per partition
	// above are the views the join stage runs before the query, the
	// join first: empty when the query is the join, else the join and
	// the views between it and the query (a chain over the join).
	above []*plan.Query
	// top is the last query the join stage runs (the query, or the view
	// before the first reader that groups by less than the join's
	// partition columns); after are the segments that run the queries
	// past it, each reading the rows of the one before through a view
	// repartition (viewrepart.go), the query's last.
	top   *plan.Query
	after []*Pipeline
	// drainParts and drainEnd are, per side, how many source positions
	// its drain markers carry and the ends they must reach
	// (UntilCaughtUp; Pipeline.drained).
	drainParts [2]int
	drainEnd   [2]map[int32]int64
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
// column the query's GROUP BY names as it is; and, for each, that column
// of the joined row (the first GROUP BY term naming a side of it). Equal
// group keys then have equal cells there (the key rules make one group
// of what the equality matches), so each group of the query lies in one
// partition, and rows that match share every equality's cells, so they
// meet.
func partitionTerms(q *plan.Query) (terms, cols []int) {
	j := q.IJoin
	isCol := func(e plan.Expr, c int) bool { r, ok := e.(*plan.ColRef); return ok && r.Index == c }
	for i := range j.LeftKey {
		for _, k := range q.Keys {
			if ref, ok := k.Expr.(*plan.ColRef); k.Kind == plan.KeyExpr && ok && (isCol(j.LeftKey[i], ref.Index) || isCol(j.RightKey[i], ref.Index)) {
				terms, cols = append(terms, i), append(cols, ref.Index)
				break
			}
		}
	}
	return terms, cols
}

// viewJoinBelow returns the join of two views q runs on: q itself, or
// the view at the bottom of q's chain (each query of it reading one
// view) when that is a join of two views; nil otherwise.
func viewJoinBelow(q *plan.Query) *plan.Query {
	for n := q; ; {
		if isViewJoin(n) {
			return n
		}
		vs := n.Views()
		if len(vs) != 1 || n.IJoin != nil || n.Join != nil {
			return nil
		}
		n = vs[0]
	}
}

// aboveViewJoin returns the views of q's chain from the join of two
// views jq up to q (jq first, q not included): the queries the join
// stage runs in its graph before q.
func aboveViewJoin(q, jq *plan.Query) []*plan.Query {
	var out []*plan.Query
	for n := q; n != jq; {
		n = n.Views()[0]
		out = append([]*plan.Query{n}, out...)
	}
	return out
}

// viewJoinCut splits the chain from the join of two views jq up to q:
// top is the last query the join stage runs in its partitions (jq, or a
// view above it whose rows stay where its reader's aggregate needs them),
// rest the queries after it (the first a reader whose plan would move its
// rows, q last), which run in segments of their own behind a view
// repartition; rest is empty when the join stage runs q. The join's rows
// are placed by its partition columns under group identity, and each
// query's output as its plan carries its input's placement.
func viewJoinCut(q, jq *plan.Query) (top *plan.Query, rest []*plan.Query) {
	_, cols := partitionTerms(jq)
	in := dataflow.Partitioning{Kind: dataflow.Hash, Rule: dataflow.GroupIdentity, Cols: cols}
	all := append(aboveViewJoin(q, jq), q)
	for i, r := range all[1:] {
		if in = dataflow.Carried(all[i], in); !dataflow.Satisfies(in, dataflow.GroupNeed(r)) {
			return all[i], all[i+1:]
		}
	}
	return q, nil
}

// newViewJoin builds the pipelines of a join of two views (New, after
// the common checks): p is the join stage, each side a pipeline of its
// own whose primary's rows go to p's repartition topic.
func newViewJoin(p *Pipeline) error {
	opts := p.opts
	q, jq := p.q, p.root // jq the join, q it or a query over it
	if err := CheckQuery(q); err != nil {
		return err
	}
	j := jq.IJoin
	eps, err := inputEndpoints(opts, q)
	if err != nil {
		return err
	}
	if err := checkTopicName(p.name + "-right-repartition"); err != nil {
		return fmt.Errorf("%w: query name %q cannot name the internal topics of its join's sides", ErrConfig, p.name)
	}
	limit := opts.JoinBuffer
	if limit == 0 {
		limit = DefaultViewJoinRows
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative JoinBuffer", ErrConfig)
	}
	vj := &viewJoin{limit: limit}
	terms, _ := partitionTerms(jq)
	joinedOut := len(terms) == 0
	if joinedOut {
		// The GROUP BY names no equality column: as the plan places
		// them, the views' rows meet by every equality, and the joined
		// rows reach the aggregate through an exchange by its GROUP BY.
		for i := range j.LeftKey {
			terms = append(terms, i)
		}
	}
	left := map[string]bool{}   // the views the left side computes and publishes
	leftIn := map[string]bool{} // the sources the left side reads and counts
	for side, v := range []*plan.Query{j.Left.View, j.Right.View} {
		so, err := sideOptions(opts, jq, v, eps)
		if err != nil {
			return err
		}
		sp, err := newNamed(so, p.name+[2]string{"-left", "-right"}[side])
		if err != nil {
			return fmt.Errorf("view %s: %w", v.Name, err)
		}
		sp.log = p.log.With("side", v.Name)
		k := &sideKey{scratch: make([]types.Value, j.Offset+len(j.Right.Columns))}
		for _, i := range terms {
			k.exprs = append(k.exprs, [2][]plan.Expr{j.LeftKey, j.RightKey}[side][i])
		}
		if side == 1 {
			k.off = j.Offset
		}
		sp.out().fwd = &forward{topic: p.repTopic, view: v, side: side, join: k, in: v.Name}
		for _, w := range append(allViewsOf(v), v) {
			if side == 0 {
				left[w.Name] = true
			} else if left[w.Name] {
				sp.mute(w.Name) // both sides compute it; the left publishes its changelog
			}
		}
		streams, _ := inputsOf(v)
		for _, s := range streams {
			if side == 0 {
				leftIn[s.Name] = true
			} else if leftIn[s.Name] {
				sp.muteSource(s.Name) // both sides read it; the left counts its events
			}
		}
		vj.sides[side] = sp
	}
	// The views the join stage runs before q: the join and those
	// between it and q, each publishing to its own sink.
	vj.above = aboveViewJoin(q, jq)
	if err := checkViewSinks(opts, q, allViewsOf(q)); err != nil {
		return err
	}
	p.vj = vj
	segs, err := p.afterJoin(joinedOut)
	if err != nil {
		return err
	}
	if len(segs) > 0 {
		// The join stage is the first of the segments: its rows go to
		// the next through a view repartition, as in a chain.
		if err := p.newSegments(append([][]*plan.Query{{vj.top}}, segs...)); err != nil {
			return err
		}
		p.fwd, vj.after, p.segs = p.segs[0].fwd, p.segs[1:], nil
		if joinedOut {
			// The joined rows, keyed by the join's GROUP BY; the markers
			// carry the joined stream's watermark as it is.
			p.fwd.keys, p.fwd.view, p.fwd.in, p.joinOut, vj.after[0].joinedIn = drive.NewGroupKeys(joinedQuery(jq)), nil, jq.Source.Name, true, true
		}
	}
	p.views = append(jq.Views(), vj.above...) // the binding records every view's text and topic
	p.rowsIn = true                           // the sides' rows
	if vj.top != q && opts.OnViewLate != nil {
		// The join stage's last query is a view whose rows go on to the
		// next segment: its late rows are the view's.
		name := vj.top.Name
		p.opts.OnLate = func(ev *drive.LateEvent) { opts.OnViewLate(name, ev) }
	}
	return nil
}

// afterJoin sets the last query the join stage runs (vj.top) and returns
// the segments after it: with joinedOut, the join's aggregate (which
// reads the joined rows) then the chain above it, cut where its plan puts
// an exchange; else the queries from the first reader above the join
// that groups by less than the join's partitioning (viewJoinCut).
func (p *Pipeline) afterJoin(joinedOut bool) ([][]*plan.Query, error) {
	q, jq, vj := p.q, p.root, p.vj
	if joinedOut {
		vj.top = jq
		if q == jq {
			return [][]*plan.Query{{jq}}, nil
		}
		segs, err := segmentsOf(q, vj.above[1:])
		return append([][]*plan.Query{{jq}}, segs...), err
	}
	var rest []*plan.Query
	if vj.top, rest = viewJoinCut(q, jq); len(rest) == 0 {
		return nil, nil
	}
	return segmentsOf(q, rest[:len(rest)-1])
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
	return drive.AppendGroupIdentity(dst, k.cells)
}

// prepareViewJoin prepares the sides (each as a query of its own: its
// sink, internal topics, binding, end offsets), then the join stage's
// sink, internal topics and binding.
func (p *Pipeline) prepareViewJoin(ctx context.Context, adm *admClient) error {
	for _, sp := range p.vj.sides {
		if err := sp.prepareAll(ctx, adm); err != nil {
			return fmt.Errorf("view %s: %w", sp.q.Name, err)
		}
	}
	l, r := p.vj.sides[0], p.vj.sides[1]
	p.nSource, p.nParts = l.nParts, max(l.nParts, r.nParts)
	if p.opts.RepartitionPartitions > 0 {
		p.nParts = p.opts.RepartitionPartitions
	}
	if err := p.prepareOwn(ctx, adm, p.vj.above); err != nil {
		return err
	}
	for _, sp := range p.vj.sides {
		sp.out().fwd.parts = p.nParts
		if sp.vj == nil {
			sp.srcParts = sp.nSource // its drain markers' positions (reachedOf)
		}
	}
	// The join stage drains only once both views are consumed; its drain
	// markers carry how far both sides consumed their sources (drained).
	for i, sp := range p.vj.sides {
		p.vj.drainParts[i], p.vj.drainEnd[i] = sp.drained()
	}
	p.srcParts, p.sourceEnd = p.drained()
	if len(p.vj.after) > 0 {
		p.fwd.parts = p.nParts
		for k, c := range p.vj.after {
			c.nParts, c.srcParts, c.sourceEnd = p.nParts, p.srcParts, p.sourceEnd
			c.nSource = p.nParts // its marker table: the partitions of the stage before
			if c.fwd != nil && k < len(p.vj.after)-1 {
				c.fwd.parts = p.nParts // the last's is a join's of which p is a side
			}
		}
	}
	return ensureSegmentTopics(ctx, adm, p.vj.after, p.nParts, p.log)
}

// drained is what the drain markers of p's last stage carry (the positions
// a reader compares with the ends of its own run, UntilCaughtUp): how many
// source positions, and the ends they must reach. They cover every input
// behind p: the source's partitions, then a temporal or interval join's
// second input's; for a join of two views, the left side's, then the
// right side's. A reader that knew only some of them would take p as
// drained from a restored state while an input it did not track still
// had records to read (one whose source alone got new records).
func (p *Pipeline) drained() (int, map[int32]int64) {
	if vj := p.vj; vj != nil {
		return vj.drainParts[0] + vj.drainParts[1], appendEnds(vj.drainEnd[0], vj.drainParts[0], vj.drainEnd[1])
	}
	if p.tj != nil {
		return p.nSource + p.tj.n, appendEnds(p.sourceEnd, p.nSource, p.tj.end)
	}
	return p.nSource, p.sourceEnd
}

// appendEnds are the ends a, then the ends b numbered from n on.
func appendEnds(a map[int32]int64, n int, b map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(a)+len(b))
	for part, end := range a {
		out[part] = end
	}
	for part, end := range b {
		out[int32(n)+part] = end
	}
	return out
}

// runViewJoin runs both sides' stages and the join stage, prepared,
// until ctx is canceled, a stage fails, or (UntilCaughtUp) the join stage
// has drained (a side that drained first waits for it).
func (p *Pipeline) runViewJoin(ctx context.Context) error {
	g := newStageGroup(ctx)
	for _, sp := range p.vj.sides {
		g.run("view "+sp.q.Name, sp.runStages, nil)
	}
	after := p.vj.after
	g.run("join stage", p.runStage2, func() bool { return len(after) == 0 && p.caughtUp.Load() })
	for k, c := range after {
		last := k == len(after)-1
		g.run(fmt.Sprintf("aggregate stage %d (from %s)", k+2, c.root.Name), c.runStage2, func() bool { return last && c.caughtUp.Load() })
	}
	return g.wait()
}

// viewJoinStats adds the sides' counters to the join stage's.
func (p *Pipeline) viewJoinStats(s Stats) Stats {
	if n := len(p.vj.after); n > 0 {
		s.CaughtUp = p.vj.after[n-1].caughtUp.Load() // the last segment's drain
	}
	for i, sp := range append([]*Pipeline{p.vj.sides[0], p.vj.sides[1]}, p.vj.after...) {
		x := sp.Stats()
		if i < 2 {
			x = sideEvents(x)
		}
		if i == 0 {
			s.IdlePartitions, s.SilentPartitions = x.IdlePartitions, x.SilentPartitions
		}
		s.add(x)
	}
	return s
}

// sideEvents counts a side's second stream (the right input of an
// interval join at the root of its chain, read by its table stage) as
// events: a join of two views reads no versioned table (CheckQuery),
// so each of its inputs is a declared stream, as a file run counts it.
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
		j := st.p.root.IJoin
		return fmt.Errorf("%w: partition %d holds %d rows of %s and %d of %s, more than %d (Options.JoinBuffer): %s",
			ErrViewJoinState, t.part, s.LeftHeld, j.Left.Name, s.RightHeld, j.Right.Name, limit, viewJoinAdvice)
	}
	return nil
}
