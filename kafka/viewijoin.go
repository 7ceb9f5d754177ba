package kafka

import (
	"fmt"

	"github.com/ubiksql/ubik/sql/plan"
)

// viewStreamJoin refuses a query that reads, directly or through other
// views, a view whose body is an interval join of two streams: over Kafka
// that join runs as a stage of its own (both inputs repartitioned by the
// join key, join.go), and a graph over such a view does not run yet. The
// file run and the in-process API run it (drive.Graph: the join is a root
// with both streams).
func viewStreamJoin(q *plan.Query) error {
	var walk func(n *plan.Query) error
	walk = func(n *plan.Query) error {
		for _, v := range n.Views() {
			if j := v.IJoin; j != nil && len(v.Views()) == 0 {
				return fmt.Errorf("%w: view %s is an interval join of the streams %s and %s, and query %s reads it; over Kafka a query over a view with an interval join of two streams does not run yet: run the graph from files (ubik run reads both streams' files), or aggregate the joined rows in the join's own query", ErrUnsupported, v.Name, j.Left.Name, j.Right.Name, q.Name)
			}
			if err := walk(v); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(q)
}
