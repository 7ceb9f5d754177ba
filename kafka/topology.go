package kafka

import (
	"fmt"
	"slices"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query's stages over Kafka come from its physical plan: one stage per
// segment of the plan (internal/dataflow). chainQueries walks the chain of
// aggregating segments that ends at the query's sink; each stage runs the
// queries of its segment's joins and aggregates (stage2.go), the stage
// after it reading its rows through a repartition topic (viewrepart.go).
// planTopology derives every stage of the plan the same way (its name,
// topics in and out, state topic); TestTopologyFromPlan holds the
// pipelines to it, on the way to building the stages from it.

// topology walks a plan's segments.
type topology struct {
	p *dataflow.Plan
}

// chainOf is the chain of aggregating segments ending at seg, upstream
// first: each reads the rows of the one before through an exchange.
func (t *topology) chainOf(seg int) []int {
	segs := []int{seg}
	for s := t.pred(seg); s >= 0; s = t.pred(s) {
		segs = append([]int{s}, segs...)
	}
	return segs
}

// chainQueries returns, for each stage of the chain that ends at q's
// sink (the stages Q, Q-s2, ...), the queries whose operators it runs,
// upstream first: a chain of views cut where the plan puts an exchange,
// and a join whose joined rows an exchange moves runs in a stage of its
// own, its query's aggregate in the next (both name the query).
func chainQueries(q *plan.Query) ([][]*plan.Query, error) {
	p, err := dataflow.LowerQueries([]*plan.Query{q})
	if err != nil {
		return nil, err
	}
	t := &topology{p: p}
	var out [][]*plan.Query
	for _, n := range p.Nodes {
		if n.Kind == dataflow.Sink && n.Query == q {
			for _, s := range t.chainOf(n.Segment) {
				out = append(out, t.queriesOf(s))
			}
		}
	}
	return out, nil
}

// queriesOf are the queries of segment s's joins and aggregates, in
// plan order.
func (t *topology) queriesOf(s int) []*plan.Query {
	var out []*plan.Query
	for _, id := range t.p.Segments[s].Nodes {
		switch n := t.p.Node(id); n.Kind {
		case dataflow.Aggregate, dataflow.TemporalJoin, dataflow.IntervalJoin:
			if !slices.Contains(out, n.Query) {
				out = append(out, n.Query)
			}
		}
	}
	return out
}

// pred is the segment whose rows seg's first aggregate reads through an
// exchange (a view's, or a join's joined rows), or -1: also for a join's
// segment, whose inputs are the join's sides.
func (t *topology) pred(seg int) int {
	if t.joinIn(seg) != nil {
		return -1
	}
	for _, x := range t.p.Segments[seg].Inputs {
		from := t.p.Node(t.p.Node(x).Inputs[0].From)
		if from.Kind != dataflow.Decode && from.Kind != dataflow.Dedup && t.consumer(x, seg).Kind == dataflow.Aggregate {
			return from.Segment
		}
	}
	return -1
}

// joinIn is segment seg's interval join, or nil.
func (t *topology) joinIn(seg int) *dataflow.Node {
	for _, id := range t.p.Segments[seg].Nodes {
		if n := t.p.Node(id); n.Kind == dataflow.IntervalJoin {
			return n
		}
	}
	return nil
}

// consumer is the node of segment seg that reads exchange x.
func (t *topology) consumer(x, seg int) *dataflow.Node {
	for _, id := range t.p.Segments[seg].Nodes {
		n := t.p.Node(id)
		if n.Kind != dataflow.Exchange && slices.ContainsFunc(n.Inputs, func(e dataflow.Edge) bool { return e.From == x }) {
			return n
		}
	}
	return nil
}

// placeSource sets how p's first stage reads its source, as the plan's
// stages give it (planStages): where it is when no routing stage decodes
// it (direct: partitioned by the group key, or a temporal join where its
// stream is, which needs no placement); through the plan's dedup stage;
// or placed by its dedup key and deduplicated where it joins, when the
// first stage's segment holds the dedup (every copy of an event must
// meet in one partition, whatever the source's placement).
func (p *Pipeline) placeSource() error {
	pl, specs, err := planStages(p.opts, p.name)
	if err != nil {
		return err
	}
	first := firstStream(p.root)
	p.direct = true
	for _, s := range specs {
		switch {
		case decodesOnly(pl, s.seg) == first:
			p.direct = false
		case s.name == dedupName(p.name):
			p.dedup = true
		case s.name == p.name && hasNode(pl, s.seg, dataflow.Dedup):
			p.dedupJoin = true
		}
	}
	if p.dedup {
		if err := checkTopicName(dedupName(p.name) + "-repartition"); err != nil {
			return fmt.Errorf("%w: query name %q cannot name the internal topics of its dedup stage", ErrConfig, p.name)
		}
	}
	return nil
}

// The topology of a query over Kafka as its physical plan gives it: one
// stage per segment of the plan, whatever the query's shape. A stage
// reads the source topics of the declared sources its segment decodes and
// the repartition topics of the exchanges it reads (a broadcast exchange,
// a versioned table's, gives every partition every record; any other
// routes each record to one), and produces the changelog topics of the
// sinks in it, the repartition topics of the exchanges it feeds, and its
// state topic when it holds state.
//
// Stages are named as the pipelines name them: the segment holding the
// query's sink and the chain of aggregating segments before it are the
// query's name, then name-s2, name-s3, ... from the first (segmentName);
// the segment that decodes the chain's first stream is name-in, its
// second input's name-tbl; the sides of a join of two views are chains
// of their own under name-left and name-right. An exchange's topic is
// its reader's name with -repartition, a state topic its stage's with
// -state, so the topics keep the names the query name owns.

// stageSpec is one stage of a query's topology.
type stageSpec struct {
	name      string    // consumer group and transactional id prefix
	seg       int       // the plan segment it runs
	inputs    []stageIn // topics read
	sinks     []string  // changelog topics produced
	exchanges []string  // repartition topics produced
	state     string    // state topic; "" for a stage without state
	// outs are the exchanges the stage feeds, each with its topic (an
	// exchange read by two segments has two).
	outs []exchangeOut
	// queries are the queries whose operators (joins, aggregates) the
	// stage runs, upstream first.
	queries []*plan.Query
}

// exchangeOut is one topic an exchange node of the plan writes.
type exchangeOut struct {
	node  int
	topic string
}

// stageIn is one input topic of a stage.
type stageIn struct {
	topic     string
	broadcast bool // every partition reads every record
}

// namer names the plan's segments while it walks them.
type namer struct {
	*topology
	opts  Options
	names map[int]string // segment -> stage name
}

// planTopology returns the stages of opts.Query's plan, under name, in
// the plan's segment order.
func planTopology(opts Options, name string) ([]stageSpec, error) {
	_, stages, err := planStages(opts, name)
	return stages, err
}

// planStages is planTopology with the plan it reads.
func planStages(opts Options, name string) (*dataflow.Plan, []stageSpec, error) {
	// The views are lowered as queries too: each publishes its changelog.
	p, err := dataflow.LowerQueries(append(allViewsOf(opts.Query), opts.Query))
	if err != nil {
		return nil, nil, err
	}
	t := &namer{topology: &topology{p: p}, opts: opts, names: map[int]string{}}
	for _, n := range p.Nodes {
		if n.Kind == dataflow.Sink && n.Query == opts.Query {
			if err := t.chain(n.Segment, name); err != nil {
				return nil, nil, err
			}
		}
	}
	var out []stageSpec
	for s := range p.Segments {
		if t.direct(s) {
			continue
		}
		st, err := t.stage(s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, st)
	}
	return p, out, nil
}

// chain names the chain of aggregating segments ending at seg under
// base, then the stages that feed its first: its inputs' decoding
// segments and a join of two views' sides.
func (t *namer) chain(seg int, base string) error {
	segs := t.chainOf(seg)
	for k, s := range segs {
		if err := t.name(s, segmentName(base, k)); err != nil {
			return err
		}
	}
	for _, x := range t.p.Segments[segs[0]].Inputs {
		from, c := t.p.Node(t.p.Node(x).Inputs[0].From), t.consumer(x, segs[0])
		switch {
		case from.Kind == dataflow.Dedup:
			// The dedup stage, and the stage decoding its source: a
			// second decoded source's are name-tbl-dedup and name-tbl.
			in, dd := base+"-in", dedupName(base)
			if t.secondDecoded(segs[0], x) {
				in, dd = base+"-tbl", dedupName(base+"-tbl")
			}
			if err := t.name(from.Segment, dd); err != nil {
				return err
			}
			if err := t.name(t.p.Node(t.p.Node(t.p.Segments[from.Segment].Inputs[0]).Inputs[0].From).Segment, in); err != nil {
				return err
			}
		case from.Kind == dataflow.Decode:
			suffix := "-in"
			if r := t.role(c, x); r == "table" || r == "right" || r == "" && t.secondDecoded(segs[0], x) {
				suffix = "-tbl"
			}
			if err := t.name(from.Segment, base+suffix); err != nil {
				return err
			}
		default:
			// A side of a join of the segment: read by the join, or
			// by an aggregate of the segment the join reads.
			j := t.joinOf(segs[0], x, c.ID)
			if j == nil {
				continue
			}
			side := "-left"
			if r := t.role(j, x); r == "right" || r == "" && t.role(j, c.ID) == "right" {
				side = "-right"
			}
			if err := t.chain(from.Segment, base+side); err != nil {
				return err
			}
		}
	}
	return nil
}

// secondDecoded reports whether exchange x brings segment seg the
// events of a source another decoded input of seg, before x, brings
// another: the join stage's second input (its routing stage Q-tbl).
func (t *namer) secondDecoded(seg, x int) bool {
	src := t.p.Node(t.p.Node(x).Inputs[0].From).Source
	for _, y := range t.p.Segments[seg].Inputs {
		if y == x {
			return false
		}
		if from := t.p.Node(t.p.Node(y).Inputs[0].From); (from.Kind == dataflow.Decode || from.Kind == dataflow.Dedup) && from.Source != src {
			return true
		}
	}
	return false
}

// name names segment s, once: a segment two chains reach (a source's
// decoding or dedup, one stage routing to each reader's topic; a view
// two joins of two views read, one stage forwarding to both) keeps its
// first name.
func (t *namer) name(s int, name string) error {
	if _, ok := t.names[s]; ok {
		return nil
	}
	t.names[s] = name
	return nil
}

// decodes reports whether segment s decodes a source and runs nothing
// else (a dedup is state of its own).
func (t *namer) decodes(s int) bool { return decodesOnly(t.p, s) != nil }

// direct reports whether segment s is a decoding segment the source's
// placement makes unneeded (Endpoint.PartitionedByKey): it decodes the
// first stream (Options.Source), whose partitions are already its
// reader's, which reads the source topic.
func (t *namer) direct(s int) bool {
	if !t.opts.Source.PartitionedByKey || t.feedsDedup(s) || !t.decodes(s) || t.meetsPlaced(s) {
		return false
	}
	for _, id := range t.p.Segments[s].Nodes {
		if n := t.p.Node(id); n.Kind == dataflow.Decode && n.Source == t.firstStream() {
			return true
		}
	}
	return false
}

// meetsPlaced reports whether a segment reading segment s's exchanges
// reads another input placed by ubik's key bytes (a view's rows): the
// source's own placement, which its producer chose, need not put the
// rows that meet there in one partition. A broadcast (a versioned
// table) meets every partition.
func (t *namer) meetsPlaced(s int) bool {
	for _, id := range t.p.Segments[s].Nodes {
		for _, c := range t.p.Consumers(id) {
			for _, x := range t.p.Segments[t.p.Node(c).Segment].Inputs {
				from := t.p.Node(t.p.Node(x).Inputs[0].From)
				if from.Segment != s && t.p.Node(x).Out.Kind != dataflow.Broadcast {
					return true
				}
			}
		}
	}
	return false
}

// feedsDedup reports whether segment s places its events for a dedup:
// by the dedup key, which a source partitioned by its group key is not.
func (t *namer) feedsDedup(s int) bool {
	for _, id := range t.p.Segments[s].Nodes {
		for _, c := range t.p.Consumers(id) {
			if t.p.Node(c).Kind == dataflow.Dedup {
				return true
			}
		}
	}
	return false
}

// stage is segment s's stage.
func (t *namer) stage(s int) (stageSpec, error) {
	name, ok := t.names[s]
	if !ok {
		return stageSpec{}, fmt.Errorf("%w: segment %d is no stage the pipelines name", ErrUnsupported, s)
	}
	st := stageSpec{name: name, seg: s, queries: t.queriesOf(s)}
	for _, id := range t.p.Segments[s].Nodes {
		n := t.p.Node(id)
		switch n.Kind {
		case dataflow.Decode:
			st.inputs = appendIn(st.inputs, stageIn{topic: t.topicOf(n.Source)})
		case dataflow.Dedup:
			st.state = name + "-state" // the keys seen
		case dataflow.Sink:
			st.sinks = append(st.sinks, t.sinkOf(n.Query))
		case dataflow.Exchange:
			for _, c := range t.p.Consumers(id) {
				topic := t.names[t.p.Node(c).Segment] + "-repartition"
				if out := (exchangeOut{node: id, topic: topic}); !slices.Contains(st.outs, out) {
					st.outs = append(st.outs, out)
				}
				if !slices.Contains(st.exchanges, topic) {
					st.exchanges = append(st.exchanges, topic)
				}
			}
		case dataflow.Aggregate, dataflow.TemporalJoin, dataflow.IntervalJoin:
			st.state = name + "-state"
		}
	}
	for _, x := range t.p.Segments[s].Inputs {
		in := stageIn{topic: name + "-repartition", broadcast: t.p.Node(x).Out.Kind == dataflow.Broadcast}
		if t.direct(t.p.Node(x).Segment) {
			in = stageIn{topic: t.opts.Source.Topic}
		}
		st.inputs = appendIn(st.inputs, in)
	}
	return st, nil
}

func appendIn(ins []stageIn, in stageIn) []stageIn {
	if slices.Contains(ins, in) {
		return ins
	}
	return append(ins, in)
}

// topicOf is the topic of a declared source: the first stream the plan
// decodes reads Options.Source, a versioned table Options.Table, a
// second stream Options.JoinSource (a join of views over two sources) or
// Options.Table (an interval join of two streams).
func (t *namer) topicOf(src *plan.Source) string {
	switch {
	case src.PrimaryKey != nil:
		return t.opts.Table.Topic
	case src == t.firstStream():
		return t.opts.Source.Topic
	case t.opts.JoinSource.Topic != "":
		return t.opts.JoinSource.Topic
	}
	return t.opts.Table.Topic
}

func (t *namer) firstStream() *plan.Source {
	for _, n := range t.p.Nodes {
		if n.Kind == dataflow.Decode && n.Source.PrimaryKey == nil {
			return n.Source
		}
	}
	return nil
}

// sinkOf is the changelog topic of query q: the sink's, or its view's.
func (t *namer) sinkOf(q *plan.Query) string {
	if q == t.opts.Query {
		return t.opts.Sink.Topic
	}
	return t.opts.ViewSinks[q.Name].Topic
}

// joinOf is the interval join of segment seg reading x or, through an
// aggregate, c; nil without one.
func (t *namer) joinOf(seg, x, c int) *dataflow.Node {
	for _, id := range t.p.Segments[seg].Nodes {
		if n := t.p.Node(id); n.Kind == dataflow.IntervalJoin && (t.role(n, x) != "" || t.role(n, c) != "") {
			return n
		}
	}
	return nil
}

// role is the role of n's input from x.
func (t *namer) role(n *dataflow.Node, x int) string {
	for _, e := range n.Inputs {
		if e.From == x {
			return e.Role
		}
	}
	return ""
}
