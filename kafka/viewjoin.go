package kafka

import (
	"fmt"
	"github.com/ubiksql/ubik/changelog"
	"slices"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query that joins two windowed EMIT FINAL views (Nexmark q8: new
// persons and new sellers of a window, on the person and the window's
// start) runs the stages of its plan (DESIGN.md, "A join of two views").
// The join's segment (group Q) runs, per partition of Q-repartition, the
// interval join, the query's aggregate, and every view the plan places
// where the join needs it (a view grouped by the join's key): those read
// their source's events, which a routing stage (Q-in, or Q-tbl for an
// interval join's right stream) places by the view's group key. Each
// view the plan computes elsewhere (a view grouped by more than the join
// key, and what it reads) is a side: a query of its own under Q-left or
// Q-right, whose last stage sends its final rows to Q-repartition, placed
// by the plan's exchange and tagged with the view, with its view
// watermark as markers to every partition. Each of the join stage's
// inputs has its watermark, the least of its producer's markers.

// viewJoinLayout is the layout of the internal topics of a join of two
// views (binding.go, layoutVersion): the join stage reads the events of
// the views its segment computes, and its sides are the views the plan
// computes elsewhere. Layout 1 ran each view of the join as a side.
const viewJoinLayout = 2

// viewJoinTwoSources is the layout of a join of two views whose join
// stage decodes two sources (both views it computes read one each): the
// second comes through the routing stage Q-tbl as the graph's second
// input. Layout 2 ran the view reading it as a side of its own.
const viewJoinTwoSources = 3

// DefaultViewJoinRows bounds the rows a join of two views holds per
// partition when Options.JoinBuffer is not set.
const DefaultViewJoinRows = 100_000

// viewJoin is a join of two views: the pipelines of its sides and the
// join stage's inputs.
type viewJoin struct {
	sides []side // the chains whose last stage sends a view's rows to the join stage
	limit int    // held rows per partition
	// opts are the query's options, by which the plan names its stages'
	// topics (p.opts are the join stage's: its own source).
	opts Options
}

// side is a chain whose last stage sends a view's rows to a join stage:
// its pipeline, the forward to the join's topic, and whether this join
// runs it (a side another join of the query reads too runs once, under
// the join that made it, and forwards to both).
type side struct {
	p     *Pipeline
	fwd   *forward
	owned bool
}

// hasSide reports whether one of vj's sides runs under name.
func (vj *viewJoin) hasSide(name string) bool {
	for _, sd := range vj.sides {
		if sd.p.name == name {
			return true
		}
	}
	return false
}

// sideSet are the sides a query's joins of two views made, by view, so
// that a view two of them read is computed once.
type sideSet map[*plan.Query]*Pipeline

// isViewJoin reports whether q is an interval join of two views.
func isViewJoin(q *plan.Query) bool {
	return q.IJoin != nil && q.IJoin.Left.View != nil && q.IJoin.Right.View != nil
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

// newViewJoin builds the pipelines of a join of two views (New, after
// the common checks) from its plan: p is the join stage, which runs the
// join's segment (the views the plan places where the join needs them,
// reading the events of their sources, which p routes); each view of
// another segment whose rows the join's segment reads is a side, a
// pipeline of its own whose last stage sends them to p's topic.
func newViewJoin(p *Pipeline) error {
	opts := p.opts
	q, jq := p.q, p.root // jq the join, q it or a query over it
	if err := CheckQuery(q); err != nil {
		return err
	}
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
	if opts.sides == nil {
		opts.sides = sideSet{} // the query's outermost join: its nested ones share it
		p.opts.sides = opts.sides
	}
	vj := &viewJoin{limit: limit, opts: opts}
	if err := checkViewSinks(opts, q, allViewsOf(q)); err != nil {
		return err
	}
	pl, specs, err := planStages(opts, p.name)
	if err != nil {
		return err
	}
	routed, err := vj.readsOf(p, pl, specs, jq, eps)
	if err != nil {
		return err
	}
	p.vj = vj
	segs, err := p.afterJoin()
	if err != nil {
		return err
	}
	g, err := vj.graph(p)
	if err != nil {
		return err
	}
	if streamJoinIn(pl, joinSegment(pl, jq)) == nil {
		// Its sources are the graph's own inputs (else an interval join
		// of two streams takes the second, SecondInput).
		if err := graphOrder(pl, routed, g.Sources()); err != nil {
			return fmt.Errorf("kafka: query %s: %w", p.q.Name, err)
		}
	}
	if err := p.routeOwn(pl, specs, joinSegment(pl, jq), routed, eps); err != nil {
		return err
	}
	// The joined rows reach the join's aggregate through an exchange
	// when the plan places them by its GROUP BY.
	joinedOut := len(segs) > 0 && segs[0][0] == jq
	if len(segs) > 0 {
		// The join stage is the first of the segments: its rows go to
		// the next through a view repartition, as in a chain.
		if err := p.newSegments(append([][]*plan.Query{{p.top}}, segs...)); err != nil {
			return err
		}
		if joinedOut {
			// The joined rows, keyed by the join's GROUP BY; the markers
			// carry the joined stream's watermark as it is.
			p.fwd.keys, p.fwd.view, p.fwd.in, p.fwd.joined = drive.NewGroupKeys(joinedQuery(jq)), nil, jq.Source.Name, true
			p.after[0].ins = rowInputs(true)
		}
	}
	p.views = allViewsOf(q) // the binding records every view's text and topic
	if p.top != q && opts.OnViewLate != nil {
		// The join stage's last query is a view whose rows go on to the
		// next segment: its late rows are the view's.
		p.opts.OnLate = viewLateOf(opts, p.top)
	}
	return vj.inputs(p, g)
}

// joinSegment is the segment of pl that runs jq's join.
func joinSegment(pl *dataflow.Plan, jq *plan.Query) int {
	for _, n := range pl.Nodes {
		if n.Kind == dataflow.IntervalJoin && n.Query == jq {
			return n.Segment
		}
	}
	return -1
}

// readsOf makes a side of each view whose rows the join's segment reads
// through an exchange, and returns the sources it decodes itself (the
// exchanges from their decoding, each source once).
func (vj *viewJoin) readsOf(p *Pipeline, pl *dataflow.Plan, specs []stageSpec, jq *plan.Query, eps map[*plan.Source]Endpoint) ([]int, error) {
	seg := joinSegment(pl, jq)
	if seg < 0 {
		return nil, fmt.Errorf("kafka: the plan of %s runs no join %s", p.q.Name, jq.Name)
	}
	names := map[int]string{}
	for _, s := range specs {
		names[s.seg] = s.name
	}
	t := &topology{p: pl}
	var routed []int
	seen := map[*plan.Source]int{}
	for _, x := range pl.Segments[seg].Inputs {
		from := pl.Node(pl.Node(x).Inputs[0].From)
		switch from.Kind {
		case dataflow.Decode, dataflow.Dedup:
			if first, ok := seen[from.Source]; ok {
				if err := samePlacement(pl, first, x); err != nil {
					return nil, err
				}
				continue // one record serves every root reading the source (routeOuts)
			}
			seen[from.Source] = x
			routed = append(routed, x)
		case dataflow.Aggregate:
			sd, err := newSide(p, pl, x, names[t.chainOf(from.Segment)[0]], eps)
			if err != nil {
				return nil, err
			}
			vj.sides = append(vj.sides, sd)
		default:
			return nil, fmt.Errorf("%w: the join's segment of %s reads the rows of a %s node", ErrUnsupported, p.q.Name, from.Kind)
		}
	}
	return routed, nil
}

// newSide is the side whose view's rows exchange x of pl moves to the
// join stage p: the view's query under name, its last stage sending
// them to p's topic placed as the exchange places them; or the side
// another join of the query made of the view, forwarding here too.
func newSide(p *Pipeline, pl *dataflow.Plan, x int, name string, eps map[*plan.Source]Endpoint) (side, error) {
	v := pl.Node(pl.Node(x).Inputs[0].From).Query
	keys, err := drive.NewExchangeKeys(pl, x)
	if err != nil {
		return side{}, err
	}
	f := &forward{topic: p.repTopic, place: keys, view: v, in: v.Name}
	if sp := p.opts.sides[v]; sp != nil {
		out := sp.out()
		out.also = append(out.also, f)
		return side{p: sp, fwd: f}, nil
	}
	so, err := sideOptions(p.opts, p.root, v, eps)
	if err != nil {
		return side{}, err
	}
	sp, err := newNamed(so, name)
	if err != nil {
		return side{}, fmt.Errorf("view %s: %w", v.Name, err)
	}
	sp.log = p.log.With("side", v.Name)
	sp.out().fwd = f
	p.opts.sides[v] = sp
	return side{p: sp, fwd: f, owned: true}, nil
}

// routeOwn makes p read the sources the join's segment seg decodes
// (routed, the exchanges from their decoding): the first is p's source,
// read by the query of the segment that reads its exchange; a second is
// the right stream of the segment's interval join of two streams, read
// as a join's second input; a source with a dedup key comes through its
// dedup stage (a second source's, Q-tbl-dedup, feeds the second input).
// A segment that decodes none reads rows only.
func (p *Pipeline) routeOwn(pl *dataflow.Plan, specs []stageSpec, seg int, routed []int, eps map[*plan.Source]Endpoint) error {
	p.direct = false
	if len(routed) == 0 {
		return nil // it reads rows only
	}
	t := &topology{p: pl}
	first := pl.Node(pl.Node(routed[0]).Inputs[0].From).Source
	p.root = t.consumer(routed[0], seg).Query
	var second *plan.Source // a second source a view of the segment reads
	if len(routed) > 1 {
		// Two sources: the second is an interval join's right stream, or
		// read by a view of the segment; either is the second input.
		if len(routed) > 2 {
			return fmt.Errorf("%w: the join's segment of %s decodes %d sources", ErrUnsupported, p.q.Name, len(routed))
		}
		if ij := streamJoinIn(pl, seg); ij != nil {
			p.root, first = ij, ij.IJoin.Left
			p.opts.Table = eps[ij.IJoin.Right]
		} else {
			second = pl.Node(pl.Node(routed[1]).Inputs[0].From).Source
			p.opts.Table = eps[second]
		}
	}
	p.opts.Source, p.opts.JoinSource = eps[first], Endpoint{}
	// It reads its source where it is when the plan routes it through no
	// stage (partitioned by key, and the join's segment reads nothing
	// else).
	p.direct = !slices.ContainsFunc(specs, func(s stageSpec) bool { return decodesOnly(pl, s.seg) == first })
	p.opts.Source.PartitionedByKey = p.direct
	// Its events come through the plan's dedup stage when the exchange
	// that brings them is fed by the source's dedup node.
	p.dedup = slices.ContainsFunc(routed, func(x int) bool {
		from := pl.Node(pl.Node(x).Inputs[0].From)
		return from.Kind == dataflow.Dedup && from.Source == first
	})
	if err := drive.NewMessageDecoder(first, p.opts.Source.Format).Err(); err != nil {
		return fmt.Errorf("%w: source: %v", ErrConfig, err)
	}
	var tj *tableJoin
	var err error
	if second != nil {
		tj, err = newSecondStream(&p.opts, second)
	} else {
		tj, err = newTableJoin(&p.opts, p.root)
	}
	if err != nil {
		return err
	}
	if second != nil {
		tj.reader = t.consumer(routed[1], seg).Query
		tj.dedup = pl.Node(pl.Node(routed[1]).Inputs[0].From).Kind == dataflow.Dedup
		if err := checkTopicName(dedupName(p.tableGroup()) + "-repartition"); tj.dedup && err != nil {
			return fmt.Errorf("%w: query name %q cannot name the internal topics of its dedup stage", ErrConfig, p.name)
		}
	}
	p.tj = tj
	return nil
}

// newSecondStream is the second input of a join stage whose segment's
// views read two sources: the second source's events, routed by the
// routing stage that decodes them (Q-tbl) as an interval join's right
// stream is, and pushed as the graph's second input.
func newSecondStream(opts *Options, src *plan.Source) (*tableJoin, error) {
	if opts.Table.Topic == "" {
		return nil, fmt.Errorf("%w: query %s reads source %s: give its topic (Options.JoinSource)", ErrConfig, opts.Query.Name, src.Name)
	}
	return secondOf(opts, &tableJoin{src: src, what: "source " + src.Name, interval: true})
}

// streamJoinIn is the query of segment seg's interval join of two
// streams, or nil.
func streamJoinIn(pl *dataflow.Plan, seg int) *plan.Query {
	for _, id := range pl.Segments[seg].Nodes {
		if n := pl.Node(id); n.Kind == dataflow.IntervalJoin && n.Query.IJoin.Left.View == nil {
			return n.Query
		}
	}
	return nil
}

// graph is the join stage's graph as its tasks build it, without a
// decoder: what its inputs are, and in which order.
func (vj *viewJoin) graph(p *Pipeline) (*drive.Graph, error) {
	none := func(*changelog.Record) error { return nil }
	return drive.NewSegmentGraph(p.top, vj.fedViews(), nil, drive.Config{Emit: none, ExternalWatermark: true}, none, nil)
}

// graphOrder checks that routed, the exchanges of the sources the join
// stage decodes in the plan's order (the first read through Q-in, the
// second through Q-tbl), are in the order the graph numbers its inputs:
// the second is the graph's second input (PushTable).
func graphOrder(pl *dataflow.Plan, routed []int, srcs []*plan.Source) error {
	for i, x := range routed {
		src := pl.Node(pl.Node(x).Inputs[0].From).Source
		if i >= len(srcs) || srcs[i].Name != src.Name {
			return fmt.Errorf("the join stage decodes %s as its input %d, which its graph does not read there", src.Name, i)
		}
	}
	return nil
}

// inputs names the join stage's graph inputs (g's) in the graph's order:
// each side's view's rows, a source p decodes, an interval join of two
// streams' right stream (the second input, which a routing stage sends).
func (vj *viewJoin) inputs(p *Pipeline, g *drive.Graph) error {
	names := g.Sources()
	p.ins = nil
	for i, s := range names {
		in := graphIn{name: s.Name, kind: inEvents}
		if i == 1 && p.tj != nil {
			in.kind = inTable
		}
		for k := range vj.sides {
			if vj.sides[k].fwd.in == s.Name {
				in.side, in.kind = &vj.sides[k], inRows
			}
		}
		p.ins = append(p.ins, in)
	}
	if s := g.SecondInput(); len(names) == 1 && s != "" {
		p.ins = append(p.ins, graphIn{name: s, kind: inTable})
	}
	return nil
}

// fedViews are the views whose rows the sides bring.
func (vj *viewJoin) fedViews() []*plan.Query {
	var out []*plan.Query
	for _, sd := range vj.sides {
		out = append(out, sd.fwd.view)
	}
	return out
}

// afterJoin sets the last query the join stage runs (p.top: the last of
// the join's segment) and returns the segments of the plan's chain after
// it, each reading the rows of the one before: the join's aggregate
// first when the plan places the joined rows by its GROUP BY, else the
// first reader above the join that groups by less than the rows'
// placement.
func (p *Pipeline) afterJoin() ([][]*plan.Query, error) {
	chain, err := chainQueries(p.q)
	if err != nil {
		return nil, err
	}
	first := chain[0]
	p.top = first[len(first)-1]
	return chain[1:], nil
}
