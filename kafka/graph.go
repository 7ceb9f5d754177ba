package kafka

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
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
// GROUP BY (chainQueries, topology.go; viewrepart.go).

// CheckQuery reports whether the pipeline runs q's shape: every shape the
// in-process runtime runs (the graph of q and the views it reads,
// drive.NewGraph), whose refusals it returns in their own words. New
// checks it too; a host can call it before it connects.
func CheckQuery(q *plan.Query) error {
	noop := func(*changelog.Record) error { return nil }
	if _, err := drive.NewGraph(q, nil, drive.Config{Emit: noop}, noop, nil); err != nil {
		return fmt.Errorf("%w: %s (in a file run too)", ErrUnsupported, strings.TrimPrefix(err.Error(), "drive: "))
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
