package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// A file run of queries over views (CREATE VIEW v ... EMIT FINAL, named in
// another query's FROM) runs one graph in one process: every selected
// query and the views they read, each with its own operator, changelog
// and key. The last selected query is the graph's primary; the others'
// records arrive by the graph's view callback, named by
// Record.Meta.Query, and go to their own outputs (--output-dir DIR gives
// DIR/QUERY.tsv, or each CREATE SINK's path). A view no selected query
// writes (--query hourly runs minute_totals too) publishes nowhere.

// oneThreadBlock is how many lines a query on one thread decodes before
// it folds them (ubik.QueryOptions.BlockEvents): enough that the
// decoder's and the operator's code each stay in the instruction cache
// over a block, few enough that a bad line is reported soon after it.
const oneThreadBlock = 64

// inputQuery returns the query of q's chain that reads the declared
// source: q itself, or the view at the head of its chain.
func inputQuery(q *planQuery) *planQuery {
	for vs := q.Views(); len(vs) > 0; vs = q.Views() {
		q = vs[0] // the views of a join of two views read one source
	}
	return q
}

// firstInput returns the declared source q's run reads from --input:
// its chain's, the left stream of an interval join of two streams.
func firstInput(q *planQuery) *ubik.Source {
	in := inputQuery(q)
	if left, _, ok := in.IntervalJoin(); ok && len(in.Views()) == 0 {
		return left
	}
	return in.Source()
}

// stats returns the counters of the target's query.
func (t *runTarget) stats() ubik.Stats {
	if t.via == nil {
		return t.q.Stats()
	}
	st, _ := t.via.q.ViewStats(t.pq.Name())
	return st
}

// startTargets starts the targets' queries and returns those that own a
// ubik.Query (the ones to push to): each target on its own, or, when one
// reads a view, all of them in one graph owned by the last.
//
// onBad receives each input line a target's query did not apply cleanly,
// in input order (QueryOptions.OnEventError: the query is fed with Feed).
func startTargets(eng *ubik.Engine, targets []*runTarget, f *runFlags, lateHook func(string, *ubik.LateEvent),
	onBad func(t *runTarget, lineNo int64, event []byte, err error), stderr io.Writer) ([]*runTarget, error) {
	write := func(t *runTarget) func(changelog.Record) error {
		return func(r changelog.Record) error {
			t.outBuf = formatRecord(t.outBuf[:0], f.format, &r)
			_, err := t.w.Write(t.outBuf)
			return err
		}
	}
	options := func(t *runTarget) ubik.QueryOptions {
		name := t.pq.Name()
		var onLate func(*ubik.LateEvent)
		if lateHook != nil {
			onLate = func(ev *ubik.LateEvent) { lateHook(name, ev) }
		}
		blocks := 0
		if f.threads <= 1 {
			blocks = oneThreadBlock
		}
		return ubik.QueryOptions{Name: name, Strict: f.strict, OnLate: onLate, OnLateTable: onLate, OnRecord: write(t), Threads: f.threads, JoinBuffer: f.joinBuffer, BlockEvents: blocks,
			OnEventError: func(lineNo int64, event []byte, err *ubik.EventError) { onBad(t, lineNo, event, err.Err) }}
	}
	// An explicit --threads that a query cannot use is said, with why.
	noteThreads := func(t *runTarget, qo ubik.QueryOptions, why string) {
		if !f.set["threads"] || f.threads <= 1 || t.q.Threads() != 1 || f.quiet {
			return
		}
		if why == "" {
			why = t.q.OneThreadReason()
		}
		fmt.Fprintf(stderr, "ubik: %s: runs on one thread: %s\n", t.pq.Name(), why)
	}
	graph := false
	for _, t := range targets {
		graph = graph || len(t.pq.Views()) > 0
	}
	if !graph {
		for _, t := range targets {
			var err error
			qo := options(t)
			if t.q, err = eng.StartPlan(t.pq, qo); err != nil {
				return nil, err
			}
			noteThreads(t, qo, "")
		}
		return targets, nil
	}
	owner := targets[len(targets)-1]
	byName := map[string]*runTarget{}
	var with []*planQuery
	for _, t := range targets[:len(targets)-1] {
		t.via = owner
		byName[t.pq.Name()] = t
		with = append(with, t.pq)
	}
	writers := map[string]func(changelog.Record) error{}
	for name, t := range byName {
		writers[name] = write(t)
	}
	qo := options(owner)
	qo.OnViewLate = lateHook
	qo.OnViewRecord = func(r changelog.Record) error {
		if w := writers[r.Meta.Query]; w != nil {
			return w(r)
		}
		return nil // a view no selected query writes
	}
	q, err := eng.StartGraph(owner.pq, with, qo)
	if err != nil {
		return nil, err
	}
	owner.q = q
	noteThreads(owner, qo, "")
	return []*runTarget{owner}, nil
}

// readsView reports whether any of qs reads a view (the run is a graph).
func readsView(qs []*planQuery) bool {
	for _, q := range qs {
		if len(q.Views()) > 0 {
			return true
		}
	}
	return false
}

// targetNames names the run's queries for the state dir's identity.
func targetNames(targets []*runTarget) string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.pq.Name()
	}
	return strings.Join(names, ",")
}

// graphSecond returns the second declared source of a graph of views (a
// join of two views over two different sources), the one read beside the
// primary's: nil when the queries' views read one source.
func graphSecond(qs []*planQuery) *ubik.Source {
	if !readsView(qs) {
		return nil
	}
	first := inputQuery(qs[len(qs)-1]).Source()
	var walk func(q *planQuery) *ubik.Source
	walk = func(q *planQuery) *ubik.Source {
		vs := q.Views()
		if len(vs) == 0 {
			if q.Source() != first {
				return q.Source()
			}
			return nil
		}
		for _, v := range vs {
			if s := walk(v); s != nil {
				return s
			}
		}
		return nil
	}
	for _, q := range qs {
		if s := walk(q); s != nil {
			return s
		}
	}
	return nil
}

// streamJoin returns the query with an interval join of two declared
// streams among qs and the views they read (a graph runs at most one),
// or nil: its right stream is the run's second input, read beside its
// left, the run's first.
func streamJoin(qs []*planQuery) *planQuery {
	seen := map[*planQuery]bool{}
	var walk func(q *planQuery) *planQuery
	walk = func(q *planQuery) *planQuery {
		if seen[q] {
			return nil
		}
		seen[q] = true
		if _, _, ok := q.IntervalJoin(); ok && len(q.Views()) == 0 {
			return q
		}
		for _, v := range q.Views() {
			if j := walk(v); j != nil {
				return j
			}
		}
		return nil
	}
	for _, q := range qs {
		if j := walk(q); j != nil {
			return j
		}
	}
	return nil
}

// graphJoin returns the query with a temporal join among qs and the views
// they read (a graph runs at most one), or nil: its versioned table is
// the run's table input.
func graphJoin(qs []*planQuery) *planQuery {
	seen := map[*planQuery]bool{}
	var walk func(q *planQuery) *planQuery
	walk = func(q *planQuery) *planQuery {
		if seen[q] {
			return nil
		}
		seen[q] = true
		if _, _, ok := q.TemporalJoin(); ok {
			return q
		}
		for _, v := range q.Views() {
			if j := walk(v); j != nil {
				return j
			}
		}
		return nil
	}
	for _, q := range qs {
		if j := walk(q); j != nil {
			return j
		}
	}
	return nil
}
