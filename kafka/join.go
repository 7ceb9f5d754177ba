package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query with an event-time temporal join (JOIN t FOR SYSTEM_TIME AS OF
// s.ts) reads two topics: the stream (Options.Source), repartitioned by
// the query's GROUP BY key as any query's events, and the versioned table
// (Options.Table), read by a third stage, the table stage (group Q-tbl,
// transactional id Q-tbl.<instance>), which copies every table row to
// every partition of the repartition topic, a broadcast, and after them
// its table watermark markers (the table partitions' watermarks, as stage
// 1's markers carry the source's). Each aggregating partition then holds
// every version of every key, and its join (exec.TemporalJoin, with both
// watermarks external) sees, in its one partition, the events of its
// groups, the table rows and the two sets of markers, each marker after
// the records it covers in its producer's order: an event waits until
// the table watermark (the minimum over the table's partitions) has
// passed its time, so every table row at or before it has arrived unless
// it was late in its own table partition, and joins the version of its
// key valid then, whatever the partitioning and the restart point. The
// join's waiting events and versions are one entry of the partition's
// state, checkpointed with the operator in each transaction; the table
// markers' table is part of the checkpointed position. See DESIGN.md,
// "Temporal joins".

// Header keys of the table stage's records on the repartition topic.
const (
	tableRowHeader    = "ubik.trow"
	tableMarkerHeader = "ubik.twm"
	// tablePartHeader: a temporal join's table row's own table
	// partition (4 bytes, big-endian), whose watermark judges it late.
	tablePartHeader = "ubik.tpart"
)

var (
	tableRowKey    = []byte("ubik.trow")
	tableMarkerKey = []byte("ubik.twm")
)

// tableJoin is a temporal join pipeline's table part.
type tableJoin struct {
	ep       Endpoint
	interval bool            // an interval join's right stream: routed by the join key, not broadcast
	n        int             // partitions of the table topic
	end      map[int32]int64 // UntilCaughtUp: the table topic's end offsets at start
}

// tableGroup is the table stage's consumer group.
func (p *Pipeline) tableGroup() string { return p.name + "-tbl" }

// joinedQuery is q (an interval join of two streams, or a temporal join
// grouped by a table column) without its join: the aggregate over the
// joined rows, which a segment after the join's reads from a repartition
// by its GROUP BY key (viewrepart.go) and applies as they are
// (drive.Driver.ApplyRow). The joined row's columns, the GROUP BY, the
// windows, the aggregates and the name are q's, so its records are
// those of q's operator in a file run. Computed and TIMESTAMP(p) cells
// of the joined row were made by the join's segment (decoded, rounded,
// evaluated) and travel as they are (drive.AppendRow): ApplyRow neither
// rounds nor evaluates them again.
func joinedQuery(q *plan.Query) *plan.Query {
	a := *q
	a.IJoin, a.Join = nil, nil
	return &a
}

// joinRepartitioned reports whether q's joined rows are repartitioned by
// its GROUP BY key to a segment of their own: its join's partitioning
// (the join key, or any partition for a temporal join) does not hold
// its groups.
func joinRepartitioned(q *plan.Query) bool {
	return isIntervalJoin(q) && !drive.IntervalKeyed(q) || q.Join != nil && !drive.StreamKeyed(q)
}

// isIntervalJoin reports whether q is an interval join of two streams
// (the second input a topic of its own, read by the table stage).
func isIntervalJoin(q *plan.Query) bool { return q.IJoin != nil && len(q.Views()) == 0 }

// secondInput is a join's second input: a temporal join's versioned
// table, or an interval join's right stream; its columns used; how
// errors name it; the statement that declares it.
func secondInput(q *plan.Query) (src *plan.Source, used []bool, what, create string) {
	if q.IJoin != nil {
		return q.IJoin.Right, q.RightUsed(), "source " + q.IJoin.Right.Name, "CREATE SOURCE"
	}
	return q.Join.Table, q.TableUsed(), "table " + q.Join.Table.Name, "CREATE TABLE"
}

// newTableJoin checks the second topic of a join query: a temporal
// join's table, an interval join's right stream.
func newTableJoin(opts *Options) (*tableJoin, error) {
	q := opts.Query
	if up := q.Upstream(); len(up) > 0 && (up[len(up)-1].Join != nil || isIntervalJoin(up[len(up)-1])) {
		q = up[len(up)-1] // a chain's root with a temporal join or an interval join of two streams (graph.go, chain)
	}
	if q.Join == nil && !isIntervalJoin(q) {
		if opts.Table.Topic != "" {
			return nil, fmt.Errorf("%w: a second input's topic (%s), but query %s has no join of a stream with a table or another stream", ErrConfig, opts.Table.Topic, q.Name)
		}
		return nil, nil
	}
	t, used, what, create := secondInput(q)
	if opts.Table.Topic == "" {
		return nil, fmt.Errorf("%w: query %s joins %s: give its topic (Options.Table; %s %s ... WITH (connector = 'kafka', topic = '...'))", ErrConfig, q.Name, what, create, t.Name)
	}
	if opts.Source.PartitionedByKey {
		if q.IJoin != nil {
			return nil, fmt.Errorf("%w: query %s is an interval join, whose inputs both reach the join through the repartition topic, split by the join key: it cannot read the source partitioned by key (drop partitioned_by_key)", ErrConfig, q.Name)
		}
		return nil, fmt.Errorf("%w: query %s has a temporal join, whose table reaches every partition through the repartition topic: it cannot read the source partitioned by key (drop partitioned_by_key)", ErrConfig, q.Name)
	}
	switch opts.Table.Topic {
	case opts.Source.Topic:
		return nil, fmt.Errorf("%w: %s and the source are the same topic %s", ErrConfig, what, opts.Table.Topic)
	case opts.Sink.Topic:
		return nil, fmt.Errorf("%w: %s and the sink are the same topic %s", ErrConfig, what, opts.Table.Topic)
	}
	if len(opts.Table.Config.Brokers) == 0 {
		opts.Table.Config = opts.Source.Config
	}
	if !sameCluster(opts.Source.Config, opts.Table.Config) {
		return nil, fmt.Errorf("%w: %s (%s) must be on the source's cluster (%s): a Kafka transaction cannot span two", ErrConfig, what, opts.Table.Config, opts.Source.Config)
	}
	if q.Join != nil && opts.Table.From != FromEarliest {
		return nil, fmt.Errorf("%w: table %s is read from its start: every version counts (from = earliest)", ErrConfig, t.Name)
	}
	if opts.Table.IdleTimeout == 0 {
		opts.Table.IdleTimeout = DefaultIdleTimeout
	}
	if err := drive.NewMessageSourceDecoder(t, used, opts.Table.Format).Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, what, err)
	}
	return &tableJoin{ep: opts.Table, interval: q.IJoin != nil}, nil
}

