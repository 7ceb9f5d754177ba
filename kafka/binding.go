package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bindingKey is the state-topic key of the binding record, in partition 0.
// Its 4-byte prefix is not a partition number (state keys start with
// theirs), so it never collides with an operator's entry.
const bindingKey = "\xff\xff\xff\xffubik.binding"

// layoutVersion is the layout of the internal topics this binary reads
// and writes: which stages run, the records of their repartition topics,
// the entries of their state topics. The binding records it, and a state
// topic bound under another layout is refused before anything is read
// (layoutErr): a binary of one layout cannot continue another's state,
// and two binaries of different layouts must never share one query's
// topics. A binding without the field was written under layout 1.
const layoutVersion = 1

// layout is the layout p's stages run in: a join of two views' join
// stage's (viewJoinLayout, viewJoinTwoSources), or layoutVersion.
func (p *Pipeline) layout() int {
	switch {
	case p.vj != nil && p.tj != nil && p.root.IJoin == nil:
		return viewJoinTwoSources
	case p.vj != nil:
		return viewJoinLayout
	}
	return layoutVersion
}

// binding is what a query name's state belongs to. It is written once,
// when the state topic is new, as the first record of its partition 0.
type binding struct {
	Version          int    `json:"version"` // layoutVersion
	Query            string `json:"query"`   // the query's text
	Schema           string `json:"schema"`  // the source's columns and watermark
	Source           string `json:"source"`
	SourcePartitions int    `json:"source_partitions"`
	PartitionedByKey bool   `json:"partitioned_by_key"`
	Sink             string `json:"sink"`
	// Views, for a query over views: each view of its chain (root
	// first) with its sink topic, "name=topic" joined by ", ".
	Views string `json:"views,omitempty"`
	// Table, for a temporal join: the versioned table's topic.
	Table string `json:"table,omitempty"`
	// Right, for an interval join of two streams: the right stream's topic.
	Right string `json:"right,omitempty"`
	// JoinIn, for a temporal join grouped by a table column: the
	// partitions it joins in (joinIn).
	JoinIn string `json:"join_in,omitempty"`
}

func (p *Pipeline) binding() binding {
	q := p.q
	text := q.SQL
	if text == "" { // a plan built without SQL: its output and aggregates
		var parts []string
		for _, c := range q.Select {
			parts = append(parts, c.Name)
		}
		for _, a := range q.Aggs {
			parts = append(parts, a.Name)
		}
		if q.Window != nil {
			parts = append(parts, fmt.Sprintf("window %d/%d/%d/%d", q.Window.Kind, q.Window.Size, q.Window.Slide, q.Window.Gap))
		}
		text = strings.Join(parts, ", ")
	}
	var views []string
	for i := len(p.views) - 1; i >= 0; i-- { // prepended: the text reads root first, the query last
		v := p.views[i]
		text = strings.TrimSpace(v.SQL) + ";\n" + text
	}
	for _, v := range p.views {
		views = append(views, v.Name+"="+p.opts.ViewSinks[v.Name].Topic)
	}
	var cols []string
	src := p.root.Source
	for _, c := range src.Columns {
		d := c.Name + " " + c.Type.String()
		if c.Computed != nil || c.TimeUnit > 1 {
			d = c.Decl() // a changed expression or precision is a changed source
		}
		cols = append(cols, d)
	}
	schema := strings.Join(cols, ", ")
	if tc := src.TimeCol; tc >= 0 && tc < len(src.Columns) {
		schema += fmt.Sprintf("; watermark %s - %dus", src.Columns[tc].Name, src.WatermarkDelay)
	}
	b := binding{Version: p.layout(), Query: strings.TrimSpace(text), Schema: schema, Source: p.opts.Source.Topic,
		SourcePartitions: p.nSource, PartitionedByKey: p.direct, Sink: p.opts.Sink.Topic, Views: strings.Join(views, ", ")}
	b.JoinIn = p.joinIn()
	if p.tj != nil && p.tj.interval {
		b.Right = p.tj.ep.Topic
	} else if p.tj != nil {
		b.Table = p.tj.ep.Topic
	}
	return b
}

