package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A routing stage runs a segment of the plan that decodes one input topic
// and feeds exchanges (its decode and exchange nodes): the repartition
// stage of the query's first stream (group Q-in) and the table stage of a
// join's second input (group Q-tbl) are the same stage. Each record goes
// on unchanged to each exchange's topic, keyed by the bytes that place it
// where the exchange's consumer needs it (drive.NewExchangeRouter: the
// consumer's group key, an interval join side's join key, a dedup key),
// or to every partition for a broadcast (a versioned table). After the
// records, a watermark marker of the input partitions this instance owns
// goes to every partition of each topic, all in one transaction with the
// input offsets. The reading stage decodes the records again: the GROUP
// BY is evaluated once, here (its key is the record's key), and the
// bytes travel as the user wrote them.

// markerEvery is how often a routing stage re-sends its watermarks even
// when they did not change, so a restarted reader hears from every input
// partition promptly.
const markerEvery = time.Second

// routeKeyVersion is the first byte of a repartition record's key, before
// the placing bytes (drive.Placer.Route). It keeps the key non-empty (a
// query without GROUP BY expressions has an empty group key, and an empty
// key would be spread over the partitions) and names the format, so the
// reading stage knows the rest is a group key it can use as it is.
const routeKeyVersion = 1

// routeIn is the input topic of a routing stage.
type routeIn struct {
	src   *plan.Source
	topic string
	group string // the stage's consumer group and transactional id prefix
	// second: a join's second input (a versioned table, an interval
	// join's right stream), whose records and markers carry the table
	// headers and whose rows count as TableRows and TableMalformed.
	second bool
	stage  string // the stage, in logs and errors
	what   string // how its errors name it: "table t", "source r" ("" for the first stream)
	dec    *drive.Decoder
	parts  int             // partitions of the topic
	end    map[int32]int64 // UntilCaughtUp: its end offsets at start
	idle   time.Duration
	reset  kgo.Offset  // where a partition without a committed offset starts
	from   StartOffset // UntilCaughtUp: where a new group starts
}

// routeStage is a routing stage's work in the loop (loop.go).
type routeStage struct {
	p    *Pipeline
	tx   *txn
	in   *routeIn
	outs []exchangeFeed
	tag  kgo.RecordHeader // every record's: the input it feeds (inTag)
	// hdrs are a routed record's headers but a dedup's (headers): one
	// slice for all, which the client only reads.
	hdrs []kgo.RecordHeader
	m    *marks
	seen map[int32]bool // owned partitions that delivered an event in this run
	key  []byte         // room for an event's key, copied to the arena once routed
	// sentWM: each input partition's watermark in the last marker sent
	// (a broadcast's late rows, broadcast).
	sentWM map[int32]int64
}

// runRoute starts in g the routing stage spec of pl.
func (p *Pipeline) runRoute(g *stageGroup, pl *dataflow.Plan, spec stageSpec) error {
	in, err := p.routeInOf(decodesOnly(pl, spec.seg))
	if err != nil {
		return err
	}
	if in.group != spec.name || len(spec.inputs) != 1 || spec.inputs[0].topic != in.topic {
		return fmt.Errorf("kafka: the plan's stage %s reads %v; the pipeline's reads %s as %s", spec.name, spec.inputs, in.topic, in.group)
	}
	if len(spec.outs) > 1 && !in.second {
		// Other queries read the records too: their keys may read
		// columns the root's decoder leaves out.
		in.dec = drive.NewMessageDecoder(in.src, p.opts.Source.Format)
	}
	outs, err := p.routeOuts(pl, spec, in)
	if err != nil {
		return err
	}
	g.run(in.stage, func(ctx context.Context) error { return p.route(ctx, in, outs) }, nil)
	return nil
}