// prepareTable finds the table topic's partitions (and, UntilCaughtUp,
// its end offsets).
func (p *Pipeline) prepareTable(ctx context.Context, adm *admClient) error {
	tj := p.tj
	n, err := topicPartitions(ctx, adm, tj.ep.Topic)
	if err != nil {
		return err
	}
	if n == 0 {
		_, _, what, _ := secondInput(p.root)
		return fmt.Errorf("%w: topic %s (%s) does not exist", ErrConfig, tj.ep.Topic, what)
	}
	tj.n = n
	if p.opts.UntilCaughtUp {
		if tj.end, err = endOffsets(ctx, adm, tj.ep.Topic, n); err != nil {
			return err
		}
	}
	return nil
}

// runTableStage is the table stage: it consumes the table topic, checks
// that each record decodes to a row with a time, and produces it
// unchanged to every partition of the repartition topic, then a table
// watermark marker to every partition, with the table offsets, in one
// transaction. Malformed rows are counted and reported here, once.
func (p *Pipeline) runTableStage(ctx context.Context) error {
	return p.redo(ctx, "table stage", p.tableGroup(), p.tableSession)
}

func (p *Pipeline) tableSession(ctx context.Context, committedAt *time.Time) (retErr error) {
	tj := p.tj
	a := &assignment{owned: map[int32]bool{}}
	group := p.tableGroup()
	txnID := group + "." + p.opts.InstanceID
	reset := kgo.NewOffset().AtStart()
	if tj.interval && tj.ep.From == FromLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	s, closeSession, err := p.session(group, tj.ep.Topic, txnID, reset, a, map[string]bool{p.repTopic: true})
	if err != nil {
		return err
	}
	defer func() {
		closeSession()
		if !isRedo(transient(retErr)) {
			p.leave(group)
		}
	}()
	if err := p.fence(ctx, s, txnID); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	table, used, what, _ := secondInput(p.root)
	dec := drive.NewMessageSourceDecoder(table, used, tj.ep.Format)
	var router *drive.Driver // an interval join: the right rows' router by the join key
	if tj.interval {
		if router, err = drive.NewIntervalRouter(p.root, 1, drive.Config{Decoder: dec}); err != nil {
			return err
		}
	}
	wm := newTracker(tj.n)
	committedWM := wm.clone()
	ownedNow := map[int32]bool{}
	idle := newIdleClock(tj.ep.IdleTimeout)
	var lastSent []byte
	var lastSentAt time.Time
	// sentWM: each table partition's watermark in the last marker sent.
	sentWM := map[int32]int64{}
	var perr firstErr
	promise := func(_ *kgo.Record, err error) { perr.set(err) }
	pctx := context.WithoutCancel(ctx)
	var end *ends
	if p.opts.UntilCaughtUp {
		end = newEnds(tj.end)
	}
	for {
		fs, err := p.poll(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := p.opts.Now()
		if owned, ok := a.snapshot(); ok {
			ownedNow = owned
			for part := range wm.parts {
				if !owned[part] {
					wm.remove(part)
					idle.forget(part)
				}
			}
			for part := range owned {
				if _, ok := wm.parts[part]; !ok {
					wm.get(part)
					idle.touch(part, now)
				}
			}
			if end != nil {
				from := FromEarliest // a table: every version counts
				if tj.interval {
					from = tj.ep.From
				}
				if err := p.trackStartsOf(ctx, end, group, tj.ep.Topic, from, owned); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
		}
		if err := s.Begin(); err != nil {
			return beginFailed(err)
		}
		var rows, bad int64
		workErr := func() (err error) {
			defer drive.Recover(&err)
			fs.EachRecord(func(r *kgo.Record) {
				if err != nil {
					return
				}
				if end != nil {
					end.seen(r.Partition, r.Offset)
				}
				if r.Attrs.IsControl() {
					return
				}
				idle.touch(r.Partition, now)
				wm.get(r.Partition)
				rows++
				if router != nil {
					// One partition, the one the left rows of its join
					// key go to (the same key bytes, the same partitioner).
					key, rerr := router.Route(append(make([]byte, 0, 32), routeKeyVersion), r.Value)
					if mark, ok := router.Mark(); ok {
						wm.observe(r.Partition, mark)
					}
					if rerr != nil {
						bad++
						if p.opts.OnBadEvent != nil {
							p.opts.OnBadEvent(&BadEvent{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: fmt.Errorf("%s: %w", what, rerr)})
						}
						return
					}
					if key != nil { // nil: a CSV header record
						s.Produce(pctx, &kgo.Record{Topic: p.repTopic, Partition: -1, Key: key, Value: r.Value,
							Headers: []kgo.RecordHeader{{Key: tableRowHeader, Value: []byte{1}}}}, promise)
					}
					return
				}
				row, derr := dec.Decode(r.Value)
				if derr == nil && row != nil && row[table.TimeCol].Null {
					derr = fmt.Errorf("column %s: event time is null", table.Columns[table.TimeCol].Name)
				}
				if derr != nil {
					bad++
					if p.opts.OnBadEvent != nil {
						p.opts.OnBadEvent(&BadEvent{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: fmt.Errorf("table %s: %w", table.Name, derr)})
					}
					return
				}
				if row == nil {
					return // a CSV header record
				}
				// A row behind its own table partition's watermark is
				// late (as in a file run, where the table's watermark
				// moves row by row): the partitions judge it by that
				// partition's watermark in their markers, so the marker
				// covering the rows before it goes first, if this poll's
				// rows moved it (else a poll's rows would all be judged
				// by the watermark before the poll, and what is late
				// would depend on where the polls and the restarts fall).
				if pw := wm.get(r.Partition); row[table.TimeCol].I < pw.wm && pw.wm > sentWM[r.Partition] {
					for part := range wm.parts {
						wm.setIdle(part, idle.idle(part, now))
					}
					enc := wm.appendTo(nil)
					for i := 0; i < p.nParts; i++ {
						s.Produce(pctx, &kgo.Record{Topic: p.repTopic, Partition: int32(i), Key: tableMarkerKey, Value: enc,
							Headers: []kgo.RecordHeader{{Key: tableMarkerHeader, Value: []byte{1}}}}, promise)
						p.c.markersOut.Add(1)
					}
					for part, pw := range wm.parts {
						sentWM[part] = pw.wm
					}
				}
				wm.observe(r.Partition, satSub(row[table.TimeCol].I, table.WatermarkDelay))
				part := binary.BigEndian.AppendUint32(nil, uint32(r.Partition))
				for i := 0; i < p.nParts; i++ {
					s.Produce(pctx, &kgo.Record{Topic: p.repTopic, Partition: int32(i), Key: tableRowKey, Value: r.Value,
						Headers: []kgo.RecordHeader{{Key: tableRowHeader, Value: []byte{1}}, {Key: tablePartHeader, Value: part}}}, promise)
				}
			})
			return err
		}()
		p.c.tableRows.Add(rows)
		p.c.tableMalformed.Add(bad)
		for part := range wm.parts {
			wm.setIdle(part, idle.idle(part, now))
			if end != nil && ownedNow[part] {
				if pos, ok := end.position(part); ok {
					wm.setPos(part, pos)
				}
			}
		}
		if len(wm.parts) > 0 && workErr == nil {
			enc := wm.appendTo(nil)
			if string(enc) != string(lastSent) || now.Sub(lastSentAt) >= markerEvery {
				for i := 0; i < p.nParts; i++ {
					s.Produce(pctx, &kgo.Record{Topic: p.repTopic, Partition: int32(i), Key: tableMarkerKey, Value: enc,
						Headers: []kgo.RecordHeader{{Key: tableMarkerHeader, Value: []byte{1}}}}, promise)
					p.c.markersOut.Add(1)
				}
				lastSent, lastSentAt = enc, now
				for part, pw := range wm.parts {
					sentWM[part] = pw.wm
				}
			}
		}
		if workErr == nil {
			workErr = p.flush(ctx, s)
		}
		if workErr == nil {
			workErr = perr.take()
		}
		committed, err := p.end(ctx, s, group, workErr == nil)
		perr.take()
		s.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return endFailed(err)
		}
		if committed {
			*committedAt = time.Now()
		}
		if end != nil {
			if committed {
				end.commit()
			} else {
				end.abort()
			}
		}
		if committed {
			committedWM = wm.clone()
		} else {
			wm = committedWM.clone() // as stage 1: a marker never runs ahead of the rows produced again
			for part := range wm.parts {
				if !ownedNow[part] {
					wm.remove(part)
				}
			}
			lastSent = nil
			clear(sentWM)
			if errors.Is(workErr, drive.ErrInternal) {
				return workErr
			}
			if workErr != nil {
				p.log.Warn("kafka: table transaction aborted", "err", workErr)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func satSub(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

func hasHeader(r *kgo.Record, key string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return true
		}
	}
	return false
}

// tableBehind is a driver that judges a table row late by its own table
// partition's watermark too (drive.Driver.PushTableBehind).
type tableBehind interface {
	PushTableBehind(raw []byte, floor int64) error
}

func headerValue(r *kgo.Record, key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// tableRunner is the part of a partition's driver a temporal join uses.
type tableRunner interface {
	PushTable(raw []byte) error
	AdvanceTableWatermark(wm int64) error
	JoinStats() drive.JoinStats
}

// tableRecord handles a record of the table stage in the aggregating
// stage (a table row or a table marker) and reports whether r was one.
// A table row goes to every partition: only partition 0 reports its
// errors, so each is reported once.
func (st *stage2) tableRecord(t *task, r *kgo.Record) (bool, error) {
	switch {
	case hasHeader(r, tableMarkerHeader):
		m, err := decodeTracker(r.Value)
		if err != nil {
			return true, fmt.Errorf("%w at %s partition %d offset %d", err, r.Topic, r.Partition, r.Offset)
		}
		t.twm.merge(m)
		return true, nil
	case hasHeader(r, tableRowHeader):
		tr, ok := t.d.(tableRunner)
		if !ok {
			return true, fmt.Errorf("%w: a table row for a query without a temporal join", drive.ErrInternal)
		}
		var err error
		if tb, ok := t.d.(tableBehind); ok && !st.p.tj.interval {
			// Late when behind its own table partition's watermark
			// (every partition knows it from the same markers).
			floor := int64(math.MinInt64)
			if part, ok := headerValue(r, tablePartHeader); ok && len(part) == 4 {
				if pw, ok := t.twm.parts[int32(binary.BigEndian.Uint32(part))]; ok {
					floor = pw.wm
				}
			}
			err = tb.PushTableBehind(r.Value, floor)
		} else {
			err = tr.PushTable(r.Value)
		}
		var ee *drive.EventError
		if errors.As(err, &ee) {
			if t.part == 0 || st.p.tj.interval { // an interval join's right row reaches one partition
				st.p.badEvent(r, err)
			}
			return true, nil
		}
		if errors.Is(err, drive.ErrIntervalJoinFull) {
			err = st.p.intervalJoinFull(err, t.part)
		}
		return true, err
	}
	return false, nil
}

// rightLate is where a join's late rows of its second input (a temporal
// join's table, an interval join's right stream) go: the query's OnLate,
// also in a segment of a chain whose root view is the join (newSegments),
// whose own OnLate is its primary view's.
func (p *Pipeline) rightLate() func(*drive.LateEvent) {
	if p.lateRight != nil {
		return p.lateRight
	}
	return p.opts.OnLate
}

// intervalRunner is the part of a partition's driver an interval join uses.
type intervalRunner interface {
	InputWatermarks() (first, second int64)
	TableCounts() drive.Counts
	IntervalStats() drive.IntervalStats
}

// inputWatermark is the stream watermark the partition's driver has: an
// interval join's left input's (its operator's is the joined stream's,
// which may be ahead of the left input's), else the operator's.
func (st *stage2) inputWatermark(t *task) int64 {
	if ir, ok := t.d.(intervalRunner); ok && st.p.tj != nil && st.p.tj.interval {
		first, _ := ir.InputWatermarks()
		return first
	}
	return t.d.Watermark()
}

// advanceTables moves each join's table watermark (an interval join's:
// its right input's) to its markers' minimum, and publishes the late
// table rows (counted in partition 0's join only: every partition sees
// every row, and a row is late in all or none, being behind its own table
// partition's watermark; an interval join's right rows are late in the
// one partition each reaches, so every partition counts its own).
func (st *stage2) advanceTables() error {
	var late int64
	for _, t := range st.tasks {
		tr, ok := t.d.(tableRunner)
		if !ok {
			continue
		}
		cur := tr.JoinStats().TableWM
		ir, interval := t.d.(intervalRunner)
		interval = interval && st.p.tj.interval
		if interval {
			_, cur = ir.InputWatermarks()
		}
		if wm := t.twm.watermark(); wm != math.MinInt64 && wm > cur {
			t.touched = true
			if err := tr.AdvanceTableWatermark(wm); err != nil && !drive.Skipped(err) {
				return err
			}
		}
		if interval {
			late += ir.TableCounts().Late
		} else if t.part == 0 {
			st.p.c.tableLate.Store(tr.JoinStats().LateTableRows)
		}
	}
	if st.p.tj.interval {
		st.p.c.tableLate.Store(late)
	}
	return nil
}

// intervalJoinFull says, for a row an interval join cannot hold, why its
// state grew and what to do: the stage stops (a retry would meet the same
// state).
func (p *Pipeline) intervalJoinFull(err error, part int32) error {
	return fmt.Errorf("%w. Partition %d of %s holds Options.JoinBuffer rows of the join. A row is held until the other input's watermark passes its time and the interval; over Kafka an input's watermark is the minimum over its topic's partitions (%s, %s): one that gets no rows holds it back until it is idle (idle_timeout, %s and %s). Produce to every partition, shorten the idle_timeout, narrow the interval, or raise Options.JoinBuffer",
		err, part, p.repTopic, p.opts.Source.Topic, p.tj.ep.Topic, p.opts.Source.IdleTimeout, p.tj.ep.IdleTimeout)
}

// joinBufferFull says, for an event the join cannot hold, why the table's
// watermark is behind and what to do: the stage stops (a retry would
// meet the same full buffer).
func (p *Pipeline) joinBufferFull(err error) error {
	return fmt.Errorf("%w. Over Kafka the table's watermark is the minimum over the partitions of topic %s: one that gets no rows holds it back until it is idle (idle_timeout, %s), and a table whose rows come later than the events they price makes the events wait; produce table rows to every partition, shorten the table's idle_timeout, or raise Options.JoinBuffer",
		err, p.tj.ep.Topic, p.tj.ep.IdleTimeout)
}

// publishJoin publishes the owned joins' gauges for Stats (an interval
// join: JoinJoined its joined rows, JoinWaiting its held rows of both
// inputs).
func (st *stage2) publishJoin() {
	var s drive.JoinStats
	for _, t := range st.tasks {
		if ir, ok := t.d.(intervalRunner); ok && st.p.tj.interval {
			is := ir.IntervalStats()
			s.Joined, s.Buffered = s.Joined+is.Matches, s.Buffered+is.LeftHeld+is.RightHeld
			continue
		}
		if tr, ok := t.d.(tableRunner); ok {
			js := tr.JoinStats()
			s.Joined, s.Unmatched, s.Buffered, s.Versions, s.Keys = s.Joined+js.Joined, s.Unmatched+js.Unmatched,
				s.Buffered+js.Buffered, s.Versions+js.Versions, s.Keys+js.Keys
		}
	}
	c := &st.p.c
	c.joinJoined.Store(s.Joined)
	c.joinUnmatched.Store(s.Unmatched)
	c.joinWaiting.Store(s.Buffered)
	c.joinVersions.Store(s.Versions)
	c.joinKeys.Store(s.Keys)
}

// A temporal join's checkpoint position holds both marker tables: a
// uvarint length, the source's (as any query's position), the table's.
func joinPosition(src, table *tracker) []byte {
	s := src.appendTo(nil)
	b := binary.AppendUvarint(nil, uint64(len(s)))
	b = append(b, s...)
	return table.appendTo(b)
}

func splitJoinPosition(b []byte) (src, table *tracker, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: temporal join position", errBadWatermark)
	}
	if src, err = decodeTracker(b[k : k+int(n)]); err != nil {
		return nil, nil, err
	}
	if table, err = decodeTracker(b[k+int(n):]); err != nil {
		return nil, nil, err
	}
	return src, table, nil
}