// diff lists, in words, what differs between the recorded binding b and
// the run's.
func (b binding) diff(now binding) []string {
	var out []string
	clip := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	if b.Query != now.Query {
		out = append(out, fmt.Sprintf("the query text was %s, now %s", clip(b.Query), clip(now.Query)))
	}
	if b.Schema != now.Schema {
		out = append(out, fmt.Sprintf("the source columns were %s, now %s", clip(b.Schema), clip(now.Schema)))
	}
	if b.Source != now.Source {
		out = append(out, fmt.Sprintf("the source topic was %s, now %s", b.Source, now.Source))
	} else if b.SourcePartitions != now.SourcePartitions && (now.PartitionedByKey || now.JoinIn == joinInSource || now.SourcePartitions < b.SourcePartitions) {
		// Partitions added to a source the query repartitions move no
		// group (groups are placed by key in the repartition topic): the
		// restart reads them. Read by key, they would split groups; a
		// join in the source's partitions has no table partition for them.
		out = append(out, fmt.Sprintf("source topic %s had %d partitions, now %d", b.Source, b.SourcePartitions, now.SourcePartitions))
	}
	if b.PartitionedByKey != now.PartitionedByKey {
		out = append(out, fmt.Sprintf("the source was read partitioned by key: %v, now %v", b.PartitionedByKey, now.PartitionedByKey))
	}
	if b.Sink != now.Sink {
		out = append(out, fmt.Sprintf("the sink topic was %s, now %s", b.Sink, now.Sink))
	}
	if b.Table != now.Table {
		out = append(out, fmt.Sprintf("the versioned table's topic was %q, now %q", b.Table, now.Table))
	}
	if b.Right != now.Right {
		out = append(out, fmt.Sprintf("the right stream's topic was %q, now %q", b.Right, now.Right))
	}
	if b.Views != now.Views {
		was, is := b.Views, now.Views
		if was == "" {
			was = "none"
		}
		if is == "" {
			is = "none"
		}
		out = append(out, fmt.Sprintf("the views and their sink topics were %s, now %s", was, is))
	}
	return out
}

// Owned lists what a query name owns on the cluster: its consumer groups,
// transactional ids (per instance) and internal topics. The repartition
// group and topic exist only when the source is not partitioned by key.
func Owned(name string, partitionedByKey bool) (groups, txnIDs, topics []string) {
	if partitionedByKey {
		return []string{name}, []string{name + ".<instance-id>"}, []string{name + "-state"}
	}
	return []string{name + "-in", name}, []string{name + "-in.<instance-id>", name + ".<instance-id>"},
		[]string{name + "-repartition", name + "-state"}
}

func (p *Pipeline) ownedText() string {
	groups, txns, topics := Owned(p.name, p.direct)
	if p.tj != nil {
		groups = append(groups, p.tableGroup())
		txns = append(txns, p.tableGroup()+".<instance-id>")
		if p.direct {
			topics = append(topics, p.repTopic) // the table's broadcast
		}
	}
	for _, dd := range p.deduplicated() {
		name := dedupName(p.name)
		if dd != firstStream(p.root) {
			name = dedupName(p.tableGroup()) // a second source's
		}
		groups = append(groups, name)
		txns = append(txns, name+".<instance-id>")
		topics = append(topics, name+"-repartition", name+"-state")
	}
	for i := range txns {
		txns[i] = strings.Replace(txns[i], "<instance-id>", p.opts.InstanceID, 1)
	}
	return fmt.Sprintf("consumer groups %s, transactional ids %s, internal topics %s",
		strings.Join(groups, " and "), strings.Join(txns, " and "), strings.Join(topics, " and ")) + p.segmentsText()
}

