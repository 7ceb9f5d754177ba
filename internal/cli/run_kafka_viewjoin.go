package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/kafka"
)

// kafkaJoinSource returns the topic of the second source of a join of
// two views over two sources (Nexmark q8: persons and auctions): the
// second declared stream its graph reads (kafka.Options.JoinSource), by
// its CREATE SOURCE's connector = 'kafka' options, on the first source's
// cluster unless it names brokers. None for any other query.
func kafkaJoinSource(q *planQuery, first kafka.Endpoint, k *kafkaFlags, env *Env) (kafka.Endpoint, error) {
	jq := viewJoinOf(q)
	if jq == nil {
		return kafka.Endpoint{}, nil
	}
	streams := declaredStreams(jq)
	if len(streams) < 2 {
		return kafka.Endpoint{}, nil
	}
	left, right := streams[0], streams[1]
	if !strings.EqualFold(right.Option("connector"), "kafka") {
		return kafka.Endpoint{}, fmt.Errorf("%w: query %s joins views over sources %s and %s; over Kafka the second is read from a topic too: CREATE SOURCE %s (...) WITH (connector = 'kafka', topic = 'TOPIC')", ErrUsage, jq.Name(), left.Name(), right.Name(), right.Name())
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

// viewJoinOf returns the join of two views q is, or that q's chain (each
// query reading one view) starts at; nil for any other query.
func viewJoinOf(q *planQuery) *planQuery {
	for !hasJoin(q) && len(q.Views()) == 1 {
		q = q.Views()[0]
	}
	if l, r, ok := q.IntervalJoin(); !ok || l.View() == nil || r.View() == nil {
		return nil
	}
	return q
}

// declaredStreams returns the declared streams q's graph reads, each
// once, in the order its plan decodes them (a join's left input's
// first): a Kafka run of a join of two views reads the first from the
// source, the second from the join source.
func declaredStreams(q *planQuery) []*ubik.Source {
	var out []*ubik.Source
	var walk func(*planQuery)
	input := func(s *ubik.Source) {
		if v := s.View(); v != nil {
			walk(v)
		} else if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	walk = func(n *planQuery) {
		if s, _, ok := n.TemporalJoin(); ok {
			input(s)
		} else if l, r, ok := n.IntervalJoin(); ok {
			input(l)
			input(r)
		} else {
			input(n.Source())
		}
	}
	walk(q)
	return out
}
