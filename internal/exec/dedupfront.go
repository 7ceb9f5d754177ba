package exec

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A source's input dedup runs in front of the operator, in its host (a
// Dedup that internal/drive's dedup node holds), never inside it: the
// operator takes the query without it (NoDedup), and its host tells it of
// each event the dedup dropped (Skip) and of the dedup's state bytes
// (AddStateBytes, Config.OnAdvance), so that Rows, the watermark and
// StateBytes read as if the dedup were the operator's first step.

// NoDedup returns a copy of q without its source's input dedup, for an
// operator behind a Dedup.
func NoDedup(q *plan.Query) *plan.Query {
	if q.Source.Dedup == nil {
		return q
	}
	c := *q
	src := *q.Source
	src.Dedup = nil
	c.Source = &src
	return &c
}

// noDedup refuses a query whose source declares a dedup_key.
func noDedup(q *plan.Query) error {
	if q.Source.Dedup == nil {
		return nil
	}
	return fmt.Errorf("exec: query %s reads source %s, which declares a dedup_key: its input dedup runs in front of the operator (NewDedup), and the operator takes the query without it (NoDedup)", q.Name, q.Source.Name)
}

// Taking reports why Process would apply nothing now (ErrFinished,
// ErrQueued), nil if it would take a row: a host asks before its dedup
// admits an event, so a refused event is not admitted either.
func (o *Operator) Taking() error {
	if o.finished {
		return ErrFinished
	}
	if o.workHead < len(o.work) {
		return ErrQueued
	}
	return nil
}

// Skip counts row as pushed though the host's dedup dropped it: a copy
// (observe: its event time still moves the watermark, as every decoded
// event's does) or an event beyond the dedup horizon (not observed).
func (o *Operator) Skip(row []types.Value, observe bool) error {
	if err := o.Taking(); err != nil {
		return err
	}
	o.restored = true
	o.stats.Rows++
	o.rowClock = 0
	if !observe {
		return nil
	}
	return o.observeTime(row)
}

// AddStateBytes adds n (negative: frees) to StateBytes: the host's state
// in front of the operator (its input dedup's keys) is live state too.
func (o *Operator) AddStateBytes(n int64) { o.addBytes(n) }
