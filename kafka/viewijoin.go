package kafka

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over a view whose body is an interval join of two declared
// streams (clicks per campaign within five minutes of an impression, then
// hourly sums of them) runs as a chain whose root is the join
// (DESIGN.md, "Interval joins of two streams"). Its stages
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

// viewJoinSideStreamJoin refuses a join of two views (q) whose side v
// reads, directly or through other views, an interval join of two
// streams: the side's pipeline reads one topic, and that join reads two.
func viewJoinSideStreamJoin(q, v *plan.Query) error {
	r := v
	if up := v.Upstream(); len(up) > 0 {
		r = up[len(up)-1]
	}
	if isIntervalJoin(r) {
		j := r.IJoin
		if r == v {
			return fmt.Errorf("%w: query %s joins view %s, an interval join of the streams %s and %s; over Kafka a side of a join of two views reads one topic, and that join reads two: join the views in a query over a chain (a view that is an interval join of the streams runs at the root of a chain), or run the graph from files", ErrUnsupported, q.Name, v.Name, j.Left.Name, j.Right.Name)
		}
		return fmt.Errorf("%w: query %s joins view %s, which reads view %s, an interval join of the streams %s and %s; over Kafka a side of a join of two views reads one topic, and that join reads two: join the views in a query over the chain (a view that is an interval join of the streams runs at the root of a chain), or run the graph from files", ErrUnsupported, q.Name, v.Name, r.Name, j.Left.Name, j.Right.Name)
	}
	return nil
}
