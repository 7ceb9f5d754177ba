package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// The dedup stage. A source with a dedup key is deduplicated where its
// plan does it (internal/dataflow: an exchange by the dedup key, the
// Dedup node, then the exchange by the GROUP BY): the repartition stage
// routes each event by its dedup key to Q-dedup-repartition, the dedup
// stage (group Q-dedup) keeps the keys seen in each partition
// (drive.HostDedup, state in Q-dedup-state) and routes the first copy of
// each, by its group key, to Q-repartition, followed by its own
// watermark per partition as markers. Every copy of an event meets in
// one dedup partition, so the first copy counts whatever group the
// copies fall in, as in a file run; the aggregating stage deduplicates
// nothing. A join of two views whose segment decodes a second source
// with a dedup key has a second dedup stage, Q-tbl-dedup, fed by the
// routing stage Q-tbl: its survivors reach the join stage as its second
// input, with that input's headers and markers.

// dedupName is the name the dedup stage of the query (or segment) named
// name owns its group, transactional id and topics under.
func dedupName(name string) string { return name + "-dedup" }

func (p *Pipeline) ddTopic() string { return dedupName(p.name) + "-repartition" }
func (p *Pipeline) ddState() string { return dedupName(p.name) + "-state" }

// ddStage is one dedup stage as it runs: the first stream's, or a join
// of two views' second source's.
type ddStage struct {
	name  string      // its group, transactional id prefix and topics' prefix
	q     *plan.Query // the query over the source, whose dedup key it applies
	src   *plan.Source
	dec   *drive.Decoder
	topic string          // the source topic, where a bad event is reported
	parts int             // the source's partitions, which its markers number
	end   map[int32]int64 // UntilCaughtUp: the source's end offsets at start
	outs  []exchangeFeed  // nil: p.repTopic, by q's group key
	// marker is the header of its input's watermark markers: the
	// routing stage's of a first stream, or of a second input.
	marker string
	gauges *dedupGauges
	late   func(*drive.LateEvent)
}

func (d *ddStage) topicIn() string { return d.name + "-repartition" }
func (d *ddStage) state() string   { return d.name + "-state" }

// firstDedup is the dedup stage of p's first stream, feeding outs.
func (p *Pipeline) firstDedup(outs []exchangeFeed) *ddStage {
	return &ddStage{name: dedupName(p.name), q: p.root, src: firstStream(p.root), dec: p.decoder(), topic: p.opts.Source.Topic,
		parts: p.nSource, end: p.sourceEnd, outs: outs, marker: markerHeader, gauges: &p.c.dedup, late: p.lateOf(p.root)}
}

// secondDedup is the dedup stage of the second source p's join of two
// views decodes (tableJoin.dedup), feeding outs.
func (p *Pipeline) secondDedup(outs []exchangeFeed) *ddStage {
	tj := p.tj
	return &ddStage{name: dedupName(p.tableGroup()), q: tj.reader, src: tj.src, dec: tj.decoder(), topic: tj.ep.Topic,
		parts: tj.n, end: tj.end, outs: outs, marker: tableMarkerHeader, gauges: &p.c.dedup2, late: p.lateOf(tj.reader)}
}

// lateOf is where the late events of q, a query of p, go: a view's to
// OnViewLate with its name, when set.
func (p *Pipeline) lateOf(q *plan.Query) func(*drive.LateEvent) {
	if q == p.q || p.opts.OnViewLate == nil {
		return p.opts.OnLate
	}
	name := q.Name
	return func(ev *drive.LateEvent) { p.opts.OnViewLate(name, ev) }
}

// upParts is the partition count of the aggregating stage's marker
// table: the dedup stage's partitions, or the source's.
func (p *Pipeline) upParts() int {
	if p.dedupParts > 0 {
		return p.dedupParts // another pipeline's dedup stage (dedupOutsOf)
	}
	if p.dedup {
		return p.nParts
	}
	return p.nSource
}

// deduplicated are the sources whose events reach p's aggregating stage
// through a dedup stage.
func (p *Pipeline) deduplicated() []*plan.Source {
	var out []*plan.Source
	if p.dedup {
		out = append(out, firstStream(p.root))
	}
	if p.tj != nil && p.tj.dedup {
		out = append(out, p.tj.src)
	}
	return out
}

