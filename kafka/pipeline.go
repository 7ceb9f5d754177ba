package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Pipeline runs one query over Kafka, exactly once.
type Pipeline struct {
	opts                 Options
	q                    *plan.Query
	root                 *plan.Query   // the query reading the source: q, or the first view of q's chain
	views                []*plan.Query // q's chain of views, root first (none for a query over the source)
	log                  *slog.Logger
	base                 []kgo.Opt // connection options
	repTopic, stateTopic string
	direct               bool            // the source's partitions are the first stage's (partitioned by the group key, or a join where its stream is): no repartition stage
	dedup                bool            // the source has a dedup key: a dedup stage (dedupstage.go)
	dedupJoin            bool            // a join where its stream is, over a dedup key (placeSource): stage 1 routes by it, the join's stage deduplicates
	nParts               int             // partitions of the aggregating stage's input (and of the state topic)
	nSource              int             // partitions of the source topic
	sourceEnd            map[int32]int64 // UntilCaughtUp: the source's end offsets at start
	tj                   *tableJoin      // a temporal join's table input (join.go); nil without one
	vj                   *viewJoin       // a join of two views: its sides (viewjoin.go); nil without one
	caughtUp             atomic.Bool
	c                    counters
	partMu               sync.Mutex
	idleParts            []int32 // publishSourceParts
	silentParts          []int32
	// name owns the groups, transactional ids and internal topics of the
	// stages: the query's name, or a segment's (viewrepart.go).
	name string
	// top is the last query its own aggregating stage runs: q, or the
	// last of the first segment of q's plan when the chain is cut
	// (viewrepart.go), whose rows fwd sends to the next segment; after
	// are the pipelines of the segments after it, each reading the rows
	// of the one before.
	top   *plan.Query
	after []*Pipeline
	// ins are the inputs of its aggregating stage's graph, in the
	// graph's order (stagein.go).
	ins []graphIn
	// lateRight, if set, receives an interval join's late right rows in
	// place of opts.OnLate (rightLate).
	lateRight func(*drive.LateEvent)

	fwd *forward
	// also are more topics the primary's rows go to beside fwd's: a
	// view two joins of two views read (newSide).
	also []*forward
	// dedupParts, when set, is the partition count of another
	// pipeline's dedup stage that feeds it (upParts, dedupOutsOf).
	dedupParts int
	// plan and stages are the query's plan and its stages, each bound to
	// the pipeline that holds it (queryStages); set on the query's own
	// pipeline.
	plan   *dataflow.Plan
	stages []stageRun

	sourceMeta topicMeta // the source topic as Run found it (watchSource)
	stop       halt      // set when the source changed under the pipeline: no commit after it
	resumed    bool      // the source group had committed offsets at start
}

// markerHeader marks a watermark marker on the repartition topic.
const markerHeader = "ubik.wm"

var markerKey = []byte("ubik.wm")

// DefaultCommitInterval is Options.CommitInterval's default, Kafka
// Streams' exactly-once commit.interval.ms.
const DefaultCommitInterval = 100 * time.Millisecond

// DefaultTransactionTimeout is Options.TransactionTimeout's default.
const DefaultTransactionTimeout = 30 * time.Second

// MaxCommitInterval is the longest commit interval New accepts with the
// given transaction timeout: half of it. A transaction is open for the
// interval and then for what its end takes (the last poll's records, the
// flush of its output and state entries, EndTxn), which on a loaded
// machine or a slow broker takes seconds; a transaction still open at the
// timeout is aborted by the broker and its producer fenced, so every
// transaction would be redone without end. Half leaves the end as much
// time as the interval.
func MaxCommitInterval(transactionTimeout time.Duration) time.Duration {
	return transactionTimeout / 2
}

// New validates opts and returns a pipeline. Nothing touches the network
// until Run.
func New(opts Options) (*Pipeline, error) {
	hostOptions(&opts)
	if opts.Query == nil {
		return nil, fmt.Errorf("%w: no query", ErrConfig)
	}
	p, err := newNamed(opts, opts.Query.Name)
	if err != nil {
		return nil, err
	}
	if err := p.checkTopics(); err != nil {
		return nil, err
	}
	if err := p.queryStages(); err != nil {
		return nil, err
	}
	return p, nil
}