// checkBinding compares the binding the state topic records with this
// run's, and records it when there is none (a new state topic, or one an
// earlier version of ubik wrote: that one is adopted as it is).
func (p *Pipeline) checkBinding(ctx context.Context) error {
	now := p.binding()
	old, found, err := p.readBinding(ctx)
	if err != nil {
		return err
	}
	if !found {
		if err := p.writeBinding(ctx, now); err != nil {
			return err
		}
		// Two first runs at once: the last record written is the one
		// compaction keeps, so read back which one that is.
		if old, found, err = p.readBinding(ctx); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("kafka: the binding record written to %s partition 0 cannot be read back", p.stateTopic)
		}
	}
	if err := layoutErr(p.q.Name, p.stateTopic, old.Version, p.layout()); err != nil {
		return err
	}
	if d := old.diff(now); len(d) > 0 {
		return fmt.Errorf("%w: query %s ran before with what its state topic %s records, and this run differs: %s. "+
			"A query name owns its %s; they hold that run's offsets and state. "+
			"Give this query a new name (its CREATE VIEW name, or the file name of a bare SELECT), "+
			"or reset the query's state (ubik run --reset-state): that deletes the consumer groups' committed offsets "+
			"and the internal topics, and reads the input again from the start (or --from); the sink topic is kept",
			ErrBindingMismatch, p.q.Name, p.stateTopic, strings.Join(d, "; "), p.ownedText())
	}
	return nil
}

// layoutErr refuses a state topic bound under a layout other than
// current: a newer binary's (ErrNewerState), or an older one's
// (ErrOldState), each with what to do.
func layoutErr(query, stateTopic string, recorded, current int) error {
	v := max(recorded, 1)
	switch {
	case v > current:
		return fmt.Errorf("%w: query %s's state topic %s was written by a newer ubik, in layout %d of its internal topics; this binary reads layout %d. "+
			"Run the newer ubik (every process of the query must run one layout), "+
			"or reset the query's state (ubik run --reset-state), which reads the input again from the start",
			ErrNewerState, query, stateTopic, v, current)
	case v < current:
		return fmt.Errorf("%w: query %s's state topic %s was written by an earlier ubik, in layout %d of its internal topics; this binary writes layout %d. "+
			"Finish the query with the earlier ubik (--until-caught-up), then reset its state (ubik run --reset-state) "+
			"and run this one from where the earlier run stopped (--from), or reset the state and read the input again from the start",
			ErrOldState, query, stateTopic, v, current)
	}
	return nil
}

// readBinding reads the latest binding record of the state topic's
// partition 0 up to its last stable offset. The record is normally the
// partition's first, so the read stops there; a state topic written by an
// earlier ubik is read to its end.
func (p *Pipeline) readBinding(ctx context.Context) (binding, bool, error) {
	var b binding
	adm, closeAdm, err := p.admin()
	if err != nil {
		return b, false, err
	}
	defer closeAdm()
	starts, err := adm.ListStartOffsets(ctx, p.stateTopic)
	if err != nil {
		return b, false, fmt.Errorf("kafka: start offsets of %s: %w", p.stateTopic, err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, p.stateTopic)
	if err != nil {
		return b, false, fmt.Errorf("kafka: stable offsets of %s: %w", p.stateTopic, err)
	}
	s, ok1 := starts.Lookup(p.stateTopic, 0)
	e, ok2 := lso.Lookup(p.stateTopic, 0)
	if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
		return b, false, fmt.Errorf("kafka: offsets of %s partition 0: %v %v", p.stateTopic, s.Err, e.Err)
	}
	if e.Offset <= s.Offset {
		return b, false, nil
	}
	opts := append([]kgo.Opt{}, p.base...)
	opts = append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.stateTopic: {0: kgo.NewOffset().At(s.Offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return b, false, fmt.Errorf("kafka: binding read client: %w", err)
	}
	defer cl.Close()
	var latest []byte
	first, done := true, false
	deadline := time.Now().Add(p.opts.TransactionTimeout + time.Minute)
	for !done {
		if time.Now().After(deadline) {
			return b, false, fmt.Errorf("kafka: reading the binding record of %s partition 0 timed out", p.stateTopic)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return b, false, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
				ferr = fmt.Errorf("kafka: reading %s partition %d: %w", t, part, err)
			}
		})
		if ferr != nil {
			return b, false, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			if r.Offset+1 >= e.Offset {
				done = true
			}
			if r.Offset >= e.Offset || r.Attrs.IsControl() {
				return
			}
			if string(r.Key) == bindingKey && r.Value != nil {
				latest = r.Value
				if first {
					done = true // written first: nothing later replaces it
				}
			}
			first = false
		})
	}
	if latest == nil {
		return b, false, nil
	}
	if err := json.Unmarshal(latest, &b); err != nil {
		return b, false, fmt.Errorf("kafka: the binding record of %s is unreadable: %v", p.stateTopic, err)
	}
	return b, true, nil
}

