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

// checkScriptSinks refuses a run one of whose sinks (its query's, its
// views') is the topic, on the same cluster, of another query's Kafka
// CREATE SINK.
func checkScriptSinks(prog *ubik.Program, q *planQuery, eps *kafkaEndpoints, k *kafkaFlags, env *Env) error {
	own := runSinks(prog, q, eps, k)
	inRun := append(allViews(q), q)
	for _, p := range prog.Queries() {
		s := querySink(prog, p)
		if slices.Contains(inRun, p) || s == nil || !strings.EqualFold(s.Option("connector"), "kafka") {
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
