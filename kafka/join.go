package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A query with an event-time temporal join (JOIN t FOR SYSTEM_TIME AS OF
// s.ts) reads two topics: the stream (Options.Source), repartitioned by
// the query's GROUP BY key as any query's events (grouped by a table
// column, joined where it is: the join's stage reads the source topic
// itself, or, over a dedup key, the events stage 1 routes by it, and
// deduplicates them; placeSource), and the versioned table
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

// tableJoin is a join's second input: its topic, and the source its
// records decode as (secondInput).
type tableJoin struct {
	ep       Endpoint
	src      *plan.Source // the declared table or stream
	used     []bool       // its columns the query reads
	what     string       // how errors name it: "table t", "source r"
	interval bool         // an interval join's right stream: routed by the join key, not broadcast
	// dedup: a second source of a join of two views that comes through
	// its dedup stage (Q-tbl-dedup), deduplicating for reader, the
	// query of the join's segment that reads it.
	dedup  bool
	reader *plan.Query
	// dedupParts are that dedup stage's partitions, whose markers the
	// second input's marker table numbers (dedupOutsOf; the join stage's
	// own until then).
	dedupParts int
	n          int             // partitions of the table topic
	end        map[int32]int64 // UntilCaughtUp: the table topic's end offsets at start
}

// decoder decodes the input's records, its columns the query reads.
func (tj *tableJoin) decoder() *drive.Decoder {
	return drive.NewMessageSourceDecoder(tj.src, tj.used, tj.ep.Format)
}

// Where a temporal join grouped by a table column joins (placeSource,
// binding.JoinIn): in the source's partitions, or in its dedup key's.
const (
	joinInSource = "source"
	joinInDedup  = "dedup_key"
)

// joinIn is where p's temporal join joins, if it is grouped by a table
// column ("" for any other query).
func (p *Pipeline) joinIn() string {
	switch {
	case p.dedupJoin:
		return joinInDedup
	case p.direct && p.tj != nil && !p.tj.interval:
		return joinInSource
	}
	return ""
}

// oldJoinState refuses the state of a temporal join grouped by a table
// column that joined elsewhere than this run does: an earlier version
// joined in the partitions of the repartition topic, where its
// repartition stage spread the events by a hash of the record (after a
// dedup stage of its own, for a stream with a dedup key), and recorded
// no JoinIn. Its waiting events, committed offsets and routed records
// belong to partitions this run does not have.
func (p *Pipeline) oldJoinState(ctx context.Context) error {
	now := p.joinIn()
	if now == "" {
		return nil
	}
	old, found, err := p.readBinding(ctx)
	if err != nil || !found || old.JoinIn == now {
		return err
	}
	where := map[string]string{
		"": fmt.Sprintf("the partitions of %s, where its repartition stage (group %s-in) spread the events by a hash of the whole record (after its dedup stage, group %s, for a stream with a dedup key)",
			p.repTopic, p.name, dedupName(p.name)),
		joinInSource: fmt.Sprintf("the partitions of the source topic %s", p.opts.Source.Topic),
		joinInDedup:  fmt.Sprintf("the partitions of %s, where the repartition stage (group %s-in) routes each event by its dedup key", p.repTopic, p.name),
	}
	return fmt.Errorf("%w: query %s's state topic %s holds the state of a temporal join that joined in %s; this run joins in %s. Start the query over (ubik run --reset-state, Options.ResetState: it deletes the query's consumer groups and internal topics, so the input is read again as --from says, and the sink's keys restart at revision 1) or run it under another query name",
		ErrOldState, p.q.Name, p.stateTopic, where[old.JoinIn], where[now])
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
// join's table, an interval join's right stream, read by q, the root of
// the query's first stage (chainQueries).
func newTableJoin(opts *Options, q *plan.Query) (*tableJoin, error) {
	if q.Join == nil && !isIntervalJoin(q) {
		if opts.Table.Topic != "" {
			return nil, fmt.Errorf("%w: a second input's topic (%s), but query %s has no join of a stream with a table or another stream", ErrConfig, opts.Table.Topic, opts.Query.Name)
		}
		return nil, nil
	}
	t, used, what, create := secondInput(q)
	if opts.Table.Topic == "" {
		return nil, fmt.Errorf("%w: query %s joins %s: give its topic (Options.Table; %s %s ... WITH (connector = 'kafka', topic = '...'))", ErrConfig, q.Name, what, create, t.Name)
	}
	// A temporal join's table reaches every partition (a broadcast), so
	// its stream may be read where it is, partitioned by the GROUP BY
	// key. An interval join's right stream is routed by the join key
	// with ubik's own key bytes, which no producer's partitioning of the
	// left stream is known to match.
	if opts.Source.PartitionedByKey && q.IJoin != nil {
		return nil, fmt.Errorf("%w: query %s is an interval join, whose inputs both reach the join through the repartition topic, split by the join key: it cannot read the source partitioned by key (drop partitioned_by_key)", ErrConfig, q.Name)
	}
	if q.Join != nil && opts.Table.From != FromEarliest {
		return nil, fmt.Errorf("%w: table %s is read from its start: every version counts (from = earliest)", ErrConfig, t.Name)
	}
	return secondOf(opts, &tableJoin{src: t, used: used, what: what, interval: q.IJoin != nil})
}

// secondOf completes tj, a second input, with its topic, Options.Table:
// on the source's cluster unless it names brokers, with the default idle
// timeout, its format able to decode tj's source.
func secondOf(opts *Options, tj *tableJoin) (*tableJoin, error) {
	if len(opts.Table.Config.Brokers) == 0 {
		opts.Table.Config = opts.Source.Config
	}
	if !sameCluster(opts.Source.Config, opts.Table.Config) {
		return nil, fmt.Errorf("%w: %s (%s) must be on the source's cluster (%s): a Kafka transaction cannot span two", ErrConfig, tj.what, opts.Table.Config, opts.Source.Config)
	}
	if opts.Table.IdleTimeout == 0 {
		opts.Table.IdleTimeout = DefaultIdleTimeout
	}
	tj.ep = opts.Table
	if err := tj.decoder().Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, tj.what, err)
	}
	return tj, nil
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
		return fmt.Errorf("%w: topic %s (%s) does not exist", ErrConfig, tj.ep.Topic, tj.what)
	}
	tj.n = n
	if p.opts.UntilCaughtUp {
		if tj.end, err = endOffsets(ctx, adm, tj.ep.Topic, n); err != nil {
			return err
		}
	}
	return nil
}

