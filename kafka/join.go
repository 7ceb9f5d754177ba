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
	"github.com/ubiksql/ubik/sql/plan"
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
)

var (
	tableRowKey    = []byte("ubik.trow")
	tableMarkerKey = []byte("ubik.twm")
)

// tableJoin is a temporal join pipeline's table part.
type tableJoin struct {
	ep  Endpoint
	n   int             // partitions of the table topic
	end map[int32]int64 // UntilCaughtUp: the table topic's end offsets at start
}

// tableGroup is the table stage's consumer group.
func (p *Pipeline) tableGroup() string { return p.q.Name + "-tbl" }

// checkJoin refuses the join shapes the pipeline does not run over Kafka,
// saying why and what to do.
func checkJoin(q *plan.Query) error {
	if q.IJoin != nil && len(q.Views()) == 0 { // a join of two views is the chain's rule (graph.go)
		return fmt.Errorf("%w: query %s is an interval join of two streams, which runs from files (or the Go API), not over Kafka yet: run it with --input and its second input's file", ErrUnsupported, q.Name)
	}
	if q.Join == nil {
		return nil
	}
	if !drive.StreamKeyed(q) {
		return fmt.Errorf("%w: query %s groups by a column of table %s: over Kafka the events are split over partitions by their GROUP BY key before they join, so the GROUP BY may name only the stream's (%s's) columns; run it from files, or group by stream columns", ErrUnsupported, q.Name, q.Join.Table.Name, q.Join.Stream.Name)
	}
	return nil
}

// newTableJoin checks the table endpoint of a temporal join query.
func newTableJoin(opts *Options) (*tableJoin, error) {
	q := opts.Query
	if err := checkJoin(q); err != nil {
		return nil, err
	}
	if q.Join == nil {
		if opts.Table.Topic != "" {
			return nil, fmt.Errorf("%w: a table topic (%s), but query %s has no temporal join", ErrConfig, opts.Table.Topic, q.Name)
		}
		return nil, nil
	}
	t := q.Join.Table
	if opts.Table.Topic == "" {
		return nil, fmt.Errorf("%w: query %s joins table %s: give its topic (Options.Table; CREATE TABLE %s ... WITH (connector = 'kafka', topic = '...'))", ErrConfig, q.Name, t.Name, t.Name)
	}
	if opts.Source.PartitionedByKey {
		return nil, fmt.Errorf("%w: query %s has a temporal join, whose table reaches every partition through the repartition topic: it cannot read the source partitioned by key (drop partitioned_by_key)", ErrConfig, q.Name)
	}
	switch opts.Table.Topic {
	case opts.Source.Topic:
		return nil, fmt.Errorf("%w: table %s and the source are the same topic %s", ErrConfig, t.Name, opts.Table.Topic)
	case opts.Sink.Topic:
		return nil, fmt.Errorf("%w: table %s and the sink are the same topic %s", ErrConfig, t.Name, opts.Table.Topic)
	}
	if len(opts.Table.Config.Brokers) == 0 {
		opts.Table.Config = opts.Source.Config
	}
	if !sameCluster(opts.Source.Config, opts.Table.Config) {
		return nil, fmt.Errorf("%w: table %s (%s) must be on the source's cluster (%s): a Kafka transaction cannot span two", ErrConfig, t.Name, opts.Table.Config, opts.Source.Config)
	}
	if opts.Table.From != FromEarliest {
		return nil, fmt.Errorf("%w: table %s is read from its start: every version counts (from = earliest)", ErrConfig, t.Name)
	}
	if opts.Table.IdleTimeout == 0 {
		opts.Table.IdleTimeout = DefaultIdleTimeout
	}
	if err := drive.NewMessageSourceDecoder(t, q.TableUsed(), opts.Table.Format).Err(); err != nil {
		return nil, fmt.Errorf("%w: table %s: %v", ErrConfig, t.Name, err)
	}
	return &tableJoin{ep: opts.Table}, nil
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
		return fmt.Errorf("%w: table topic %s (table %s) does not exist", ErrConfig, tj.ep.Topic, p.q.Join.Table.Name)
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
	s, closeSession, err := p.session(group, tj.ep.Topic, txnID, kgo.NewOffset().AtStart(), a, map[string]bool{p.repTopic: true})
	if err != nil {
		return err
	}
	defer func() {
		closeSession()
		if !isRedo(retErr) {
			p.leave(group)
		}
	}()
	if err := p.fence(ctx, s, txnID); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	table := p.q.Join.Table
	dec := drive.NewMessageSourceDecoder(table, p.q.TableUsed(), tj.ep.Format)
	wm := newTracker(tj.n)
	committedWM := wm.clone()
	ownedNow := map[int32]bool{}
	idle := newIdleClock(tj.ep.IdleTimeout)
	var lastSent []byte
	var lastSentAt time.Time
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
				if err := p.trackStartsOf(ctx, end, group, tj.ep.Topic, FromEarliest, owned); err != nil {
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
				wm.observe(r.Partition, satSub(row[table.TimeCol].I, table.WatermarkDelay))
				for i := 0; i < p.nParts; i++ {
					s.Produce(pctx, &kgo.Record{Topic: p.repTopic, Partition: int32(i), Key: tableRowKey, Value: r.Value,
						Headers: []kgo.RecordHeader{{Key: tableRowHeader, Value: []byte{1}}}}, promise)
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
		err := tr.PushTable(r.Value)
		var ee *drive.EventError
		if errors.As(err, &ee) {
			if t.part == 0 {
				st.p.badEvent(r, err)
			}
			return true, nil
		}
		return true, err
	}
	return false, nil
}

// advanceTables moves each join's table watermark to its markers'
// minimum, and publishes the late table rows (counted in partition 0's
// join only: every partition sees every row, and a row is late in all or
// none, being behind its own table partition's watermark).
func (st *stage2) advanceTables() error {
	for _, t := range st.tasks {
		tr, ok := t.d.(tableRunner)
		if !ok {
			continue
		}
		if wm := t.twm.watermark(); wm != math.MinInt64 && wm > tr.JoinStats().TableWM {
			t.touched = true
			if err := tr.AdvanceTableWatermark(wm); err != nil && !drive.Skipped(err) {
				return err
			}
		}
		if t.part == 0 {
			st.p.c.tableLate.Store(tr.JoinStats().LateTableRows)
		}
	}
	return nil
}

// joinBufferFull says, for an event the join cannot hold, why the table's
// watermark is behind and what to do: the stage stops (a retry would
// meet the same full buffer).
func (p *Pipeline) joinBufferFull(err error) error {
	return fmt.Errorf("%w. Over Kafka the table's watermark is the minimum over the partitions of topic %s: one that gets no rows holds it back until it is idle (idle_timeout, %s), and a table whose rows come later than the events they price makes the events wait; produce table rows to every partition, shorten the table's idle_timeout, or raise Options.JoinBuffer",
		err, p.tj.ep.Topic, p.tj.ep.IdleTimeout)
}

// publishJoin publishes the owned joins' gauges for Stats.
func (st *stage2) publishJoin() {
	var s drive.JoinStats
	for _, t := range st.tasks {
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
