package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// task is the aggregating stage's work for one input partition: the
// graph of the segment's queries (drive.NewHostGraph, or
// drive.NewSegmentGraph for a segment reading views' rows), restored from
// (and checkpointed to) the same-numbered partition of the state topic.
type task struct {
	part int32
	g    *drive.Graph
	// marks are the marker tables of the graph's inputs, one per input
	// in the graph's order (Pipeline.ins).
	marks   []*tracker
	dd      *drive.HostDedup // its events' dedup, in a join's stage over a dedup key (newJoinDedup)
	touched bool             // changed since the last checkpoint
	emitted int64
}

// stage2 is the aggregating stage's work in the loop (loop.go).
type stage2 struct {
	p     *Pipeline
	tx    *txn
	tasks map[int32]*task
	owned map[int32]bool
	// direct mode: the watermarks of this instance's partitions.
	local *tracker
	idle  *idleClock
	seen  map[int32]bool // direct mode: owned partitions that delivered an event in this run
	// UntilCaughtUp: end tracks the source partitions in direct mode;
	// finishing is set when every owned operator reached the end of the
	// input in the open transaction.
	end       *ends
	finishing bool
	// fwdSent, fwdAt: the last watermark marker sent to the next
	// segment and when (viewrepart.go); reset when a transaction aborts.
	fwdSent []byte
	fwdAt   time.Time
	// ins name the graphs' inputs, each of which has a marker table.
	ins inputs
}

// runStage2 is the aggregating stage: it consumes the repartition topic (or
// the source topic itself when it is partitioned by the group key), keeps
// one operator per assigned partition, and in each transaction produces
// the changelog records to the sink topic, the changed state entries to the
// state topic, and commits its input offsets. Its operators live as long
// as a session: the next session restores them from the state topic.
func (p *Pipeline) runStage2(ctx context.Context) error {
	spec := loopSpec{name: "aggregate stage", group: p.name, topic: p.repTopic, txnID: p.name + "." + p.opts.InstanceID,
		reset: kgo.NewOffset().AtStart(), manual: map[string]bool{p.stateTopic: true}}
	if p.direct {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go p.watchSource(wctx) // this stage reads the source
		spec.topic, spec.reset = p.opts.Source.Topic, p.resetOffset()
		if p.tj != nil {
			spec.broadcast = p.repTopic // the table stage's rows (a join in the source's partitions)
		}
	}
	for _, f := range p.forwards() {
		spec.manual[f.topic] = true // its watermark markers
	}
	return p.runLoop(ctx, spec, p.newStage2)
}

func (p *Pipeline) newStage2(tx *txn) (stageWork, error) {
	st := &stage2{p: p, tx: tx, tasks: map[int32]*task{}, owned: map[int32]bool{},
		local: newTracker(0), idle: newIdleClock(p.opts.Source.IdleTimeout), seen: map[int32]bool{}}
	if p.opts.UntilCaughtUp && p.direct {
		st.end = newEnds(p.sourceEnd)
	}
	return st, nil
}

func (st *stage2) assigned(ctx context.Context, owned, dropped map[int32]bool, now time.Time) error {
	for part := range dropped {
		delete(st.tasks, part) // another instance may have changed it: restore
	}
	st.reassign(owned, now)
	if st.end == nil {
		return nil
	}
	return st.p.trackStarts(ctx, st.end, st.p.inGroup(), owned)
}

// process applies a batch; the transaction carrying the finals of an
// UntilCaughtUp run ends at once.
func (st *stage2) process(fs kgo.Fetches, now time.Time) (bool, error) {
	err := st.apply(fs, now)
	return st.finishing, err
}

// precommit makes the early emission that is due, then sends the next
// segment's watermark markers (after every row of the transaction), then
// the state entries.
//
// The early emission waits for the transaction's end: its records become
// visible only when the transaction commits, so emitting at a poll
// in the middle of it would show readers older values, as late, and
// produce records that a later emission in the same transaction
// replaces. At the end each (group, window) changed since its last
// emission is published once, with the newest value the transaction
// holds, no more often than EMIT EARLY's interval.
func (st *stage2) precommit(time.Time) error {
	if !st.finishing {
		for _, t := range st.tasks {
			if err := t.g.Tick(); err != nil && !drive.Skipped(err) {
				return err
			}
		}
	}
	if err := st.forwardMarks(); err != nil {
		return err
	}
	return st.checkpoint()
}

