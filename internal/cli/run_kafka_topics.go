package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/kafka"
)

// A Kafka run writes the changelog of its query and of each view it reads
// to compacted topics. kafka.New refuses a run two of whose own topics are
// one (kafka.ErrSharedTopic, a usage error here). The script's other
// queries run in runs of their own (ubik run --query), so a sink of this
// run that is another query's CREATE SINK topic, on the same cluster,
// would receive two changelogs, each overwriting the other's keys:
// checkScriptSinks refuses that too, before anything is read or written.

// sinkUse is a sink topic of the script: what names it, and where.
type sinkUse struct {
	what string
	ep   kafka.Endpoint
}

// checkScriptSinks refuses a run of q one of whose sinks (its query's,
// its views') is the topic, on the same cluster, of the Kafka CREATE SINK
// of a query the run does not run (run: the queries it runs), and a run
// publishing a view to its own CREATE SINK topic that such a query reads
// too: that query's run would publish it there as well.
func checkScriptSinks(prog *ubik.Program, q *planQuery, run []*planQuery, eps *kafkaEndpoints, k *kafkaFlags, env *Env) error {
	own := runSinks(prog, q, eps, k)
	var inRun []*planQuery
	for _, r := range run {
		inRun = append(append(inRun, allViews(r)...), r)
	}
	for _, p := range prog.Queries() {
		if slices.Contains(inRun, p) {
			continue
		}
		if err := sharedViewSink(prog, q, p); err != nil {
			return err
		}
		s := querySink(prog, p)
		if s == nil || !strings.EqualFold(s.Option("connector"), "kafka") {
			continue
		}
		ep, err := kafka.FromOptions(s.Options(), kafka.RoleSink, env.Getenv)
		if err != nil {
			continue // that query's own run reports it
		}
		for _, o := range own {
			if o.ep.Topic == ep.Topic && kafka.SameCluster(o.ep.Config, ep.Config) {
				return fmt.Errorf("%w: %s and CREATE SINK %s (query %s) are both topic %s (on %s): ubik run --query %s would write its changelog there too, and two changelogs in one compacted topic overwrite each other's keys; give each sink a topic of its own",
					ErrUsage, o.what, s.Name(), p.Name(), ep.Topic, ep.Config, p.Name())
			}
		}
	}
	return nil
}

// sharedViewSink refuses a view of q's run with a Kafka CREATE SINK of
// its own that p, a query outside the run, reads too: p's run would
// compute and publish the view into that topic as well, each run
// numbering its revisions.
func sharedViewSink(prog *ubik.Program, q, p *planQuery) error {
	for _, v := range allViews(q) {
		s := querySink(prog, v)
		if s == nil || !strings.EqualFold(s.Option("connector"), "kafka") || !slices.Contains(allViews(p), v) {
			continue
		}
		return fmt.Errorf("%w: view %s's changelog goes to CREATE SINK %s, and query %s reads %s too: a run of it would publish the view there as well, and one topic takes one writer; drop that CREATE SINK (each query then publishes the view to its own sink topic, a dash and the view's name)",
			ErrUsage, v.Name(), s.Name(), p.Name(), v.Name())
	}
	return nil
}

// runSinks are the sink topics of the run of q, named as the user gave
// them.
func runSinks(prog *ubik.Program, q *planQuery, eps *kafkaEndpoints, k *kafkaFlags) []sinkUse {
	name := func(p *planQuery, what string) string {
		if s := querySink(prog, p); s != nil && strings.EqualFold(s.Option("connector"), "kafka") {
			return fmt.Sprintf("CREATE SINK %s (%s %s)", s.Name(), what, p.Name())
		}
		return fmt.Sprintf("the sink of %s %s (the run's sink topic, a dash and its name)", what, p.Name())
	}
	first := name(q, "query")
	if k.sink != "" {
		first = "--sink (query " + q.Name() + ")"
	}
	out := []sinkUse{{first, eps.sink}}
	for _, v := range allViews(q) {
		out = append(out, sinkUse{name(v, "view"), eps.views[v.Name()]})
	}
	return out
}