// withoutDedup is q with its chain down to the source, copied, the
// source without its dedup key (a temporal join's stream and joined
// source too): the aggregating or join stage's queries.
func withoutDedup(q *plan.Query) *plan.Query {
	c, src := *q, *q.Source
	if src.View != nil {
		src.View = withoutDedup(src.View)
	}
	src.Dedup = nil
	c.Source = &src
	if q.Join != nil {
		j, stream := *q.Join, *q.Join.Stream
		stream.Dedup = nil
		j.Stream, c.Join = &stream, &j
	}
	return &c
}

// oldDedupState refuses a state topic of an earlier version, whose
// aggregating stage kept the dedup keys: the aggregating stage's state
// topic exists (ns partitions), the dedup stage's does not.
func (p *Pipeline) oldDedupState(ctx context.Context, adm *admClient, ns int) error {
	if ns == 0 {
		return nil
	}
	nd, err := topicPartitions(ctx, adm, p.ddState())
	if err != nil || nd > 0 {
		return err
	}
	return fmt.Errorf("%w: query %s's state topic %s predates its dedup stage (%s): an earlier version deduplicated in the stage that joins or aggregates, whose state holds the dedup keys, and so found only the copies that fell in one of its partitions. Start the query over (ubik run --reset-state, Options.ResetState: it deletes the query's consumer groups and internal topics, so the input is read again as --from says, and the sink's keys restart at revision 1) or run it under another query name",
		ErrOldState, p.q.Name, p.stateTopic, p.ddState())
}

// prepareDedup creates or checks the topics of p's dedup stages (the
// first stream's, a second source's), before the aggregating stage's
// state topic is made (so a first run stopped between the two is not
// taken for an earlier version's).
func (p *Pipeline) prepareDedup(ctx context.Context, adm *admClient) error {
	var names []string
	if p.dedup {
		names = append(names, dedupName(p.name))
	}
	if p.tj != nil && p.tj.dedup {
		names = append(names, dedupName(p.tableGroup()))
	}
	for _, name := range names {
		if err := ensureInternalTopic(ctx, adm, name+"-repartition", p.nParts, false, p.log); err != nil {
			return err
		}
		if err := ensureInternalTopic(ctx, adm, name+"-state", p.nParts, true, p.log); err != nil {
			return err
		}
	}
	return nil
}

// runDedupStage runs the dedup stage d.
func (p *Pipeline) runDedupStage(ctx context.Context, d *ddStage) error {
	spec := loopSpec{name: "dedup stage", group: d.name, topic: d.topicIn(), txnID: d.name + "." + p.opts.InstanceID,
		reset: kgo.NewOffset().AtStart(), manual: map[string]bool{d.state(): true, p.repTopic: true}}
	for _, o := range d.outs {
		spec.manual[o.topic] = true // its markers
	}
	return p.runLoop(ctx, spec, func(tx *txn) (stageWork, error) {
		return &dedupWork{p: p, d: d, tx: tx, tasks: map[int32]*ddTask{}, owned: map[int32]bool{},
			ins:    inputs{d.src.Name},
			tag:    exchangeFeed{}.headers(nil, inTag(d.src.Name)),
			second: exchangeFeed{second: true}.headers(nil, inTag(d.src.Name))}, nil
	})
}

// ddTask is the dedup of one partition of the dedup topic.
type ddTask struct {
	part    int32
	h       *drive.HostDedup
	wm      *tracker // the repartition stage's markers
	touched bool
}

// dedupWork is the dedup stage's work in the loop (loop.go).
type dedupWork struct {
	p      *Pipeline
	d      *ddStage
	tx     *txn
	tasks  map[int32]*ddTask
	owned  map[int32]bool
	sent   []byte
	sentAt time.Time
	ins    inputs // its one input, the source
	// tag and second are a record's headers (one slice for all, which
	// the client only reads): the input it feeds (inTag), and, for a
	// join's second input, that input's row header.
	tag, second []kgo.RecordHeader
}