func satSub(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

func hasHeader(r *kgo.Record, key string) bool {
	_, ok := headerValue(r, key)
	return ok
}

func headerValue(r *kgo.Record, key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// tableRow applies a row of the table stage: a temporal join's table
// row goes to every partition, and only partition 0 reports its errors,
// so each is reported once; an interval join's right row reaches one.
func (st *stage2) tableRow(t *task, r *kgo.Record) error {
	var err error
	if !st.p.tj.interval {
		// Late when behind its own table partition's watermark (every
		// partition knows it from the same markers).
		floor := int64(math.MinInt64)
		if part, ok := headerValue(r, tablePartHeader); ok && len(part) == 4 {
			if pw, ok := t.marks[1].parts[int32(binary.BigEndian.Uint32(part))]; ok {
				floor = pw.wm
			}
		}
		err = t.g.PushTableBehind(r.Value, floor)
	} else {
		err = t.g.PushTable(r.Value)
	}
	var ee *drive.EventError
	if errors.As(err, &ee) {
		if t.part == 0 || st.p.tj.interval {
			st.p.badEvent(st.tx, r, err)
		}
		return nil
	}
	return st.p.joinFull(err, t.part)
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

// publishTableLate publishes the late table rows: counted in partition
// 0's join only for a temporal join (every partition sees every row, and
// a row is late in all or none, being behind its own table partition's
// watermark); an interval join's right rows are late in the one partition
// each reaches, so every partition counts its own.
func (st *stage2) publishTableLate() {
	var late int64
	for _, t := range st.tasks {
		if st.p.tj.interval {
			late += t.g.TableCounts().Late
		} else if t.part == 0 {
			late = t.g.JoinStats().LateTableRows
		}
	}
	st.p.c.tableLate.Store(late)
}

// joinFull says, for a row a join cannot hold, why and what to do
// (joinBufferFull, intervalJoinFull); any other error is returned as it
// is.
func (p *Pipeline) joinFull(err error, part int32) error {
	switch {
	case errors.Is(err, drive.ErrJoinBuffer):
		return p.joinBufferFull(err)
	case errors.Is(err, drive.ErrIntervalJoinFull):
		return p.intervalJoinFull(err, part)
	}
	return err
}

// intervalJoinFull says, for a row an interval join cannot hold, why its
// state grew and what to do: the stage stops (a retry would meet the same
// state).
func (p *Pipeline) intervalJoinFull(err error, part int32) error {
	return fmt.Errorf("%w. Partition %d of %s holds Options.JoinBuffer rows of the join. A row is held until the other input's watermark passes its time and the interval; over Kafka an input's watermark is the minimum over its topic's partitions (%s, %s): one that gets no rows holds it back until it is idle (idle_timeout, %s and %s). Produce to every partition, shorten the idle_timeout, narrow the interval, or raise the bound (ubik run --join-buffer, Options.JoinBuffer)",
		err, part, p.repTopic, p.opts.Source.Topic, p.tj.ep.Topic, p.opts.Source.IdleTimeout, p.tj.ep.IdleTimeout)
}

// joinBufferFull says, for an event the join cannot hold, why the table's
// watermark is behind and what to do: the stage stops (a retry would
// meet the same full buffer).
func (p *Pipeline) joinBufferFull(err error) error {
	return fmt.Errorf("%w. Over Kafka the table's watermark is the minimum over the partitions of topic %s: one that gets no rows holds it back until it is idle (idle_timeout, %s), and a table whose rows come later than the events they price makes the events wait; produce table rows to every partition, shorten the table's idle_timeout, or raise the bound (ubik run --join-buffer, Options.JoinBuffer)",
		err, p.tj.ep.Topic, p.tj.ep.IdleTimeout)
}

// publishJoin publishes the owned joins' gauges for Stats (an interval
// join: JoinJoined its joined rows, JoinWaiting its held rows of both
// inputs).
func (st *stage2) publishJoin() {
	var s drive.JoinStats
	for _, t := range st.tasks {
		if st.p.tj.interval {
			is := t.g.IntervalStats()
			s.Joined, s.Buffered = s.Joined+is.Matches, s.Buffered+is.LeftHeld+is.RightHeld
			continue
		}
		js := t.g.JoinStats()
		s.Joined, s.Unmatched, s.Buffered, s.Versions, s.Keys = s.Joined+js.Joined, s.Unmatched+js.Unmatched,
			s.Buffered+js.Buffered, s.Versions+js.Versions, s.Keys+js.Keys
	}
	c := &st.p.c
	c.joinJoined.Store(s.Joined)
	c.joinUnmatched.Store(s.Unmatched)
	c.joinWaiting.Store(s.Buffered)
	c.joinVersions.Store(s.Versions)
	c.joinKeys.Store(s.Keys)
}

// A checkpoint's position holds the marker table of each input of the
// graph, in its order: each but the last a uvarint length then its
// bytes, the last its bytes alone (so a graph of one input's position is
// its table, as any query's, and a temporal join's the source's then the
// table's).
func appendPosition(b []byte, marks []*tracker) []byte {
	for _, m := range marks[:len(marks)-1] {
		s := m.appendTo(nil)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return marks[len(marks)-1].appendTo(b)
}

// splitPosition parses appendPosition's bytes of n marker tables.
func splitPosition(b []byte, n int) ([]*tracker, error) {
	out := make([]*tracker, n)
	for i := range out {
		m := b
		if i < n-1 {
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, fmt.Errorf("%w: the position of input %d", errBadWatermark, i)
			}
			m, b = b[k:k+int(l)], b[k+int(l):]
		}
		var err error
		if out[i], err = decodeTracker(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}