// ended drops every operator after an abort: they hold the aborted
// transaction's changes, and the next transaction restores the
// committed state.
func (st *stage2) ended(committed bool) bool {
	if st.end != nil {
		if committed {
			st.end.commit()
		} else {
			st.end.abort()
		}
	}
	if committed && st.finishing {
		st.p.caughtUp.Store(true)
		st.p.log.Info("kafka: caught up: the input is consumed to its end and every window is final")
		return true
	}
	st.finishing = false
	if !committed {
		clear(st.tasks)
		st.local = newTracker(0)
		st.fwdSent = nil
	}
	return false
}

// isFatal tells errors that a retry cannot fix (bad state, a null value,
// a bug recovered from a panic) from transient produce failures.
func isFatal(err error) bool {
	return errors.Is(err, drive.ErrBadState) || errors.Is(err, drive.ErrInternal) || errors.Is(err, ErrNullValue) || errors.Is(err, errBadWatermark) ||
		errors.Is(err, drive.ErrJoinBuffer) || errors.Is(err, drive.ErrIntervalJoinFull) || errors.Is(err, ErrViewJoinState)
}

func (st *stage2) reassign(owned map[int32]bool, now time.Time) {
	for part := range st.owned {
		if !owned[part] {
			delete(st.tasks, part)
			st.local.remove(part)
			st.idle.forget(part)
			delete(st.seen, part)
		}
	}
	for part := range owned {
		if !st.owned[part] {
			st.idle.touch(part, now)
		}
	}
	st.owned = owned
}

// ready restores an operator for every owned partition that has none.
func (st *stage2) ready(ctx context.Context) error {
	var need []int32
	for part := range st.owned {
		if st.tasks[part] == nil {
			need = append(need, part)
		}
	}
	if len(need) == 0 {
		return nil
	}
	sort.Slice(need, func(i, j int) bool { return need[i] < need[j] })
	restored, err := st.p.restore(ctx, need, st.newTask)
	if err != nil {
		return err
	}
	for _, t := range restored {
		st.tasks[t.part] = t
		if pw, ok := t.marks[0].parts[t.part]; ok && st.p.direct {
			st.local.observe(t.part, pw.wm)
		}
	}
	return nil
}

func (st *stage2) newTask(part int32) (*task, error) {
	p := st.p
	t := &task{part: part}
	for _, n := range p.inputParts() {
		t.marks = append(t.marks, newTracker(n))
	}
	emit := func(r *changelog.Record) error { return st.emit(t, r) }
	// A join's state is a small header entry and an entry per waiting
	// event, version or held row, written once and deleted with a
	// tombstone (exec.TemporalJoin.AppendEntries,
	// exec.IntervalJoin.AppendEntries), so a transaction writes only what
	// changed and no record grows with the state. A state topic of an
	// earlier version holding an interval join in one entry is read, and
	// the first checkpoint after it writes each row's entry.
	cfg := drive.Config{Emit: emit, Late: st.tx.lateHook(p.opts.OnLate), Now: p.opts.Now, ExternalWatermark: true,
		IncrementalJoinState: true, OnRow: st.forwardRow(t),
		HostTicks: true, // precommit ticks
	}
	if p.fwd != nil && p.fwd.joined {
		cfg.OnJoined, cfg.OnRow = cfg.OnRow, nil // the joined rows go to the aggregate's segment
	}
	if tj := p.tj; tj != nil {
		cfg.TableDecoder = tj.decoder()
		cfg.JoinBuffer = p.opts.JoinBuffer
		if tj.interval {
			if cfg.JoinBuffer == 0 {
				cfg.JoinBuffer = plan.DefaultJoinBuffer
			}
			cfg.LateTable = st.tx.lateHook(p.rightLate()) // each right row reaches one partition
		} else if part == 0 {
			cfg.LateTable = st.tx.lateHook(p.rightLate()) // every partition sees every table row: one reports the late ones
		}
	}
	top := p.top
	switch {
	case p.vj != nil:
		cfg.Deduplicated = p.deduplicated() // its segment's queries share the dedup stages' events
	case p.dedup || p.dedupJoin:
		top = withoutDedup(top) // the dedup stage, or the task's dedup, deduplicates its input
	}
	var err error
	if t.g, err = p.graphOf(top, cfg, emit, st.tx.viewLateHook(p.opts.OnViewLate)); err != nil {
		return nil, err
	}
	if st.ins == nil {
		for _, s := range t.g.Sources() {
			st.ins = append(st.ins, s.Name)
		}
		if s := t.g.SecondInput(); len(st.ins) == 1 && s != "" {
			st.ins = append(st.ins, s) // a join root's table or right stream
		}
		st.ins = st.ins[:min(len(st.ins), len(t.marks))]
	}
	t.dd, err = p.newJoinDedup(st.tx)
	return t, err
}