func (w *dedupWork) assigned(_ context.Context, owned, dropped map[int32]bool, _ time.Time) error {
	for part := range w.tasks {
		if dropped[part] || !owned[part] {
			delete(w.tasks, part)
		}
	}
	w.owned = owned
	return nil
}

// ready restores the dedup of every owned partition that has none.
func (w *dedupWork) ready(ctx context.Context) error {
	var need []int32
	for part := range w.owned {
		if w.tasks[part] == nil {
			need = append(need, part)
		}
	}
	if len(need) == 0 {
		return nil
	}
	sort.Slice(need, func(i, j int) bool { return need[i] < need[j] })
	latest, err := w.p.readState(ctx, w.d.state(), need)
	if err != nil {
		return err
	}
	for _, part := range need {
		t, err := w.newTask(part)
		if err != nil {
			return err
		}
		if err := w.load(t, latest[part]); err != nil {
			return err
		}
		w.tasks[part] = t
		w.p.c.restores.Add(1)
		w.p.c.restoredEntries.Add(int64(len(latest[part])))
	}
	return nil
}

func (w *dedupWork) newTask(part int32) (*ddTask, error) {
	d := w.d
	h, err := drive.NewHostDedup(d.q, drive.Config{Decoder: d.dec, Late: w.tx.lateHook(d.late)})
	if err != nil {
		return nil, err
	}
	return &ddTask{part: part, h: h, wm: newTracker(d.parts)}, nil
}

// load restores one partition's dedup from its latest entries.
func (w *dedupWork) load(t *ddTask, entries map[string][]byte) error {
	state := w.d.state()
	meta := string(stateKey(t.part, t.h.MetaKey()))
	if _, ok := entries[meta]; !ok {
		if len(entries) > 0 {
			return fmt.Errorf("%w: state topic %s partition %d holds %d entries but no meta entry: records were lost from the topic", drive.ErrBadState, state, t.part, len(entries))
		}
		return nil
	}
	for k, v := range entries {
		if len(k) < 4 || int32(binary.BigEndian.Uint32([]byte(k[:4]))) != t.part {
			return fmt.Errorf("%w: state topic %s partition %d holds an entry of another partition", drive.ErrBadState, state, t.part)
		}
		if k == meta {
			continue
		}
		if _, err := t.h.Restore([]byte(k[4:]), v); err != nil {
			return fmt.Errorf("state topic %s partition %d: %w", state, t.part, err)
		}
	}
	pos, err := t.h.Restore(t.h.MetaKey(), entries[meta])
	if err == nil {
		t.wm, err = decodeTracker(pos)
	}
	if err != nil {
		return fmt.Errorf("state topic %s partition %d: %w", state, t.part, err)
	}
	t.wm.n = max(t.wm.n, w.d.parts)
	return nil
}

func (w *dedupWork) process(fs kgo.Fetches, _ time.Time) (bool, error) {
	err := w.apply(fs)
	var c drive.Counts
	for _, t := range w.tasks {
		// The repartition stage counted the records; the group key's
		// evaluation errors and the events dropped here (applied to
		// the query, as in a file run) are this stage's.
		n := t.h.TakeCounts()
		c.EvalErrors += n.EvalErrors
		c.Applied += n.Applied
	}
	w.tx.count(c, false)
	return false, err
}

// apply admits each event of fs in its partition's order, moving the
// partition's dedup to each marker's watermark as it comes, and routes
// each first copy by its group key to the aggregating stage.
func (w *dedupWork) apply(fs kgo.Fetches) (err error) {
	defer drive.Recover(&err)
	p := w.p
	fs.EachRecord(func(r *kgo.Record) {
		if err != nil || r.Attrs.IsControl() {
			return
		}
		t := w.tasks[r.Partition]
		if t == nil {
			err = fmt.Errorf("kafka: record for partition %d of %s, which has no dedup", r.Partition, r.Topic)
			return
		}
		t.touched = true
		if _, ierr := w.ins.of(r, onlyInput); ierr != nil {
			p.unknownInput(w.tx, r, ierr) // its one input is the source
			return
		}
		if hasHeader(r, w.d.marker) {
			m, merr := decodeTracker(r.Value)
			if merr != nil {
				err = fmt.Errorf("%w at %s partition %d offset %d", merr, r.Topic, r.Partition, r.Offset)
				return
			}
			t.wm.merge(m)
			if wm := t.wm.watermark(); wm != math.MinInt64 {
				t.h.AdvanceWatermark(wm)
			}
			return
		}
		key, routed, perr := t.h.Push(append(make([]byte, 0, 32), routeKeyVersion), r.Value)
		switch {
		case perr != nil:
			if !p.badEvent(w.tx, w.d.sourceOf(r), perr) {
				err = perr
			}
		case routed && w.d.outs == nil:
			w.tx.produce(&kgo.Record{Topic: p.repTopic, Partition: -1, Key: key, Value: r.Value, Headers: w.tag})
		case routed:
			w.outs(r, t.h.Decoded())
		}
	})
	return err
}

