package kafka

import (
	"fmt"
	"slices"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query over views (FROM a windowed EMIT FINAL view of the script) runs
// as one graph per partition of the aggregating stage: the chain's first
// view (the root) reads the partition's events, and each view's final
// rows go, inside the process, to the query that reads it, as in a file
// run (drive.Graph). Each query of the chain publishes its own changelog
// to its own compacted topic, in the same transactions, and the whole
// graph's state is one partition's state in the state topic.
//
// Keeping the rows between the views inside one partition is exact only
// if every group of a reader lives in one partition. The partition of an
// event is the hash of the root's group key, so a reader's group must
// determine the root's group: its GROUP BY must name, as plain columns,
// the view's columns that repeat each GROUP BY term the partitioning
// follows. A reader that groups by less (hourly totals over every
// merchant, from per-merchant minutes) starts a segment of its own: the
// view's final rows reach it through a repartition topic keyed by its
// GROUP BY (segmentsOf, viewrepart.go).

// CheckQuery reports whether the pipeline runs q's shape: a query over
// the source, or over a chain of views (each query reading one view; see
// the comment at the top). New checks it too; a host can call it before
// it connects.
func CheckQuery(q *plan.Query) error {
	if jq := viewJoinBelow(q); jq != nil {
		return checkViewJoin(q, jq) // viewjoin.go
	}
	segs, err := chainQueries(q)
	if err != nil {
		return err
	}
	return checkChain(segs)
}

// checkChain refuses a stage that runs an interval join of a view with a
// declared stream, as a graph in process does (drive.Graph).
func checkChain(segs [][]*plan.Query) error {
	for _, seg := range segs {
		for _, n := range seg {
			if vs := n.Views(); len(vs) > 0 && n.IJoin != nil {
				return mixedJoin(n, vs[0])
			}
		}
	}
	return nil
}

// chainViews returns the queries the stages of segs run other than q,
// upstream first: the views q reads, down to the one reading the source.
func chainViews(q *plan.Query, segs [][]*plan.Query) []*plan.Query {
	var out []*plan.Query
	for _, seg := range segs {
		for _, r := range seg {
			if r != q && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// mixedJoin refuses query n, an interval join of view v with a declared
// stream, as a graph in process does (drive.Graph).
func mixedJoin(n, v *plan.Query) error {
	s := n.IJoin.Left
	if s.View != nil {
		s = n.IJoin.Right
	}
	return fmt.Errorf("%w: query %s joins view %s with stream %s: an interval join joins two views or two declared streams (in a file run too); join the stream's own windowed EMIT FINAL view instead", ErrUnsupported, n.Name, v.Name, s.Name)
}