// newNamed is New for a pipeline that owns its groups, ids and internal
// topics under name (a side of a join of two views runs its view's
// query under a name derived from the join's).
func newNamed(opts Options, name string) (*Pipeline, error) {
	if err := checkTopicName(name + "-repartition"); err != nil {
		return nil, fmt.Errorf("%w: query name %q cannot name internal topics", ErrConfig, name)
	}
	if err := opts.Source.Config.Validate(); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if err := opts.Sink.Config.Validate(); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	if opts.Source.Topic == "" || opts.Sink.Topic == "" {
		return nil, fmt.Errorf("%w: source and sink need a topic", ErrConfig)
	}
	if !sameCluster(opts.Source.Config, opts.Sink.Config) {
		return nil, fmt.Errorf("%w: source (%s) and sink (%s) must be on one cluster: a Kafka transaction cannot span two", ErrConfig, opts.Source.Config, opts.Sink.Config)
	}
	if opts.InstanceID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "ubik"
		}
		opts.InstanceID = h
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = DefaultCommitInterval
	}
	if opts.MaxPollRecords == 0 {
		opts.MaxPollRecords = 10000
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.TransactionTimeout == 0 {
		opts.TransactionTimeout = DefaultTransactionTimeout
	}
	if opts.GiveUpAfter == 0 {
		opts.GiveUpAfter = DefaultGiveUpAfter
	}
	if opts.Source.IdleTimeout == 0 {
		opts.Source.IdleTimeout = DefaultIdleTimeout
	}
	if opts.CommitInterval < 0 || opts.CommitRecords < 0 || opts.MaxPollRecords < 0 || opts.SessionTimeout < 0 || opts.TransactionTimeout < 0 || opts.RepartitionPartitions < 0 || opts.GiveUpAfter < 0 {
		return nil, fmt.Errorf("%w: negative interval, timeout or count", ErrConfig)
	}
	if m := MaxCommitInterval(opts.TransactionTimeout); opts.CommitInterval > m {
		return nil, fmt.Errorf("%w: commit interval %s is above %s, half the transaction timeout %s: a transaction stays open for the interval and then the time its end takes, and one the broker times out is aborted and redone",
			ErrConfig, opts.CommitInterval, m, opts.TransactionTimeout)
	}
	base, err := opts.Source.Config.ClientOpts()
	if err != nil {
		return nil, err
	}
	q := opts.Query
	p := &Pipeline{opts: opts, q: q, root: q, top: q, name: name, repTopic: name + "-repartition", stateTopic: name + "-state",
		log: opts.Logger.With("query", q.Name, "instance", opts.InstanceID), base: append(base, opts.ClientOpts...)}
	if p.root = viewJoinBelow(q); p.root != nil {
		if err := newViewJoin(p); err != nil { // the join of two views, or a chain over it
			return nil, err
		}
		return p, nil
	}
	// The stages the plan's segments give (topology.go): one, or a
	// chain of them, each reading the rows of the one before through a
	// repartition topic (viewrepart.go).
	segs, err := chainQueries(q)
	if err != nil {
		return nil, err
	}
	if err := CheckQuery(q); err != nil {
		return nil, err
	}
	root, views := segs[0][0], chainViews(q, segs)
	if len(views) > 0 {
		if err := checkViewSinks(opts, q, views); err != nil {
			return nil, err
		}
	}
	if err := drive.NewMessageDecoder(root.Source, opts.Source.Format).Err(); err != nil {
		return nil, fmt.Errorf("%w: source: %v", ErrConfig, err)
	}
	tj, err := newTableJoin(&opts, root)
	if err != nil {
		return nil, err
	}
	p.opts, p.tj, p.root, p.views = opts, tj, root, views
	p.lateRight = opts.queryLate
	if err := p.placeSource(); err != nil {
		return nil, err
	}
	p.ins = p.sourceInputs()
	if len(segs) > 1 {
		if err := p.newSegments(segs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkViewSinks checks the sinks of the views q reads: each has a topic,
// on the sink's cluster, and each sink is a view's that q reads (that no
// two uses share a topic is checkTopics').
func checkViewSinks(opts Options, q *plan.Query, views []*plan.Query) error {
	for _, v := range views {
		vs, ok := opts.ViewSinks[v.Name]
		if !ok || vs.Topic == "" {
			return fmt.Errorf("%w: query %s reads view %s, which needs its own sink topic (Options.ViewSinks)", ErrConfig, q.Name, v.Name)
		}
		if !sameCluster(opts.Sink.Config, vs.Config) {
			return fmt.Errorf("%w: view %s's sink (%s) must be on the cluster of the sink (%s): a Kafka transaction cannot span two", ErrConfig, v.Name, vs.Config, opts.Sink.Config)
		}
	}
	for name := range opts.ViewSinks {
		if !slices.ContainsFunc(views, func(v *plan.Query) bool { return v.Name == name }) {
			return fmt.Errorf("%w: a sink for view %s, which query %s does not read", ErrConfig, name, q.Name)
		}
	}
	return nil
}

// SameCluster reports whether a and b reach one cluster: they share a
// broker address.
func SameCluster(a, b Config) bool { return sameCluster(a, b) }

func sameCluster(a, b Config) bool {
	set := map[string]bool{}
	for _, x := range a.Brokers {
		set[x] = true
	}
	for _, x := range b.Brokers {
		if set[x] {
			return true
		}
	}
	return false
}

// Stats returns the counters of every stage p runs, added up: its own,
// its chain's segments', and the sides' of a join of two views (a side
// two joins read counts once, in the join that runs it). A join of two
// views reads no versioned table: each of its inputs is a declared
// stream, as a file run counts it (sideEvents).
func (p *Pipeline) Stats() Stats {
	var s Stats
	for _, c := range p.counted() {
		s.add(c.ownStats())
	}
	s.IdlePartitions, s.SilentPartitions = p.sourceReader().sourceParts()
	s.CaughtUp = p.out().caughtUp.Load()
	if p.vj != nil {
		s = sideEvents(s)
	}
	return s
}

// counted are the pipelines whose counters p's add up: each that holds
// a stage of the query (a view two joins read runs, and counts, once).
func (p *Pipeline) counted() []*Pipeline {
	var out []*Pipeline
	for _, r := range p.stages {
		if !slices.Contains(out, r.p) {
			out = append(out, r.p)
		}
	}
	return out
}

// sourceReader is the pipeline whose stage reads p's source partitions
// (and tells which are idle or silent): p, or, for a join of two views
// reading rows only, its first side's.
func (p *Pipeline) sourceReader() *Pipeline {
	if p.vj != nil && p.readsRows() && len(p.vj.sides) > 0 {
		return p.vj.sides[0].p.sourceReader()
	}
	return p
}

// ownStats are the counters of p's own stages.
func (p *Pipeline) ownStats() Stats {
	c := &p.c
	stateBytes := c.stateBytes.Load() + c.dedup2.bytes.Load() // a dedup stage's keys are live state too, as in a file run
	if p.dedup {
		stateBytes += c.dedup.bytes.Load()
	}
	return Stats{
		EventsIn: c.eventsIn.Load(), EventsApplied: c.applied.Load(), Malformed: c.malformed.Load(), HeadersSkipped: c.headers.Load(),
		EvalErrors: c.evalErrors.Load(), Late: c.late.Load(), RecordsOut: c.recordsOut.Load(),
		StateEntriesOut: c.stateOut.Load(), MarkersOut: c.markersOut.Load(), Commits: c.commits.Load(),
		Aborts: c.aborts.Load(), Restores: c.restores.Load(), RestoredEntries: c.restoredEntries.Load(), Redos: c.redos.Load(),
		DataLost:   c.dataLost.Load(),
		LiveGroups: c.liveGroups.Load(), StateBytes: stateBytes, Duplicates: c.dedup.duplicates.Load() + c.dedup2.duplicates.Load(),
		DedupLate: c.dedup.late.Load() + c.dedup2.late.Load(), DedupKeys: c.dedup.keys.Load() + c.dedup2.keys.Load(),
		DedupBytes:          c.dedup.bytes.Load() + c.dedup2.bytes.Load(),
		UnchangedSuppressed: c.unchanged.Load(),
		TableRows:           c.tableRows.Load(), TableMalformed: c.tableMalformed.Load(), TableLate: c.tableLate.Load(),
		JoinJoined: c.joinJoined.Load(), JoinUnmatched: c.joinUnmatched.Load(), JoinWaiting: c.joinWaiting.Load(),
		JoinVersions: c.joinVersions.Load(), JoinKeys: c.joinKeys.Load(),
	}
}

// Run prepares the topics, then runs the stages until ctx is canceled (a
// clean stop within seconds: the open transaction ends, committed or
// aborted, and the process leaves the groups, so its partitions move at
// once) or a stage fails.
func (p *Pipeline) Run(ctx context.Context) error {
	adm, closeAdm, err := p.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	if err := p.prepareAll(ctx, adm); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil // stopped while starting: a clean stop, as later
		}
		return err
	}
	p.log.Info("kafka: pipeline starting", "source", p.opts.Source.Topic, "sink", p.opts.Sink.Topic,
		"cluster", p.opts.Source.Config, "direct", p.direct, "partitions", p.nParts)
	return p.runStages(ctx)
}

// prepareAll prepares p's topics: a join of two views', or any other's.
func (p *Pipeline) prepareAll(ctx context.Context, adm *admClient) error {
	if p.vj != nil {
		return p.prepareViewJoin(ctx, adm)
	}
	return p.prepare(ctx, adm)
}

func (p *Pipeline) admin() (*admClient, func(), error) {
	cl, err := kgo.NewClient(p.base...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: client: %w", err)
	}
	return &admClient{Client: kadm.NewClient(cl), cl: cl}, cl.Close, nil
}

// prepare checks the source, creates or checks the sink and the internal
// topics, and checks committed offsets when the source must start from them.
func (p *Pipeline) prepare(ctx context.Context, adm *admClient) error {
	if err := p.describeSource(ctx, adm); err != nil {
		return err
	}
	if !p.direct && p.opts.RepartitionPartitions > 0 {
		p.nParts = p.opts.RepartitionPartitions
	}
	if err := p.prepareOwn(ctx, adm, p.views); err != nil {
		return err
	}
	if err := ensureSegmentTopics(ctx, adm, p.after, p.nParts, p.log); err != nil {
		return err
	}
	if err := p.prepareInputs(ctx, adm); err != nil {
		return err
	}
	p.bindInputs()
	p.bindAfter()
	return nil
}

// describeSource reads the source topic's partitions (nSource, and
// nParts until the internal topics say otherwise).
func (p *Pipeline) describeSource(ctx context.Context, adm *admClient) error {
	meta, err := describeTopic(ctx, adm, p.opts.Source.Topic)
	if err != nil {
		return err
	}
	if meta.partitions == 0 {
		return fmt.Errorf("%w: source topic %s does not exist", ErrConfig, p.opts.Source.Topic)
	}
	p.sourceMeta, p.nSource, p.nParts = meta, meta.partitions, meta.partitions
	return nil
}

// prepareInputs prepares what p reads beside its own topics: a join's
// second input, the end offsets (UntilCaughtUp), the committed offsets
// --from committed starts from, and the check that no record was lost.
func (p *Pipeline) prepareInputs(ctx context.Context, adm *admClient) error {
	n := p.nSource
	var err error
	if p.tj != nil {
		if err := p.prepareTable(ctx, adm); err != nil {
			return err
		}
	}
	if p.opts.UntilCaughtUp {
		if p.sourceEnd, err = p.sourceEnds(ctx, adm); err != nil {
			return err
		}
		p.log.Info("kafka: running until caught up", "ends", p.sourceEnd)
	}
	if p.opts.Source.From == FromCommitted {
		group := p.inGroup()
		offs, err := adm.FetchOffsetsForTopics(ctx, group, p.opts.Source.Topic)
		if err != nil {
			return fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
		}
		var missing []string
		for i := 0; i < n; i++ {
			if o, ok := offs.Lookup(p.opts.Source.Topic, int32(i)); !ok || o.At < 0 {
				missing = append(missing, fmt.Sprint(i))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: --from committed, but group %s has no committed offset for %s partition(s) %s", ErrConfig, group, p.opts.Source.Topic, strings.Join(missing, ","))
		}
	}
	return p.checkDataLoss(ctx, adm)
}

// prepareOwn resets what p's name owns if asked, checks its binding (or
// records it), and creates or checks its sink, views' sinks (of views)
// and internal topics.
func (p *Pipeline) prepareOwn(ctx context.Context, adm *admClient, views []*plan.Query) error {
	if p.opts.ResetState {
		if err := p.resetState(ctx, adm); err != nil {
			return err
		}
	}
	// The state topic records the inputs it belongs to: compared before
	// the layout checks, so that a query name reused over other inputs
	// is told what differs, and recorded when the topic is new.
	ns, err := topicPartitions(ctx, adm, p.stateTopic)
	if err != nil {
		return err
	}
	if ns > 0 && p.vj == nil && !p.direct && p.opts.RepartitionPartitions == 0 {
		// The internal topics keep the count they were created with: a
		// source that gained partitions since does not move the groups,
		// which are placed by their key in the repartition topic.
		p.nParts = ns
	}
	if p.dedup {
		if err := p.oldDedupState(ctx, adm, ns); err != nil {
			return err
		}
	}
	if ns > 0 {
		if err := p.oldJoinState(ctx); err != nil {
			return err
		}
		if err := p.checkBinding(ctx); err != nil {
			return err
		}
	}
	sinkParts := p.opts.Sink.Partitions
	if sinkParts == 0 {
		sinkParts = p.nParts
	}
	if err := ensureSinkTopic(ctx, adm, p.opts.Sink.Topic, sinkParts, p.opts.Sink.AllowUncompacted, p.log); err != nil {
		return err
	}
	for _, v := range views {
		vs := p.opts.ViewSinks[v.Name]
		parts := vs.Partitions
		if parts == 0 {
			parts = p.nParts
		}
		if err := ensureSinkTopic(ctx, adm, vs.Topic, parts, vs.AllowUncompacted, p.log); err != nil {
			return fmt.Errorf("view %s: %w", v.Name, err)
		}
	}
	if p.dedup || p.tj != nil && p.tj.dedup {
		if err := p.prepareDedup(ctx, adm); err != nil {
			return err
		}
	}
	if !p.direct || p.tj != nil { // a join's table rows reach it there
		if err := ensureInternalTopic(ctx, adm, p.repTopic, p.nParts, false, p.log); err != nil {
			return err
		}
	}
	if err := ensureInternalTopic(ctx, adm, p.stateTopic, p.nParts, true, p.log); err != nil {
		return err
	}
	if ns == 0 {
		return p.checkBinding(ctx)
	}
	return nil
}

// inGroup is the consumer group of the source topic.
func (p *Pipeline) inGroup() string {
	if p.direct {
		return p.name
	}
	return p.name + "-in"
}

func (p *Pipeline) resetOffset() kgo.Offset {
	// A query that resumes reads a partition without a committed offset
	// (one added to the source since) from its start, whatever --from
	// says: --from is where a new query starts.
	if p.opts.Source.From == FromLatest && !p.resumed {
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

// decoder returns a decoder of the source's record values. Both stages
// decode with it: the repartition stage forwards the value bytes unchanged.
func (p *Pipeline) decoder() *drive.Decoder { return p.segmentDecoder(p.root) }

// segmentDecoder is the decoder of the source's records for root, a
// query of p's graph reading it.
func (p *Pipeline) segmentDecoder(root *plan.Query) *drive.Decoder {
	if j := root.Join; j != nil {
		return drive.NewMessageSourceDecoder(j.Stream, root.StreamUsed(), p.opts.Source.Format)
	}
	if j := root.IJoin; j != nil {
		return drive.NewMessageSourceDecoder(j.Left, root.LeftUsed(), p.opts.Source.Format)
	}
	return drive.NewMessageDecoder(root.Source, p.formatOf(root.Source))
}

// formatOf is the format of src's topic: the second input's (a join of
// two views' second source), else the source's.
func (p *Pipeline) formatOf(src *plan.Source) drive.MessageFormat {
	if p.tj != nil && p.tj.src == src {
		return p.tj.ep.Format
	}
	return p.opts.Source.Format
}

// txnCounts are what an open transaction's records counted. They reach
// the pipeline's counters only if it commits: after an abort the stage
// reads the same records again, and counts them again.
type txnCounts struct {
	drive.Counts
	eventsIn, recordsOut, tableRows, tableMalformed int64
}

// count adds a driver's counts to the transaction's. events: the driver
// reads the source topic, so its records are the events consumed.
func (t *txn) count(c drive.Counts, events bool) {
	if events {
		t.counts.eventsIn += c.Records
	}
	t.counts.Applied += c.Applied
	t.counts.Malformed += c.Malformed
	t.counts.Headers += c.Headers
	t.counts.EvalErrors += c.EvalErrors
	t.counts.Late += c.Late
}

// settle adds the ended transaction's counts to p's if it committed, and
// starts the next transaction's from zero.
func (t *txn) settle(p *Pipeline, committed bool) {
	if c := t.counts; committed {
		p.c.eventsIn.Add(c.eventsIn)
		p.c.applied.Add(c.Applied)
		p.c.malformed.Add(c.Malformed)
		p.c.headers.Add(c.Headers)
		p.c.evalErrors.Add(c.EvalErrors)
		p.c.late.Add(c.Late)
		p.c.recordsOut.Add(c.recordsOut)
		p.c.tableRows.Add(c.tableRows)
		p.c.tableMalformed.Add(c.tableMalformed)
	}
	t.counts = txnCounts{}
	t.deliver(committed)
}

// badEvent hands an event the driver did not apply (an *drive.EventError,
// already counted) to OnBadEvent when tx commits, and reports true; any
// other error is not an event's, and it reports false.
func (p *Pipeline) badEvent(tx *txn, r *kgo.Record, err error) bool {
	var ee *drive.EventError
	if !errors.As(err, &ee) {
		return false
	}
	tx.badEvent(p, BadEvent{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: ee.Err})
	return true
}

// firstStream is the declared source whose records p's first stage (a
// direct query's only stage) reads, as decoder decodes them.
func firstStream(q *plan.Query) *plan.Source {
	switch {
	case q.Join != nil:
		return q.Join.Stream
	case q.IJoin != nil:
		return q.IJoin.Left
	}
	return q.Source
}