// emit produces one changelog record to its query's topic (the sink's,
// or a view's). The operator reuses the record's buffers, so they are
// copied; ubik never produces a null value, and a record without one is
// a bug that stops the query.
func (st *stage2) emit(t *task, r *changelog.Record) error {
	if r.Value == nil {
		return fmt.Errorf("%w: key %s", ErrNullValue, r.Key)
	}
	topic := st.p.opts.Sink.Topic
	if r.Meta.Query != st.p.q.Name {
		vs, ok := st.p.opts.ViewSinks[r.Meta.Query]
		if !ok {
			return fmt.Errorf("%w: a record of query %q, which has no sink", drive.ErrInternal, r.Meta.Query)
		}
		topic = vs.Topic
	}
	// Key, value and the header values in one slice of the arena's.
	a := &st.tx.out
	kv := a.bytes(len(r.Key) + len(r.Value) + changelog.HeadersSize(r.Meta))
	kv = append(append(kv, r.Key...), r.Value...)
	rec := a.record()
	rec.Topic, rec.Partition, rec.Key, rec.Value = topic, -1, kv[:len(r.Key):len(r.Key)], kv[len(r.Key):len(kv):len(kv)]
	rec.Headers = changelog.AppendHeadersIn(a.header(6), kv[len(kv):len(kv):cap(kv)], r.Meta)
	st.tx.produce(rec)
	st.tx.counts.recordsOut++
	t.emitted++
	t.touched = true
	return nil
}

// apply applies one poll's records, then moves each operator's watermark
// and performs the early emission that is due. The drivers count; their
// counts are added to the pipeline's at the end.
func (st *stage2) apply(fs kgo.Fetches, now time.Time) (err error) {
	defer drive.Recover(&err)
	defer st.takeCounts()
	p := st.p
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err == nil && len(fp.Records) > 0 {
			err = st.partition(fp.Topic, fp.Partition, fp.Records, now)
		}
	})
	if err != nil {
		return err
	}
	if p.direct {
		for part := range st.owned {
			st.local.get(part)
			st.local.setIdle(part, st.idle.idle(part, now))
		}
		p.publishSourceParts(st.owned, st.seen, st.idle, now)
	}
	for _, t := range st.tasks {
		if err := st.advance(t); err != nil {
			return err
		}
	}
	if p.tj != nil {
		st.publishTableLate()
	}
	if p.opts.UntilCaughtUp && !st.finishing && st.allAtEnd() {
		// As at the end of a file: every window finalizes and what is
		// pending is published (a continuous view's changes). The
		// watermark moves just far enough to close the open windows,
		// never to +infinity, so that a restart over more input counts
		// an event for a window closed here as late and applies an
		// event for a later window.
		for _, t := range st.tasks {
			t.touched = true
			if err := t.g.CloseOpenWindows(); err != nil && !drive.Skipped(err) {
				return err
			}
		}
		st.finishing = true
		return nil
	}
	return nil
}

// takeCounts adds what the graphs counted to the pipeline's counters. In
// repartition mode the first stage counted the events it consumed; a
// view's row is not an event of the input: of a graph reading rows, only
// the late and evaluation-error counts are kept.
func (st *stage2) takeCounts() {
	for _, t := range st.tasks {
		c := t.g.TakeCounts()
		if t.dd != nil { // the copies it dropped were applied to the query, as in a file run
			n := t.dd.TakeCounts()
			c.Applied, c.EvalErrors = c.Applied+n.Applied, c.EvalErrors+n.EvalErrors
		}
		if st.p.readsRows() {
			c = drive.Counts{EvalErrors: c.EvalErrors, Late: c.Late}
		}
		st.tx.count(c, st.p.direct)
	}
}

// partition applies one partition's records of a poll, in order. What is
// kept per partition (the consumed position, and in direct mode the
// clock of its last event and its watermark, the largest of its events'
// proposals) is updated once, after its records: nothing reads it
// between two records of a poll, and an abort rewinds it whole.
func (st *stage2) partition(topic string, part int32, recs []*kgo.Record, now time.Time) error {
	p := st.p
	t := st.tasks[part]
	if t == nil {
		return fmt.Errorf("kafka: record for partition %d of %s, which has no operator", part, topic)
	}
	if st.end != nil && topic == p.opts.Source.Topic {
		st.end.seen(part, recs[len(recs)-1].Offset) // control records included (kept for UntilCaughtUp)
	}
	var err error
	events, mark, marked := false, int64(math.MinInt64), false
	for _, r := range recs {
		if r.Attrs.IsControl() {
			continue // a transaction marker
		}
		t.touched = true
		var event bool
		if event, err = st.record(t, r); err != nil {
			break
		}
		if event {
			events = true
			if m, ok := t.g.Root().Mark(); ok && m > mark {
				mark, marked = m, true
			}
		}
	}
	if events {
		st.idle.touch(part, now)
		st.seen[part] = true
		if marked {
			st.local.observe(part, mark)
		}
	}
	return err
}

