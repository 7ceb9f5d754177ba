package cli

import (
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/kafka"
)

// kafkaJoinSource returns the topic of the second source of a join of
// two views over two sources (Nexmark q8: persons and auctions): its
// CREATE SOURCE's connector = 'kafka' options, on the first source's
// cluster unless it names brokers. None for any other query.
func kafkaJoinSource(q *planQuery, first kafka.Endpoint, k *kafkaFlags, env *Env) (kafka.Endpoint, error) {
	for !hasJoin(q) && len(q.Views()) == 1 {
		q = q.Views()[0] // a query over a join of two views: the join's
	}
	jl, jr, ok := q.IntervalJoin()
	if !ok || jl.View() == nil || jr.View() == nil {
		return kafka.Endpoint{}, nil
	}
	left, right := inputQuery(jl.View()).Source(), inputQuery(jr.View()).Source()
	if left == right {
		return kafka.Endpoint{}, nil
	}
	if !strings.EqualFold(right.Option("connector"), "kafka") {
		return kafka.Endpoint{}, fmt.Errorf("%w: query %s joins views over sources %s and %s; over Kafka the second is read from a topic too: CREATE SOURCE %s (...) WITH (connector = 'kafka', topic = 'TOPIC')", ErrUsage, q.Name(), left.Name(), right.Name(), right.Name())
	}
	opts := right.Options()
	if opts["brokers"] == "" {
		opts["brokers"] = strings.Join(first.Config.Brokers, ",")
	}
	ep, err := kafka.FromOptions(opts, kafka.RoleSource, env.Getenv)
	if err != nil {
		return kafka.Endpoint{}, fmt.Errorf("CREATE SOURCE %s: %w", right.Name(), err)
	}
	if err := sameFormat(right, ep); err != nil {
		return kafka.Endpoint{}, err
	}
	if k.idleTimeout > 0 {
		ep.IdleTimeout = k.idleTimeout
	}
	return ep, nil
}

// allViews returns every view q reads, directly or through other views
// (both sides of a join of two views), each once.
func allViews(q *planQuery) []*planQuery {
	var out []*planQuery
	seen := map[*planQuery]bool{}
	var walk func(*planQuery)
	walk = func(n *planQuery) {
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

// hasJoin reports whether q reads a join (temporal or interval).
func hasJoin(q *planQuery) bool {
	_, _, t := q.TemporalJoin()
	_, _, i := q.IntervalJoin()
	return t || i
}