// route runs a routing stage reading in and feeding outs.
func (p *Pipeline) route(ctx context.Context, in *routeIn, outs []exchangeFeed) error {
	if !in.second {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go p.watchSource(wctx) // this stage reads the source
	}
	manual := map[string]bool{}
	for _, o := range outs {
		manual[o.topic] = true // its markers, and a broadcast's rows
	}
	// A transaction per poll: the stage only forwards its input, and
	// the reading stage sees it at each commit (a longer one made its
	// input come in bursts, for no gain in CPU).
	ls := loopSpec{name: in.stage, group: in.group, topic: in.topic, txnID: in.group + "." + p.opts.InstanceID,
		reset: in.reset, manual: manual, records: 1}
	return p.runLoop(ctx, ls, func(tx *txn) (stageWork, error) {
		var end map[int32]int64
		if p.opts.UntilCaughtUp {
			end = in.end
		}
		r := &routeStage{p: p, tx: tx, in: in, outs: outs, tag: inTag(in.src.Name), m: newMarks(in.parts, in.idle, end),
			seen: map[int32]bool{}, sentWM: map[int32]int64{}}
		r.hdrs = exchangeFeed{second: in.second}.headers(nil, r.tag)
		return r, nil
	})
}

// routeOuts are the exchanges of spec's segment: each with its topic and
// the placer its consumer needs (the routers are stateless between
// sessions: one serves every transaction).
func (p *Pipeline) routeOuts(pl *dataflow.Plan, spec stageSpec, in *routeIn) ([]exchangeFeed, error) {
	var outs []exchangeFeed
	byTopic := map[string]int{}
	for _, x := range spec.outs {
		if first, ok := byTopic[x.topic]; ok {
			// Two roots of the reading segment read the source: one
			// record reaches both, so the exchanges must place alike.
			if err := samePlacement(pl, first, x.node); err != nil {
				return nil, err
			}
			continue
		}
		byTopic[x.topic] = x.node
		place, err := drive.NewExchangeRouter(pl, x.node, drive.Config{Decoder: in.dec})
		if err != nil {
			return nil, err
		}
		o := exchangeFeed{topic: x.topic, place: place, second: in.second}
		for _, c := range pl.Consumers(x.node) {
			o.src = o.src || pl.Node(c).Kind == dataflow.Dedup
		}
		outs = append(outs, o)
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("kafka: stage %s feeds no exchange", spec.name)
	}
	return outs, nil
}

func (r *routeStage) assigned(ctx context.Context, owned, _ map[int32]bool, now time.Time) error {
	for part := range r.m.wm.parts {
		if !owned[part] {
			delete(r.seen, part)
		}
	}
	r.m.assign(owned, now)
	if r.m.end == nil {
		return nil
	}
	return r.p.trackStartsOf(ctx, r.m.end, r.in.group, r.in.topic, r.in.from, owned)
}

func (r *routeStage) ready(context.Context) error { return nil }

// pollCounts are what a poll of a second input counted: its records,
// and those that did not decode or place.
type pollCounts struct{ rows, bad int64 }

func (r *routeStage) process(fs kgo.Fetches, now time.Time) (bool, error) {
	var c pollCounts
	err := func() (err error) {
		defer drive.Recover(&err)
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if err == nil && len(fp.Records) > 0 {
				err = r.partition(fp.Partition, fp.Records, now, &c)
			}
		})
		return err
	}()
	r.count(c)
	r.m.settle(now)
	if !r.in.second {
		r.p.publishSourceParts(r.m.owned, r.seen, r.m.idle, now)
	}
	return false, err
}

// count adds the poll's counts to the transaction's: the first stream's
// as the query's events (its routers counted them), a second input's as
// its rows.
func (r *routeStage) count(c pollCounts) {
	if !r.in.second {
		// The first placer decoded every record: its counts are the
		// input's, and each counts the evaluation errors of its reader's
		// key (a record not routed to that reader, which never sees it).
		n := r.outs[0].place.TakeCounts()
		for _, o := range r.outs[1:] {
			n.EvalErrors += o.place.TakeCounts().EvalErrors
		}
		r.tx.count(n, true)
		return
	}
	for _, o := range r.outs {
		if o.place != nil {
			o.place.TakeCounts() // the rows are counted here
		}
	}
	r.tx.counts.tableRows += c.rows
	r.tx.counts.tableMalformed += c.bad
}