func (p *Pipeline) writeBinding(ctx context.Context, b binding) error {
	val, err := json.Marshal(b)
	if err != nil {
		return err
	}
	opts := append([]kgo.Opt{}, p.base...)
	opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: binding write client: %w", err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: p.stateTopic, Partition: 0, Key: []byte(bindingKey), Value: val}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("kafka: writing the binding record to %s: %w", p.stateTopic, err)
	}
	p.log.Info("kafka: bound the query name to its inputs", "state_topic", p.stateTopic, "source", b.Source,
		"source_partitions", b.SourcePartitions, "sink", b.Sink)
	return nil
}

// resetState discards what the query name owns: this instance leaves the
// groups (a static member killed earlier would otherwise keep them
// non-empty until its session times out), the groups are deleted with
// their committed offsets, and the internal topics are deleted, so the
// run starts over as a new query would. The sink topic is kept.
func (p *Pipeline) resetState(ctx context.Context, adm *admClient) error {
	groups, _, topics := Owned(p.name, false)     // both layouts: a reset also clears the other one
	sg, st, err := segmentOwned(ctx, adm, p.name) // and every view repartition a query text may have had
	if err != nil {
		return fmt.Errorf("kafka: resetting state: %w", err)
	}
	groups, topics = append(groups, sg...), append(topics, st...)
	// A temporal join's table stage and a dedup stage (a group or topic
	// that never existed is skipped).
	for _, dd := range []string{dedupName(p.name), dedupName(p.tableGroup())} {
		groups = append(groups, dd)
		topics = append(topics, dd+"-repartition", dd+"-state")
	}
	groups = append(groups, p.tableGroup())
	if p.vj != nil {
		// A join of two views' side under layout 2, which ran a second
		// source's view as one (name-left, name-right), unless this run
		// has that side: prepared before the join stage, it reset its own.
		for _, name := range []string{p.name + "-left", p.name + "-right"} {
			if p.vj.hasSide(name) {
				continue
			}
			g, _, t := Owned(name, false)
			groups = append(append(groups, g...), dedupName(name))
			topics = append(append(topics, t...), dedupName(name)+"-repartition", dedupName(name)+"-state")
		}
	}
	for _, g := range groups {
		if _, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(g).InstanceIDs(p.opts.InstanceID).Reason("ubik --reset-state")); err != nil {
			p.log.Debug("kafka: leaving the group before the reset", "group", g, "err", err)
		}
	}
	resp, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("kafka: resetting state: deleting consumer groups %s: %w", strings.Join(groups, ", "), err)
	}
	for _, g := range groups {
		r, ok := resp[g]
		if !ok || r.Err == nil || errors.Is(r.Err, kerr.GroupIDNotFound) {
			continue
		}
		if errors.Is(r.Err, kerr.NonEmptyGroup) {
			return fmt.Errorf("kafka: resetting state: consumer group %s still has members (another process runs query %s, or one stopped less than the session timeout ago): stop them, then retry", g, p.q.Name)
		}
		return fmt.Errorf("kafka: resetting state: deleting consumer group %s: %w", g, r.Err)
	}
	dresp, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: resetting state: deleting topics %s: %w", strings.Join(topics, ", "), err)
	}
	for _, t := range topics {
		if r, ok := dresp[t]; ok && r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("kafka: resetting state: deleting topic %s: %w", t, r.Err)
		}
	}
	// Deletion completes asynchronously on a real cluster.
	for _, t := range topics {
		for i := 0; ; i++ {
			n, err := topicPartitions(ctx, adm, t)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			if i == 300 {
				return fmt.Errorf("kafka: resetting state: topic %s still exists 30s after its deletion", t)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	p.log.Warn("kafka: reset the query's state: deleted its consumer groups (committed offsets) and internal topics; the sink topic is kept",
		"groups", groups, "topics", topics)
	return nil
}
