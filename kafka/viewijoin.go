package kafka

import (
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a view whose body is an interval join of two declared
// streams (clicks per campaign within five minutes of an impression, then
// hourly sums of them) runs as a chain whose root is the join
// (DESIGN.md, "A view with an interval join of two streams"). Its stages
// are the interval join's: stage 1 routes the left stream and the table
// stage the right one by the join key, both to Q-repartition, and the
// partitions of Q join. When the view groups by a join key column
// (its plan needs no exchange after the join: segmentsOf), the partition
// runs the whole chain's graph with the join at its root, and the readers
// that keep a join key column stay in that partition. Otherwise the partitions run the
// join alone, the joined rows go to Q-s2-repartition keyed by the view's
// GROUP BY, and Q-s2 runs the view's aggregate over them (without its
// join, drive.NewRowGraph) and the readers that follow it; a reader that
// groups by less starts a view repartition of its own, as in any chain.

// chainIJoinRoot reports whether v, the first view of a chain, is an
// interval join of two declared streams: the chain's root (chain).
func chainIJoinRoot(q, v *plan.Query) bool { return v != q && isIntervalJoin(v) }