// record applies one input record by its kind: a watermark marker of
// one of the graph's inputs, a row of the second input (the table
// stage's), a view's row (a side of a join of two views tagged by its
// side), or an event of the source. event reports an event of the
// source in direct mode.
func (st *stage2) record(t *task, r *kgo.Record) (event bool, _ error) {
	p := st.p
	in, err := st.inputOf(r)
	switch {
	case errors.Is(err, ErrUnknownInput):
		p.unknownInput(st.tx, r, err)
		return false, nil
	case err != nil:
		return false, err
	case hasHeader(r, tableMarkerHeader) || !p.direct && hasHeader(r, markerHeader):
		m, err := decodeTracker(r.Value)
		if err != nil {
			return false, fmt.Errorf("%w at %s partition %d offset %d", err, r.Topic, r.Partition, r.Offset)
		}
		t.marks[in].merge(m)
		if wm := t.marks[0].watermark(); t.dd != nil && wm != math.MinInt64 {
			t.dd.AdvanceWatermark(wm) // at each marker, as a dedup stage does
		}
		return false, nil
	case p.ins[in].kind == inTable:
		return false, st.tableRow(t, r)
	case p.ins[in].rows():
		return false, st.row(t, in, r)
	}
	if p.direct {
		event = true
		err = t.g.Push(r.Value)
	} else {
		// Stage 1 keyed the record by the row's group key: the GROUP BY
		// is evaluated once, there.
		var key []byte
		if len(r.Key) > 0 && r.Key[0] == routeKeyVersion {
			key = r.Key[1:]
		}
		switch {
		case t.dd != nil:
			err = st.joinDeduped(t, r) // keyed by its dedup key, not a group's
		case t.g.Roots() > 1:
			// Roots of other GROUP BYs read the events too: each
			// evaluates its own (the key is the first's).
			err = p.joinFull(t.g.Push(r.Value), t.part)
		default:
			err = p.joinFull(t.g.PushKeyed(r.Value, key), t.part)
		}
	}
	if err != nil && !p.badEvent(st.tx, r, err) {
		return event, err
	}
	return event, nil
}

// inputOf is the graph's input a record is for: the source's for a
// record of the source topic a direct stage reads (its headers are the
// user's), else the one its tag names (inputs.of).
func (st *stage2) inputOf(r *kgo.Record) (int, error) {
	if st.p.direct && r.Topic == st.p.opts.Source.Topic {
		return 0, nil
	}
	return st.ins.of(r, st.untagged)
}

// untagged is the input of a record without a tag, as an earlier
// version wrote it: 1 for the table stage's records and a join of two
// views' right side's, else 0.
func (st *stage2) untagged(r *kgo.Record) (int, error) {
	if st.p.vj == nil {
		if st.p.tj != nil && (hasHeader(r, tableRowHeader) || hasHeader(r, tableMarkerHeader)) {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%w: a record without its input at %s partition %d offset %d", drive.ErrBadState, r.Topic, r.Partition, r.Offset)
}

// row applies a view's row (drive.AppendRow) to input in of the graph.
func (st *stage2) row(t *task, in int, r *kgo.Record) error {
	row, err := drive.DecodeRow(r.Value)
	if err != nil {
		return fmt.Errorf("a view row at %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	err = t.g.PushInputRow(in, row)
	var ee *drive.EventError
	if err != nil && (errors.As(err, &ee) || drive.Skipped(err)) {
		return nil // counted (an evaluation error of a reader), as a reader in a file run goes past it
	}
	return err
}

// allAtEnd reports whether this instance owns partitions and every one's
// operator has reached the end the input had at start: in direct mode
// its own source partition consumed to it, in repartition mode every
// source partition reported consumed to it by the markers (each follows
// the events before its position).
func (st *stage2) allAtEnd() bool {
	if len(st.owned) == 0 {
		return false
	}
	for part := range st.owned {
		t := st.tasks[part]
		if t == nil || st.p.direct && !st.end.done(part) {
			return false
		}
		for in, gi := range st.p.ins {
			if (in > 0 || !st.p.direct) && !t.marks[in].consumedTo(gi.end) {
				return false
			}
		}
	}
	return true
}
