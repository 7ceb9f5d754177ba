package kafka

import (
	"fmt"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
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

// runner is what the aggregating stage does with a partition's work: one
// drive.Driver, or a graphRunner for a query over views.
type runner interface {
	Push(raw []byte) error
	PushKeyed(raw, key []byte) error
	Mark() (int64, bool)
	Watermark() int64
	AdvanceWatermark(int64) error
	CloseOpenWindows() error
	Tick() error
	TakeCounts() drive.Counts
	Stats() drive.Stats
	Checkpoint(full bool, position []byte, put func(key, val []byte) error) error
	Restore(key, val []byte) ([]byte, error)
	FinishRestore()
	MetaKey() []byte
}

// driverRunner is one operator's driver.
type driverRunner struct{ *drive.Driver }

func (driverRunner) MetaKey() []byte { return []byte(drive.MetaKey) }

// graphRunner is a query over views: the watermark and mark are the
// root's (the input's), the gauges summed over every query.
type graphRunner struct{ *drive.Graph }

func (g graphRunner) Mark() (int64, bool) { return g.Root().Mark() }
func (g graphRunner) Watermark() int64    { return g.Root().Watermark() }
func (g graphRunner) Stats() drive.Stats {
	var s drive.Stats
	for _, n := range g.NodeStats() {
		s.LiveGroups += n.LiveGroups
		s.StateBytes += n.StateBytes
		s.Duplicates += n.Duplicates
		s.UnchangedSuppressed += n.UnchangedSuppressed
		s.DedupLate += n.DedupLate
		s.DedupKeys += n.DedupKeys
		s.DedupBytes += n.DedupBytes
	}
	return s
}

// CheckQuery reports whether the pipeline runs q's shape: a query over
// the source, or over a chain of views (each query reading one view; see
// the comment at the top). New checks it too; a host can call it before
// it connects.
func CheckQuery(q *plan.Query) error {
	if jq := viewJoinBelow(q); jq != nil {
		return checkViewJoin(q, jq) // viewjoin.go
	}
	views, err := chain(q)
	if err != nil || len(views) == 0 {
		return err
	}
	_, err = segmentsOf(q, views)
	return err
}

// chain returns q's views, the one reading the source first: the chain a
// graph runs. A join of a view with a stream is refused.
func chain(q *plan.Query) ([]*plan.Query, error) {
	var out []*plan.Query
	for n := q; ; {
		vs := n.Views()
		if n != q && n.Join != nil && len(vs) == 0 {
			break // a temporal join over the source: the chain's root (by a table column, a segment of its own: segmentsOf)
		}
		if n != q && isIntervalJoin(n) {
			break // an interval join of two streams: the chain's root (DESIGN.md, "A view with an interval join of two streams")
		}
		if len(vs) > 0 && n.IJoin != nil {
			return nil, mixedJoin(n, vs[0])
		}
		if len(vs) == 0 {
			break
		}
		out = append([]*plan.Query{vs[0]}, out...)
		n = vs[0]
	}
	return out, nil
}

// newGraphRunner builds a partition's graph: the primary's records go to
// emit, each view's to emitView with its query name; tbl's table options
// configure the root's temporal join, if it has one.
func (p *Pipeline) newGraphRunner(tbl drive.Config, emit func(*changelog.Record) error, emitView func(*changelog.Record) error, onRow func([]types.Value) error) (runner, error) {
	var viewLate func(string, *drive.LateEvent)
	if p.opts.OnViewLate != nil {
		viewLate = p.opts.OnViewLate
	} else if p.opts.OnLate != nil {
		viewLate = func(_ string, ev *drive.LateEvent) { p.opts.OnLate(ev) }
	}
	cfg := drive.Config{Emit: emit, Late: p.opts.OnLate, Now: p.opts.Now, ExternalWatermark: true, HostTicks: true, OnRow: onRow, Muted: p.muted,
		TableDecoder: tbl.TableDecoder, IncrementalJoinState: tbl.IncrementalJoinState, JoinBuffer: tbl.JoinBuffer, LateTable: tbl.LateTable}
	g, err := drive.NewHostGraph(p.q, cfg, emitView, viewLate, p.decoder())
	if err != nil {
		return nil, err
	}
	return graphRunner{g}, nil
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
