package kafka

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/scripttest"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestTopologyFromPlan compares, for every query shape the script tests
// run over Kafka and the shapes of the joins of two views, the stages the
// pipelines build (New) with the stages the plan's segments give
// (planTopology): their names, the queries they run, their input and
// output topics. They must be equal.
// Every input tag a stage writes names an input of the graph reading it,
// and each such input is tagged by a stage (tagProblems).
func TestTopologyFromPlan(t *testing.T) {
	seen := map[string]bool{}
	var refused []string
	check := func(t *testing.T, shape string, o Options) {
		t.Helper()
		pl, err := New(o)
		if err != nil {
			refused = append(refused, shape+": "+err.Error())
			return // a shape New refuses has no topology
		}
		for _, e := range tagProblems(pl) {
			t.Errorf("%s: %s", shape, e)
		}
		old := strings.Join(oldTopology(pl), "\n")
		var got string
		stages, err := planTopology(o, o.Query.Name)
		if err != nil {
			t.Errorf("%s: the plan's topology: %v", shape, err) // every shape New runs has one
			got = err.Error()
		} else {
			got = strings.Join(specLines(stages), "\n")
		}
		seen[shape] = true
		if got != old {
			t.Errorf("%s: the pipelines build\n%s\nthe plan gives\n%s", shape, old, got)
		}
	}
	files, err := filepath.Glob("../testdata/script/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	addrs := []string{"127.0.0.1:1"}
	for _, f := range files {
		s, err := scripttest.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range s.Segments() {
			for i, q := range g.Queries {
				if q.SQL == nil {
					continue
				}
				if pq, err := scriptQuery(q); err != nil || CheckQuery(pq) != nil {
					continue // a shape the pipelines do not run
				}
				shape := fmt.Sprintf("%s/%s/%d", s.Name(), g.Name(), i)
				check(t, shape, scriptShapeOptions(t, q, addrs, false))
				check(t, shape+"/direct", scriptShapeOptions(t, q, addrs, true))
			}
		}
	}
	for _, q := range []*plan.Query{tumbleQuery("tumble", 0), continuousQuery("continuous")} {
		for _, direct := range []bool{false, true} {
			o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out")}
			o.Source.PartitionedByKey = direct
			check(t, fmt.Sprintf("%s/direct=%v", q.Name, direct), o)
		}
	}
	for key, s := range viewJoinShapes {
		q, err := s.compile()
		if err != nil {
			t.Fatal(err)
		}
		check(t, "q8"+key, s.options(q, addrs))
	}
	// A temporal join over a stream with a dedup key, grouped by the
	// stream (a dedup stage before the join's) and by the table (the
	// join's stage deduplicates, in the dedup key's partitions).
	for _, by := range []string{"u.customer", "p.price"} {
		q := lastQuery(t, fmt.Sprintf(dedupJoinShape, by, by))
		o := Options{Query: q, Source: endpoint(addrs, "usage"), Table: endpoint(addrs, "prices"), Sink: endpoint(addrs, "out")}
		check(t, "dedup join by "+by, o)
		// Read partitioned by key: a source so placed is not placed by
		// its dedup key, so the events still go through Q-in.
		o.Source.PartitionedByKey = true
		check(t, "dedup join by "+by+"/direct", o)
	}
	// The shapes New refuses: a direct source under a join of two streams
	// (its second stream has no key to be partitioned by).
	t.Logf("%d shapes compared, %d refused by New:\n%s", len(seen), len(refused), strings.Join(refused, "\n"))
	if len(seen) < 90 {
		t.Errorf("only %d shapes compared", len(seen))
	}
}

// dedupJoinShape is a temporal join over a stream with a dedup key,
// grouped by its %s.
const dedupJoinShape = `CREATE SOURCE usage (id VARCHAR, customer VARCHAR, tier BIGINT, qty BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (dedup_key = 'id', dedup_within = '1 hour');
CREATE TABLE prices (tier BIGINT, price BIGINT, valid_from TIMESTAMP, PRIMARY KEY (tier) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from);
SELECT %s, sum(u.qty) AS n FROM usage u JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier GROUP BY %s`

// scriptShapeOptions are the options of script query q, as TestScripts
// runs it (scriptSpec.options), its source partitioned by key if direct.
func scriptShapeOptions(t *testing.T, q *scripttest.Query, addrs []string, direct bool) Options {
	pq, err := scriptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptSpec{Brokers: addrs, SQL: q.Text(), Name: q.Name(), Prefix: "scr", Topics: map[string]string{}}
	s.Topics[""], s.Topics["2"] = "scr-in", "scr-in2"
	if _, second := scriptInputs(t, pq); second != "" {
		s.Second = "table"
		if viewJoinBelow(pq) != nil {
			s.Second = "join"
		}
	}
	for _, v := range append(allViews(pq), pq) {
		s.Topics[s.Prefix+"_"+v.Name] = s.Prefix + "-out-" + v.Name
	}
	o := s.options(t)
	o.Source.PartitionedByKey = direct
	return o
}

// oldTopology lists the stages pipeline p runs (runStages).
func oldTopology(p *Pipeline) []string {
	var out []string
	switch {
	case p.vj != nil:
		// Its routing stages are the plan's (runStages); its
		// aggregating stages are held to the plan's by their graphs.
		pl, specs, err := planStages(p.vj.opts, p.name)
		if err != nil {
			return []string{err.Error()}
		}
		for _, spec := range specs {
			if decodesOnly(pl, spec.seg) != nil || hasNode(pl, spec.seg, dataflow.Dedup) {
				out = append(out, specLine(spec))
			}
		}
		for _, c := range p.stagePipes() {
			out = append(out, aggStage(c))
		}
	default:
		out = append(out, inStages(p, p.direct)...)
		for _, c := range p.stagePipes() {
			out = append(out, aggStage(c))
		}
	}
	slices.Sort(out)
	return out
}

// inStages are the repartition and table stages of p.
func inStages(p *Pipeline, direct bool) []string {
	var out []string
	switch {
	case p.dedup:
		out = append(out, specLine(stageSpec{name: p.inGroup(), inputs: []stageIn{{topic: p.opts.Source.Topic}}, exchanges: []string{p.ddTopic()}}),
			specLine(stageSpec{name: dedupName(p.name), inputs: []stageIn{{topic: p.ddTopic()}}, exchanges: []string{p.repTopic}, state: p.ddState()}))
	case !direct:
		out = append(out, specLine(stageSpec{name: p.inGroup(), inputs: []stageIn{{topic: p.opts.Source.Topic}}, exchanges: []string{p.repTopic}}))
	}
	if p.tj != nil {
		out = append(out, specLine(stageSpec{name: p.tableGroup(), inputs: []stageIn{{topic: p.tj.ep.Topic}}, exchanges: []string{p.repTopic}}))
	}
	return out
}

// aggStage is p's aggregating stage: what its tasks' graphs publish and
// forward.
func aggStage(p *Pipeline) string {
	st := stageSpec{name: p.name, state: p.stateTopic}
	switch {
	case p.direct && p.tj != nil:
		st.inputs = []stageIn{{topic: p.opts.Source.Topic}, {topic: p.repTopic, broadcast: true}}
	case p.direct:
		st.inputs = []stageIn{{topic: p.opts.Source.Topic}}
	case p.tj != nil && !p.tj.interval:
		st.inputs = []stageIn{{topic: p.repTopic}, {topic: p.repTopic, broadcast: true}}
	default:
		st.inputs = []stageIn{{topic: p.repTopic}}
	}
	t, err := (&stage2{p: p}).newTask(0)
	if err != nil {
		return p.name + ": " + err.Error()
	}
	top := p.top
	st.queries = t.g.Queries()
	for _, q := range t.g.Queries() {
		switch {
		case q.Name == top.Name && p.fwd != nil && p.fwd.joined: // its joined rows go on, unaggregated
		case q.Name == p.q.Name:
			st.sinks = append(st.sinks, p.opts.Sink.Topic)
		case q.Name != p.q.Name:
			st.sinks = append(st.sinks, p.opts.ViewSinks[q.Name].Topic)
		}
	}
	for _, f := range p.forwards() {
		st.exchanges = append(st.exchanges, f.topic)
	}
	return specLine(st)
}

func specLines(stages []stageSpec) []string {
	var out []string
	for _, s := range stages {
		out = append(out, specLine(s))
	}
	slices.Sort(out)
	return out
}

// specLine is a stage as one comparable line, its lists sorted.
func specLine(s stageSpec) string {
	var in []string
	for _, x := range s.inputs {
		in = append(in, x.String())
	}
	slices.Sort(in)
	var qs []string
	for _, q := range s.queries {
		qs = append(qs, q.Name)
	}
	sinks, ex := slices.Sorted(slices.Values(s.sinks)), slices.Sorted(slices.Values(s.exchanges))
	return fmt.Sprintf("%s: runs [%s] in [%s] sinks [%s] exchanges [%s] state %q", s.name, strings.Join(qs, " "),
		strings.Join(in, " "), strings.Join(sinks, " "), strings.Join(ex, " "), s.state)
}

func (in stageIn) String() string {
	if in.broadcast {
		return in.topic + " (broadcast)"
	}
	return in.topic
}