// partition routes one partition's records of a poll, in order. What is
// kept per partition (the consumed position, the clock of its last
// event, its watermark, the largest of its events' proposals) is updated
// once, after its records: nothing reads it between two records of a
// poll, and an abort rewinds it whole; a broadcast moves it row by row
// (broadcast).
func (r *routeStage) partition(part int32, recs []*kgo.Record, now time.Time, c *pollCounts) error {
	if !r.m.seen(part, recs, now) {
		return nil // transaction markers only
	}
	r.seen[part] = true
	mark, marked := int64(math.MinInt64), false
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			continue // a transaction marker (kept for UntilCaughtUp)
		}
		c.rows++
		good, reported := true, false
		var first drive.Placer // the placer that decoded rec
		for _, o := range r.outs {
			if o.place == nil {
				good = r.broadcast(o, rec, now) && good
				continue
			}
			m, ok, err := r.route(o, first, rec, &reported)
			if first == nil {
				first = o.place
			}
			switch {
			case err == nil:
				if ok && m > mark {
					mark, marked = m, true
				}
			case errors.Is(err, errBadRow):
				good = false
			default:
				return err
			}
		}
		if !good {
			c.bad++
		}
	}
	if marked {
		r.m.wm.observe(part, mark)
	}
	return nil
}

// route produces rec to o's topic keyed by its placing bytes, and
// returns its watermark proposal. The first exchange's placer decodes
// rec; the others place the row it decoded (first), a record that did
// not decode going to none. A bad event is reported once per record
// (reported: an earlier exchange's placer reported it), and not routed
// there.
func (r *routeStage) route(o exchangeFeed, first drive.Placer, rec *kgo.Record, reported *bool) (int64, bool, error) {
	dst := append(r.key[:0], routeKeyVersion)
	var key []byte
	var err error
	switch {
	case first == nil:
		key, err = o.place.Route(dst, rec.Value)
	case first.Decoded() == nil:
		return 0, false, nil // a CSV header, or a bad event first reported
	default:
		key, err = o.place.Place(dst, rec.Value, first.Decoded())
	}
	var ee *drive.EventError
	if err != nil && *reported && errors.As(err, &ee) {
		return 0, false, nil // counted by its router, reported once
	}
	if err != nil {
		*reported = true
		return 0, false, r.bad(rec, err)
	}
	r.key = key[:0] // its room, for the next event's
	if key == nil {
		return 0, false, nil // a CSV header record, skipped and counted
	}
	out := r.tx.out.record()
	out.Topic, out.Partition, out.Key, out.Value = o.topic, -1, append(r.tx.out.bytes(len(key)), key...), rec.Value
	out.Headers = r.headers(o, rec)
	r.tx.produce(out)
	if first != nil {
		return 0, false, nil // first's event proposed the watermark
	}
	m, ok := o.place.Mark()
	return m, ok, nil
}

// headers are a routed record's: its input's tag, a second input's row
// header, and for a dedup the record's own position.
func (r *routeStage) headers(o exchangeFeed, rec *kgo.Record) []kgo.RecordHeader {
	if o.src {
		return o.headers(rec, r.tag)
	}
	return r.hdrs
}

// bad reports a bad event err of rec, or returns err when it stops the
// input (a CSV header that does not fit the source); a second input's
// bad rows are reported and skipped (errBadRow).
func (r *routeStage) bad(rec *kgo.Record, err error) error {
	if r.in.second {
		r.badRow(rec, err)
		return errBadRow
	}
	if r.p.badEvent(r.tx, rec, err) {
		return nil
	}
	return err
}

// badRow reports a row of a second input that did not decode.
func (r *routeStage) badRow(rec *kgo.Record, err error) {
	r.tx.badEvent(r.p, BadEvent{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Err: fmt.Errorf("%s: %w", r.in.what, err)})
}

