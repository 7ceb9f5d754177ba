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
// nothing.

// dedupName is the name the dedup stage of the query (or segment) named
// name owns its group, transactional id and topics under.
func dedupName(name string) string { return name + "-dedup" }

func (p *Pipeline) ddTopic() string { return dedupName(p.name) + "-repartition" }
func (p *Pipeline) ddState() string { return dedupName(p.name) + "-state" }

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

// prepareDedup creates or checks the dedup stage's topics, before the
// aggregating stage's state topic is made (so a first run stopped
// between the two is not taken for an earlier version's).
func (p *Pipeline) prepareDedup(ctx context.Context, adm *admClient) error {
	if err := ensureInternalTopic(ctx, adm, p.ddTopic(), p.nParts, false, p.log); err != nil {
		return err
	}
	return ensureInternalTopic(ctx, adm, p.ddState(), p.nParts, true, p.log)
}

// runDedupStage runs the dedup stage.
func (p *Pipeline) runDedupStage(ctx context.Context) error {
	g := dedupName(p.name)
	spec := loopSpec{name: "dedup stage", group: g, topic: p.ddTopic(), txnID: g + "." + p.opts.InstanceID,
		reset: kgo.NewOffset().AtStart(), manual: map[string]bool{p.ddState(): true, p.repTopic: true}}
	for _, o := range p.ddOuts {
		spec.manual[o.topic] = true // its markers
	}
	return p.runLoop(ctx, spec, func(tx *txn) (stageWork, error) {
		return &dedupWork{p: p, tx: tx, tasks: map[int32]*ddTask{}, owned: map[int32]bool{},
			ins: inputs{firstStream(p.root).Name}, tag: []kgo.RecordHeader{inTag(firstStream(p.root).Name)}}, nil
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
	tx     *txn
	tasks  map[int32]*ddTask
	owned  map[int32]bool
	sent   []byte
	sentAt time.Time
	ins    inputs             // its one input, the source
	tag    []kgo.RecordHeader // every record's: the input it feeds (inTag)
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
	latest, err := w.p.readState(ctx, w.p.ddState(), need)
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
	p := w.p
	late := p.opts.OnLate
	if p.root != p.q && p.opts.OnViewLate != nil {
		name := p.root.Name
		late = func(ev *drive.LateEvent) { p.opts.OnViewLate(name, ev) }
	}
	h, err := drive.NewHostDedup(p.root, drive.Config{Decoder: p.decoder(), Late: w.tx.lateHook(late)})
	if err != nil {
		return nil, err
	}
	return &ddTask{part: part, h: h, wm: newTracker(p.nSource)}, nil
}

// load restores one partition's dedup from its latest entries.
func (w *dedupWork) load(t *ddTask, entries map[string][]byte) error {
	p := w.p
	meta := string(stateKey(t.part, t.h.MetaKey()))
	if _, ok := entries[meta]; !ok {
		if len(entries) > 0 {
			return fmt.Errorf("%w: state topic %s partition %d holds %d entries but no meta entry: records were lost from the topic", drive.ErrBadState, p.ddState(), t.part, len(entries))
		}
		return nil
	}
	for k, v := range entries {
		if len(k) < 4 || int32(binary.BigEndian.Uint32([]byte(k[:4]))) != t.part {
			return fmt.Errorf("%w: state topic %s partition %d holds an entry of another partition", drive.ErrBadState, p.ddState(), t.part)
		}
		if k == meta {
			continue
		}
		if _, err := t.h.Restore([]byte(k[4:]), v); err != nil {
			return fmt.Errorf("state topic %s partition %d: %w", p.ddState(), t.part, err)
		}
	}
	pos, err := t.h.Restore(t.h.MetaKey(), entries[meta])
	if err == nil {
		t.wm, err = decodeTracker(pos)
	}
	if err != nil {
		return fmt.Errorf("state topic %s partition %d: %w", p.ddState(), t.part, err)
	}
	t.wm.n = max(t.wm.n, p.nSource)
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
		if hasHeader(r, markerHeader) {
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
			if !p.badEvent(w.tx, p.sourceOf(r), perr) {
				err = perr
			}
		case routed && p.ddOuts == nil:
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
	p := w.p
	var dups, late, keys, bytes int64
	tab := newTracker(p.nParts)
	for part, t := range w.tasks {
		tab.observe(part, t.h.Watermark())
		if p.opts.UntilCaughtUp && t.wm.consumedTo(p.sourceEnd) {
			tab.setEnd(part, t.wm.reached(p.nSource))
		}
		d, l, k, b := t.h.Stats()
		dups, late, keys, bytes = dups+d, late+l, keys+k, bytes+b
	}
	p.c.duplicates.Store(dups)
	p.c.dedupLate.Store(late)
	p.c.dedupKeys.Store(keys)
	p.c.dedupBytes.Store(bytes)
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
			rec := &kgo.Record{Topic: p.ddState(), Partition: t.part, Key: stateKey(t.part, k)}
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
func (p *Pipeline) sourceOf(r *kgo.Record) *kgo.Record {
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
	return &kgo.Record{Topic: p.opts.Source.Topic, Partition: int32(part), Offset: off}
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

// dedupOut is one exchange a dedup stage feeds when the plan's one
// dedup serves several segments (a join of two views whose join stage
// and a side read the source): each reader's topic, placed as it needs.
type dedupOut struct {
	topic string
	place drive.Placer // the reader's placement of a decoded event
	parts int          // the topic's partitions
}

// dedupOutsOf gives p's dedup stage the exchanges of spec, the plan's
// dedup segment, each read by one of pipes; a reader other than p takes
// its markers from p's dedup partitions.
func (p *Pipeline) dedupOutsOf(pl *dataflow.Plan, spec stageSpec, pipes []*Pipeline) error {
	dec := drive.NewMessageDecoder(firstStream(p.root), p.opts.Source.Format) // every reader's columns
	for _, x := range spec.outs {
		k := slices.IndexFunc(pipes, func(c *Pipeline) bool { return c.repTopic == x.topic })
		if k < 0 {
			return fmt.Errorf("kafka: the dedup stage %s feeds %s, which no stage reads", spec.name, x.topic)
		}
		place, err := drive.NewExchangeRouter(pl, x.node, drive.Config{Decoder: dec})
		if err != nil {
			return err
		}
		p.ddOuts = append(p.ddOuts, dedupOut{topic: x.topic, place: place, parts: pipes[k].nParts})
		if pipes[k] != p {
			pipes[k].dedupParts = p.nParts
			pipes[k].bindInputs() // its markers number the dedup stage's partitions
		}
	}
	return nil
}

// outs produces the first copy r of an event to each exchange, keyed by
// its reader's placement; a key that fails to evaluate places it
// anywhere, where the reader evaluates it again and counts the error.
// row is r as the dedup decoded it: placed as it is when the dedup's
// decoder converts every column (a root without a join), else decoded
// again with every reader's columns.
func (w *dedupWork) outs(r *kgo.Record, row []types.Value) {
	every := w.p.root.Join == nil && w.p.root.IJoin == nil
	for _, o := range w.p.ddOuts {
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
		w.tx.produce(&kgo.Record{Topic: o.topic, Partition: -1, Key: key, Value: r.Value, Headers: w.tag})
	}
}

// marks sends the watermark marker enc to every partition of each topic
// the stage feeds.
func (w *dedupWork) marks(enc []byte) {
	p, in := w.p, firstStream(w.p.root).Name
	if p.ddOuts == nil {
		p.sendMarksTo(w.tx, p.repTopic, markerKey, markerHeader, in, enc)
		return
	}
	for _, o := range p.ddOuts {
		p.sendMarks(w.tx, o.topic, o.parts, markerKey, markerHeader, in, enc)
	}
}