// precommit sends, after the transaction's events, each owned
// partition's watermark to every partition of the aggregating stage's
// topic (with UntilCaughtUp, once the partition has seen the whole
// input, how far it was consumed: a drain marker), then the changed
// state entries.
func (w *dedupWork) precommit(now time.Time) error {
	p, dd := w.p, w.d
	var dups, late, keys, bytes int64
	tab := newTracker(p.nParts)
	for part, t := range w.tasks {
		tab.observe(part, t.h.Watermark())
		if p.opts.UntilCaughtUp && t.wm.consumedTo(dd.end) {
			tab.setEnd(part, t.wm.reached(dd.parts))
		}
		d, l, k, b := t.h.Stats()
		dups, late, keys, bytes = dups+d, late+l, keys+k, bytes+b
	}
	dd.gauges.store(dups, late, keys, bytes)
	if len(tab.parts) > 0 {
		enc := tab.appendTo(nil)
		if string(enc) != string(w.sent) || now.Sub(w.sentAt) >= markerEvery {
			w.marks(enc)
			w.sent, w.sentAt = enc, now
		}
	}
	for _, t := range w.tasks {
		if !t.touched {
			continue
		}
		t.touched = false
		err := t.h.Checkpoint(false, t.wm.appendTo(nil), func(k, v []byte) error {
			rec := &kgo.Record{Topic: dd.state(), Partition: t.part, Key: stateKey(t.part, k)}
			if v != nil {
				rec.Value = append([]byte(nil), v...)
			}
			w.tx.produce(rec)
			p.c.stateOut.Add(1)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ended drops every dedup after an abort: the next transaction restores
// the committed state.
func (w *dedupWork) ended(committed bool) bool {
	if !committed {
		clear(w.tasks)
		w.sent = nil
	}
	return false
}

// srcHeader carries, on the dedup topic, an event's source partition and
// offset (varints), so that a bad event is reported where it was read.
const srcHeader = "ubik.src"

func sourceHeader(r *kgo.Record, tag kgo.RecordHeader) []kgo.RecordHeader {
	v := binary.AppendVarint(binary.AppendVarint(nil, int64(r.Partition)), r.Offset)
	return []kgo.RecordHeader{{Key: srcHeader, Value: v}, tag}
}

// sourceOf is the source record an event of the dedup topic was read
// from (its topic, partition and offset), or r without the header.
func (d *ddStage) sourceOf(r *kgo.Record) *kgo.Record {
	v, ok := headerValue(r, srcHeader)
	if !ok {
		return r
	}
	part, n := binary.Varint(v)
	if n <= 0 {
		return r
	}
	off, m := binary.Varint(v[n:])
	if m <= 0 {
		return r
	}
	return &kgo.Record{Topic: d.topic, Partition: int32(part), Offset: off}
}

// The join's stage of a temporal join where its stream is, over a dedup
// key (dedupJoin), deduplicates each partition's events before its graph
// joins them, as the plan's Dedup node in the join's segment: stage 1
// routed every copy of a key to one partition. The dedup (drive.HostDedup,
// moved by stage 1's markers as they come) keeps its entries in the
// task's state partition under ddPrefix; the graph's top has no dedup
// key (withoutDedup).
const ddPrefix = "\xffdedup."

// newJoinDedup is a task's dedup in the join's stage, or nil.
func (p *Pipeline) newJoinDedup(tx *txn) (*drive.HostDedup, error) {
	if !p.dedupJoin {
		return nil, nil
	}
	return drive.NewHostDedup(p.root, drive.Config{Decoder: p.decoder(), Late: tx.lateHook(p.opts.OnLate)})
}

// joinDeduped hands the first copy of an event to the task's graph.
func (st *stage2) joinDeduped(t *task, r *kgo.Record) error {
	_, first, err := t.dd.Push(nil, r.Value)
	if err != nil || !first {
		return err
	}
	return st.p.joinFull(t.g.Push(r.Value), t.part)
}

// checkpointDedup writes the changed entries of t's dedup with put.
func checkpointDedup(t *task, put func(k, v []byte) error) error {
	if t.dd == nil {
		return nil
	}
	return t.dd.Checkpoint(false, nil, func(k, v []byte) error {
		return put(append([]byte(ddPrefix), k...), v)
	})
}

// restoreDedup loads entry ek of t's state partition into its dedup,
// and reports whether it was the dedup's.
func restoreDedup(t *task, ek, val []byte) (bool, error) {
	k, ok := bytes.CutPrefix(ek, []byte(ddPrefix))
	if !ok || t.dd == nil {
		return false, nil
	}
	_, err := t.dd.Restore(k, val)
	return true, err
}

// dedupOutsOf are the exchanges of spec, the plan's dedup segment of src,
// each read by one of pipes, with every reader's columns decoded by dec;
// a reader other than p, which runs the stage, takes its markers from
// p's dedup partitions.
func (p *Pipeline) dedupOutsOf(pl *dataflow.Plan, spec stageSpec, pipes []*Pipeline, src *plan.Source, dec *drive.Decoder) ([]exchangeFeed, error) {
	var outs []exchangeFeed
	for _, x := range spec.outs {
		k := slices.IndexFunc(pipes, func(c *Pipeline) bool { return c.repTopic == x.topic })
		if k < 0 {
			return nil, fmt.Errorf("kafka: the dedup stage %s feeds %s, which no stage reads", spec.name, x.topic)
		}
		place, err := drive.NewExchangeRouter(pl, x.node, drive.Config{Decoder: dec})
		if err != nil {
			return nil, err
		}
		c := pipes[k]
		second := c.tj != nil && c.tj.dedup && c.tj.src == src
		outs = append(outs, exchangeFeed{topic: x.topic, place: place, parts: c.nParts, second: second})
		switch {
		case second:
			c.tj.dedupParts = p.nParts
		case c != p:
			c.dedupParts = p.nParts
		default:
			continue
		}
		c.bindInputs() // its markers number the dedup stage's partitions
	}
	return outs, nil
}

// outs produces the first copy r of an event to each exchange, keyed by
// its reader's placement; a key that fails to evaluate places it
// anywhere, where the reader evaluates it again and counts the error.
// row is r as the dedup decoded it: placed as it is when the dedup's
// decoder converts every column (a root without a join), else decoded
// again with every reader's columns.
func (w *dedupWork) outs(r *kgo.Record, row []types.Value) {
	every := w.d.q.Join == nil && w.d.q.IJoin == nil
	for _, o := range w.d.outs {
		dst := append(make([]byte, 0, 32), routeKeyVersion)
		var key []byte
		var err error
		if every && row != nil {
			key, err = o.place.Place(dst, r.Value, row)
		} else {
			key, err = o.place.Route(dst, r.Value)
		}
		if err != nil || key == nil {
			key = []byte{routeKeyVersion}
		}
		o.place.TakeCounts() // the dedup counted the event
		hs := w.tag
		if o.second {
			hs = w.second
		}
		w.tx.produce(&kgo.Record{Topic: o.topic, Partition: -1, Key: key, Value: r.Value, Headers: hs})
	}
}

// marks sends the watermark marker enc to every partition of each topic
// the stage feeds.
func (w *dedupWork) marks(enc []byte) {
	p, in := w.p, w.d.src.Name
	if w.d.outs == nil {
		p.sendMarksTo(w.tx, p.repTopic, markerKey, markerHeader, in, enc)
		return
	}
	for _, o := range w.d.outs {
		o.marks(p, w.tx, in, enc)
	}
}