// broadcast produces a versioned table's row to every partition of o's
// topic. It reports false for a row that did not decode (reported).
func (r *routeStage) broadcast(o exchangeFeed, rec *kgo.Record, now time.Time) bool {
	table, wm := r.in.src, r.m.wm
	row, err := r.in.dec.Decode(rec.Value)
	if err == nil && row != nil && row[table.TimeCol].Null {
		err = fmt.Errorf("column %s: event time is null", table.Columns[table.TimeCol].Name)
	}
	if err != nil {
		r.badRow(rec, err)
		return false
	}
	if row == nil {
		return true // a CSV header record
	}
	// A row behind its own table partition's watermark is late (as in a
	// file run, where the table's watermark moves row by row): the
	// partitions judge it by that partition's watermark in their
	// markers, so the marker covering the rows before it goes first, if
	// this poll's rows moved it (else a poll's rows would all be judged
	// by the watermark before the poll, and what is late would depend on
	// where the polls and the restarts fall).
	if pw := wm.get(rec.Partition); row[table.TimeCol].I < pw.wm && pw.wm > r.sentWM[rec.Partition] {
		for part := range wm.parts {
			wm.setIdle(part, r.m.idle.idle(part, now))
		}
		r.send(wm.appendTo(nil))
	}
	wm.observe(rec.Partition, satSub(row[table.TimeCol].I, table.WatermarkDelay))
	part := binary.BigEndian.AppendUint32(nil, uint32(rec.Partition))
	hs := []kgo.RecordHeader{tableRowTag, {Key: tablePartHeader, Value: part}, r.tag}
	for i := 0; i < r.p.nParts; i++ {
		r.tx.produce(&kgo.Record{Topic: o.topic, Partition: int32(i), Key: tableRowKey, Value: rec.Value, Headers: hs})
	}
	return true
}

// send produces a watermark marker to every partition of each topic and
// remembers what it said.
func (r *routeStage) send(enc []byte) {
	for _, o := range r.outs {
		o.marks(r.p, r.tx, r.in.src.Name, enc)
	}
	for part, pw := range r.m.wm.parts {
		r.sentWM[part] = pw.wm
	}
}

// precommit sends the watermark marker, after every record it covers.
func (r *routeStage) precommit(now time.Time) error {
	if enc, ok := r.m.due(now); ok {
		r.send(enc)
	}
	return nil
}

// ended rewinds the watermarks with the offsets after an abort: the
// markers of the aborted transaction are gone.
func (r *routeStage) ended(committed bool) bool {
	r.m.ended(committed)
	if !committed {
		clear(r.sentWM)
	}
	return false
}

// decodesOnly is the source segment seg of pl decodes when it runs
// nothing but its decode and exchange nodes, else nil.
func decodesOnly(pl *dataflow.Plan, seg int) *plan.Source {
	var src *plan.Source
	for _, id := range pl.Segments[seg].Nodes {
		switch n := pl.Node(id); n.Kind {
		case dataflow.Decode:
			src = n.Source
		case dataflow.Exchange:
		default:
			return nil
		}
	}
	return src
}

// routeInOf is the input of p's routing stage that decodes src: the
// query's first stream, or a join's second input.
func (p *Pipeline) routeInOf(src *plan.Source) (*routeIn, error) {
	if first := firstStream(p.root); src == first {
		return &routeIn{src: src, topic: p.opts.Source.Topic, group: p.inGroup(), stage: "repartition stage", dec: p.decoder(),
			parts: p.nSource, end: p.sourceEnd, idle: p.opts.Source.IdleTimeout, reset: p.resetOffset(), from: p.opts.Source.From}, nil
	}
	tj := p.tj
	if tj == nil || tj.src != src {
		return nil, fmt.Errorf("kafka: the plan decodes %s, which query %s reads through no stage of its own", src.Name, p.root.Name)
	}
	in := &routeIn{src: src, topic: tj.ep.Topic, group: p.tableGroup(), second: true, stage: "table stage", what: tj.what,
		dec: tj.decoder(), parts: tj.n, end: tj.end, idle: tj.ep.IdleTimeout,
		reset: kgo.NewOffset().AtStart(), from: FromEarliest} // a table: every version counts
	if tj.interval {
		in.from = tj.ep.From
		if tj.ep.From == FromLatest {
			in.reset = kgo.NewOffset().AtEnd()
		}
	}
	return in, nil
}

// samePlacement refuses two exchanges of one source into one segment
// that place its records apart: the reading stage hands each record to
// every root reading the source, so one record must serve both.
func samePlacement(pl *dataflow.Plan, x, y int) error {
	a, b := pl.Node(x), pl.Node(y)
	if a.Out.String() != b.Out.String() {
		return fmt.Errorf("%w: source %s reaches one segment placed by %s and by %s", ErrUnsupported, a.Name, a.Out, b.Out)
	}
	return nil
}
