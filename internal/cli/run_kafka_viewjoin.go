package cli

import (
	"fmt"
	"maps"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/kafka"
)

// kafkaJoinSource returns the topic of the second source of a join of
// two views over two sources (Nexmark q8: persons and auctions): its
// CREATE SOURCE's connector = 'kafka' options, on the first source's
// cluster unless it names brokers. None for any other query.
func kafkaJoinSource(q *plan.Query, first kafka.Endpoint, k *kafkaFlags, env *Env) (kafka.Endpoint, error) {
	for q.IJoin == nil && q.Join == nil && len(q.Views()) == 1 {
		q = q.Views()[0] // a query over a join of two views: the join's
	}
	j := q.IJoin
	if j == nil || j.Left.View == nil || j.Right.View == nil {
		return kafka.Endpoint{}, nil
	}
	left, right := inputQuery(j.Left.View).Source, inputQuery(j.Right.View).Source
	if left == right {
		return kafka.Endpoint{}, nil
	}
	if !strings.EqualFold(right.Options["connector"], "kafka") {
		return kafka.Endpoint{}, fmt.Errorf("%w: query %s joins views over sources %s and %s; over Kafka the second is read from a topic too: CREATE SOURCE %s (...) WITH (connector = 'kafka', topic = 'TOPIC')", ErrUsage, q.Name, left.Name, right.Name, right.Name)
	}
	opts := right.Options
	if opts["brokers"] == "" {
		opts = maps.Clone(opts)
		opts["brokers"] = strings.Join(first.Config.Brokers, ",")
	}
	ep, err := kafka.FromOptions(opts, kafka.RoleSource, env.Getenv)
	if err != nil {
		return kafka.Endpoint{}, fmt.Errorf("CREATE SOURCE %s: %w", right.Name, err)
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
func allViews(q *plan.Query) []*plan.Query {
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
