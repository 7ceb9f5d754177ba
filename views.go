package ubik

import (
	"fmt"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// StartGraph starts pq together with the queries in with, and every view
// any of them reads (CREATE VIEW v AS SELECT ... EMIT FINAL, named in
// another query's FROM), in one graph: each query has its own operator,
// changelog and key; the view's final rows feed its readers in process,
// typed; the watermark of a reader follows its view's
// (plan.Query.ViewWatermark). pq's records go to OnRecord or Next, as
// for StartPlan; the other queries' to OnViewRecord, each naming its
// query in Record.Meta.Query. Push, PushRow, AdvanceWatermark and Close
// act on the queries that read the declared source; Checkpoint and
// Restore cover the whole graph at one input position; Stats are pq's
// operator counters with the input counters of the source: EventsIn and
// Malformed are the source's, Late and EvalErrors every query's of the
// graph (a view's late events are the input's), and for a join of two
// views over two sources Table holds the second source's (its events,
// malformed, and the late events of the views over it). ViewStats gives
// each query's own.
//
// A query that other queries of the graph read must deliver by callback:
// with a non-empty with, OnRecord is required when pq is read by one of
// them.
func (e *Engine) StartGraph(p *Plan, with []*Plan, qo QueryOptions) (q *Query, err error) {
	ws := make([]*plan.Query, len(with))
	for i, w := range with {
		ws[i] = w.q
	}
	return e.startGraph(p, ws, qo)
}

func (e *Engine) startGraph(p *Plan, with []*plan.Query, qo QueryOptions) (q *Query, err error) {
	defer func() {
		if err != nil {
			q = nil
		}
	}()
	defer e.recover(&err)
	if p == nil {
		return nil, ErrNoQuery
	}
	pq := p.q
	cfg := drive.Config{
		MaxPending:         e.opts.MaxPendingRecords,
		Late:               lateHook(qo.OnLate),
		Now:                e.opts.Now,
		Logger:             e.opts.Logger,
		Strict:             qo.Strict,
		CountsInCheckpoint: true,
		JoinBuffer:         qo.JoinBuffer, // a view's temporal join's
		LateTable:          lateHook(qo.OnLateTable),
		Threads:            qo.Threads,
		OnEventError:       qo.OnEventError,
		BlockEvents:        qo.BlockEvents,
	}
	if qo.OnRecord != nil {
		onRecord := qo.OnRecord
		cfg.Emit = func(r *changelog.Record) error { return onRecord(*r) }
	}
	var viewEmit func(*changelog.Record) error
	if qo.OnViewRecord != nil {
		on := qo.OnViewRecord
		viewEmit = func(r *changelog.Record) error { return on(*r) }
	}
	g, err := drive.NewGraph(pq, with, cfg, viewEmit, viewLateHook(qo.OnViewLate))
	if err != nil {
		return nil, fmt.Errorf("ubik: %w", err)
	}
	return &Query{plan: pq, pub: p, callback: qo.OnRecord != nil, d: g, onEventError: qo.OnEventError,
		oneThread: drive.ThreadsFallback(pq, cfg)}, nil
}

// withQueries resolves QueryOptions.With.
func withQueries(prog *plan.Program, names []string) ([]*plan.Query, error) {
	var out []*plan.Query
	for _, name := range names {
		var found *plan.Query
		for _, q := range prog.Queries {
			if q.Name == name {
				found = q
			}
		}
		if found == nil {
			return nil, fmt.Errorf("ubik: QueryOptions.With names %q, which is not a query of the script", name)
		}
		out = append(out, found)
	}
	return out, nil
}

// Queries returns the names of the queries the Query runs: its own, or
// for a query over views every query of its graph, upstream first.
func (q *Query) Queries() []string {
	var names []string
	for _, p := range q.d.Queries() {
		names = append(names, p.Name)
	}
	return names
}

// ViewStats returns the counters of one query of the graph (the query
// itself, a view it reads, a With query): its operator's, with the
// events (or view rows) it was given.
func (q *Query) ViewStats(name string) (Stats, bool) {
	d := q.d.Driver(name)
	if d == nil {
		return Stats{}, false
	}
	c := d.Counts()
	st := operatorStats(d.Stats())
	st.EventsIn, st.Malformed, st.Pending, st.Queued = c.Events, c.Malformed, d.Pending(), d.Queued()
	return st, true
}
