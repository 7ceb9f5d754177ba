package kafka

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// The sides of a join of two views are queries of their own, whatever
// their shape: a chain (cut or not), a chain over a join of two views
// (the side is then a join of views itself, with its own sides), a chain
// whose root joins two streams. Each reads the streams its plan decodes,
// from the topics Options give them: the first stream the query's plan
// decodes (the left input's first) is Options.Source, the second
// Options.JoinSource.

// inputsOf returns the declared streams q reads, in the order its plan
// decodes them, and the versioned tables (CheckQuery refuses them).
func inputsOf(q *plan.Query) (streams, tables []*plan.Source) {
	p, err := dataflow.LowerQueries([]*plan.Query{q})
	if err != nil {
		return nil, nil // a compiled query always lowers
	}
	for _, n := range p.Nodes {
		switch {
		case n.Kind != dataflow.Decode:
		case n.Source.PrimaryKey != nil:
			tables = append(tables, n.Source)
		default:
			streams = append(streams, n.Source)
		}
	}
	return streams, tables
}

// inputEndpoints gives each declared stream q reads its topic.
func inputEndpoints(opts Options, q *plan.Query) (map[*plan.Source]Endpoint, error) {
	streams, _ := inputsOf(q)
	if opts.Table.Topic != "" {
		return nil, fmt.Errorf("%w: query %s has no temporal join; Options.Table is for one", ErrConfig, q.Name)
	}
	eps := map[*plan.Source]Endpoint{streams[0]: opts.Source}
	if len(streams) < 2 {
		if opts.JoinSource.Topic != "" {
			return nil, fmt.Errorf("%w: query %s reads one source, %s: Options.JoinSource is for a join of views over two sources", ErrConfig, q.Name, streams[0].Name)
		}
		return eps, nil
	}
	s, ep := streams[1], opts.JoinSource
	if ep.Topic == "" {
		return nil, fmt.Errorf("%w: query %s reads sources %s and %s: source %s needs its topic too (Options.JoinSource)", ErrConfig, q.Name, streams[0].Name, s.Name, s.Name)
	}
	if ep.Config.Brokers == nil {
		ep.Config = opts.Source.Config
	}
	if ep.IdleTimeout == 0 {
		ep.IdleTimeout = DefaultIdleTimeout
	}
	if err := ep.Config.Validate(); err != nil {
		return nil, fmt.Errorf("join source: %w", err)
	}
	if !sameCluster(opts.Source.Config, ep.Config) {
		return nil, fmt.Errorf("%w: source %s's topic (%s) must be on the cluster of the source (%s): a Kafka transaction cannot span two", ErrConfig, s.Name, ep.Config, opts.Source.Config)
	}
	eps[s] = ep
	return eps, nil
}

// sideOptions are the options of side v of the join of two views jq:
// v's inputs' topics, v's sink, the sinks of the views it reads.
func sideOptions(opts Options, jq, v *plan.Query, eps map[*plan.Source]Endpoint) (Options, error) {
	so := opts
	streams, _ := inputsOf(v)
	so.Query, so.Source, so.JoinSource, so.Table = v, eps[streams[0]], Endpoint{}, Endpoint{}
	if len(streams) > 1 {
		if viewJoinBelow(v) != nil {
			so.JoinSource = eps[streams[1]]
		} else {
			so.Table = eps[streams[1]] // an interval join of two streams at the root of v's chain
		}
	}
	vs, ok := opts.ViewSinks[v.Name]
	if !ok || vs.Topic == "" {
		return so, fmt.Errorf("%w: query %s joins view %s, which needs its own sink topic (Options.ViewSinks)", ErrConfig, jq.Name, v.Name)
	}
	so.Sink = vs
	so.ViewSinks = map[string]Endpoint{}
	for _, w := range allViewsOf(v) {
		if s, ok := opts.ViewSinks[w.Name]; ok {
			so.ViewSinks[w.Name] = s
		}
	}
	name := v.Name
	if opts.OnViewLate != nil {
		so.OnLate = func(ev *drive.LateEvent) { opts.OnViewLate(name, ev) }
	}
	if so.queryLate == nil { // the outermost join's query
		so.queryLate = opts.OnLate
	}
	return so, nil
}

// allViewsOf returns every view q reads, directly or through other
// views, each once.
func allViewsOf(q *plan.Query) []*plan.Query {
	var out []*plan.Query
	seen := map[*plan.Query]bool{}
	var walk func(*plan.Query)
	walk = func(n *plan.Query) {
		for _, v := range n.Views() {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
				walk(v)
			}
		}
	}
	walk(q)
	return out
}

// out is the stage of p that computes p.q's rows: the last segment after
// it, or p.
func (p *Pipeline) out() *Pipeline {
	if n := len(p.after); n > 0 {
		return p.after[n-1]
	}
	return p
}
