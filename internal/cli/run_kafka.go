package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/kafka"
)

// kafkaFlags are ubik run's Kafka flags. A query runs over Kafka when
// --source or --sink is a kafka:// URL, or when its CREATE SOURCE or CREATE
// SINK says connector = 'kafka'.
type kafkaFlags struct {
	source, sink     string
	from             string
	idleTimeout      time.Duration
	allowUncompacted bool
	instanceID       string
	partitionedByKey bool
	untilCaughtUp    bool
	resetState       bool
	logLevel         string
	commitInterval   time.Duration
	commitRecords    int
	giveUpAfter      time.Duration
	allowDataLoss    bool
}

func addKafkaFlags(fs *flag.FlagSet) *kafkaFlags {
	k := &kafkaFlags{}
	fs.StringVar(&k.source, "source", "", "kafka://host:port[,host:port]/topic?options: consume the input from Kafka (overrides the CREATE SOURCE options)")
	fs.StringVar(&k.sink, "sink", "", "kafka://host:port[,host:port]/topic?options: produce the changelog to a compacted Kafka topic, exactly once; a query over views also produces each view's changelog to its own topic: its CREATE SINK's, else TOPIC-VIEW")
	fs.StringVar(&k.from, "from", "", "Kafka source: where to start without a committed offset: earliest (default), latest, or committed (require one)")
	fs.DurationVar(&k.idleTimeout, "idle-timeout", 0, "Kafka source: a partition quiet this long stops holding the watermark back (default 30s; shorter makes a stalled partition's events late)")
	fs.BoolVar(&k.allowUncompacted, "allow-uncompacted-sink", false, "Kafka sink: warn instead of refusing an existing sink topic (or a view's topic named after it) whose cleanup.policy is not compact")
	fs.StringVar(&k.instanceID, "instance-id", "", "Kafka: this process's stable id in the query's group (default: the host name); distinct per process, the same across restarts")
	fs.BoolVar(&k.partitionedByKey, "partitioned-by-key", false, "Kafka source: the topic is already partitioned by the GROUP BY key; skip the repartition topic")
	fs.BoolVar(&k.untilCaughtUp, "until-caught-up", false, "Kafka: stop once the input is consumed up to where it ended at start: every window finalizes, the last transaction commits, exit 0")
	fs.BoolVar(&k.resetState, "reset-state", false, "Kafka: start the query over: delete its consumer groups (committed offsets) and internal topics (<query>-repartition, <query>-state, and <query>-s2-... of a view repartition), read the input again from --from; the sink topic is kept")
	fs.StringVar(&k.logLevel, "log-level", "info", "Kafka: diagnostics on stderr: debug, info, warn, error (debug adds the Kafka client's own log: joins, syncs, rebalances, retries)")
	fs.DurationVar(&k.commitInterval, "commit-interval", kafka.DefaultCommitInterval, fmt.Sprintf("Kafka: how long a transaction takes input before it commits, at most %s (half the %s transaction timeout): each stage's output, EMIT EARLY's early records included, waits up to this (plus the commit itself) before read_committed consumers see it; longer means fewer transactions and state entries, less CPU per event",
		maxCommitInterval, kafka.DefaultTransactionTimeout))
	fs.IntVar(&k.commitRecords, "commit-records", 0, "Kafka: also end a transaction once it has taken this many input records (it takes whole polls, so up to one poll more): bounds a transaction's size when the input comes faster than --commit-interval; 0 (default) ends transactions by time only")
	fs.DurationVar(&k.giveUpAfter, "give-up-after", kafka.DefaultGiveUpAfter, "Kafka: how long a broker may be down or out of reach (or transactions fail to end) before the run gives up with an error: until then every failed request is retried and the query resumes from what the broker committed")
	fs.BoolVar(&k.allowDataLoss, "allow-data-loss", false, "Kafka source: go on when records below the query's committed offsets were deleted (retention, DeleteRecords) before it read them; they are counted and reported. Default: refuse to start, naming the partitions and how many records were lost")
	return k
}

// maxCommitInterval bounds --commit-interval: a transaction is open for
// the interval and then for what its end takes, and the broker aborts one
// still open at the transaction timeout (ubik runs with the default), so
// the interval must leave the end room (kafka.MaxCommitInterval).
var maxCommitInterval = kafka.MaxCommitInterval(kafka.DefaultTransactionTimeout)

// checkCommitInterval refuses a --commit-interval outside (0, max].
func checkCommitInterval(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: --commit-interval %s: must be positive", ErrUsage, d)
	}
	if d > maxCommitInterval {
		return fmt.Errorf("%w: --commit-interval %s: at most %s (half the %s transaction timeout, so a transaction ends before the broker aborts it)", ErrUsage, d, maxCommitInterval, kafka.DefaultTransactionTimeout)
	}
	return nil
}

// fileOnly names the ubik run flags that only a run over files uses, with
// what a Kafka run does instead; kafkaOnly the flags only a Kafka run uses.
// A flag given to a run it does not apply to is a usage error: ignoring it
// would let a script meant for one path (a missing connector, a typo in a
// URL) run on the other without a word.
func fileOnly(name string) (instead string, ok bool) {
	switch name {
	case "input":
		return "a Kafka query reads --source (or its CREATE SOURCE's topic)", true
	case "output", "output-dir", "format":
		return "a Kafka query writes its changelog to --sink (or its CREATE SINK's topic)", true
	case "state-dir", "checkpoint-interval":
		return "a Kafka query keeps its state in its state topic and commits it every --commit-interval", true
	case "strict", "max-bad", "dead-letter":
		return "a Kafka query counts and logs bad events and goes on", true
	case "stats-json":
		return "a Kafka query reports its counts in its log and at --metrics-addr", true
	case "threads":
		return "a Kafka query runs a driver per partition: start more instances (each its own --instance-id) to use more cores", true
	case "infer":
		return "declare the source in the script with CREATE SOURCE (inference reads the first records of --input)", true
	}
	return "", false
}

func kafkaOnly(name string) bool {
	switch name {
	case "source", "sink", "from", "idle-timeout", "allow-uncompacted-sink", "instance-id",
		"partitioned-by-key", "until-caught-up", "reset-state", "log-level", "commit-interval", "commit-records", "give-up-after", "allow-data-loss":
		return true
	}
	return false
}

// checkRunScope refuses the first flag (in name order) of set that does
// not apply to this run: a Kafka run when overKafka, else a run over files.
func checkRunScope(set map[string]bool, overKafka bool) error {
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if overKafka {
			if instead, ok := fileOnly(name); ok {
				return fmt.Errorf("%w: --%s applies to runs over files only; this run is over Kafka, and %s", ErrUsage, name, instead)
			}
			continue
		}
		if name == "source" || name == "sink" {
			return fmt.Errorf("%w: --%s takes a kafka:// URL and applies to Kafka runs only; a run over files reads --input and writes --output", ErrUsage, name)
		}
		if kafkaOnly(name) {
			return fmt.Errorf("%w: --%s applies to Kafka runs only (a kafka:// --source or --sink, or connector = 'kafka' in the script); this run is not over Kafka", ErrUsage, name)
		}
	}
	return nil
}

func isKafkaURL(s string) bool { return strings.HasPrefix(s, "kafka://") }

// querySink returns the CREATE SINK that q writes to, if any.
func querySink(prog *ubik.Program, q *planQuery) *ubik.Sink { return prog.Sink(q) }

// wanted reports whether the query runs over Kafka.
func (k *kafkaFlags) wanted(prog *ubik.Program, q *planQuery) bool {
	if isKafkaURL(k.source) || isKafkaURL(k.sink) {
		return true
	}
	if strings.EqualFold(q.Source().Option("connector"), "kafka") {
		return true
	}
	s := querySink(prog, q)
	return s != nil && strings.EqualFold(s.Option("connector"), "kafka")
}

// runKafka runs qs (each with the views it reads) from Kafka sources to
// Kafka sinks, exactly once, until interrupted, or with
// --until-caught-up until each input is consumed to the end it had at
// start and every window is final. Several queries run side by side in
// this process, each its own pipeline (run_kafka_many.go).
func runKafka(ctx context.Context, env *Env, k *kafkaFlags, f *runFlags, prog *ubik.Program, qs []*planQuery) error {
	if err := checkKafkaFlags(k, f, qs); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(k.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: %v", ErrUsage, k.logLevel, err)
	}
	log := slog.New(slog.NewTextHandler(redactWriter{env.Stderr}, &slog.HandlerOptions{Level: lvl}))
	late := &kafkaLate{path: f.lateOutput}
	runs := make([]*kafkaRun, 0, len(qs))
	for _, q := range qs {
		r, err := newKafkaRun(env, k, f, prog, q, qs, log, lvl, late)
		if err != nil {
			return queryErr(qs, q, err)
		}
		runs = append(runs, r)
	}
	if err := distinctSinks(runs); err != nil {
		return err
	}
	for _, r := range runs {
		if started, err := pingEndpoints(ctx, env, k, f, r.q, r.eps); !started {
			return err
		}
	}
	if err := late.open(); err != nil {
		return err
	}
	defer late.close()
	if f.metrics != "" {
		stop, err := serveKafkaMetrics(ctx, env, f.metrics, runs)
		if err != nil {
			return err
		}
		defer stop()
	}
	started := time.Now()
	err := runAll(ctx, log, runs)
	// A stop (SIGINT, SIGTERM) is a clean end: the open transaction has
	// ended and the summary says why the run ended. A Kafka run is a
	// service, so it exits 0; with --until-caught-up it had an end of its
	// own, which it did not reach: 128 + the signal number (signalEnd).
	stopped := err == nil && ctx.Err() != nil
	if !f.quiet {
		how := ""
		if stopped {
			how = "stopped (" + stopCause(ctx).Error() + "): "
		}
		for _, r := range runs {
			fmt.Fprint(env.Stderr, kafkaSummary(r.q, r.pl.Stats(), r.eps.src.IdleTimeout, how, time.Since(started).Seconds()))
		}
	}
	if err == nil {
		err = late.err()
	}
	if err == nil && stopped {
		err = signalEnd(ctx, !k.untilCaughtUp)
	}
	return err
}

// kafkaEndpoints are the topics of a Kafka run.
type kafkaEndpoints struct {
	src, sink kafka.Endpoint
	table     kafka.Endpoint // a temporal join's table or an interval join's right stream
	joinSrc   kafka.Endpoint // the second source of a join of two views over two sources
	views     map[string]kafka.Endpoint
}

// kafkaEndpointsOf reads the run's topics from the flags and the
// script's CREATE SOURCE, CREATE TABLE and CREATE SINK statements.
func kafkaEndpointsOf(env *Env, k *kafkaFlags, prog *ubik.Program, q *planQuery) (*kafkaEndpoints, error) {
	var e kafkaEndpoints
	var err error
	if e.src, err = kafkaRunSource(env, k, q); err != nil {
		return nil, err
	}
	if e.table, err = kafkaRunTable(env, k, q, e.src); err != nil {
		return nil, err
	}
	if e.joinSrc, err = kafkaJoinSource(q, e.src, k, env); err != nil {
		return nil, err
	}
	if e.sink, err = kafkaRunSink(env, k, prog, q); err != nil {
		return nil, err
	}
	if k.allowUncompacted {
		// Before viewSinks: the views' topics named after the sink's
		// (TOPIC-VIEW) are the sink's too.
		e.sink.AllowUncompacted = true
	}
	if e.views, err = viewSinks(prog, q, e.sink, env); err != nil {
		return nil, err
	}
	if k.from != "" {
		if e.src.From, err = kafka.ParseStartOffset(k.from); err != nil {
			return nil, fmt.Errorf("%w: --from: %v", ErrUsage, err)
		}
	}
	if k.idleTimeout < 0 {
		return nil, fmt.Errorf("%w: --idle-timeout must be positive", ErrUsage)
	}
	if k.idleTimeout > 0 {
		e.src.IdleTimeout = k.idleTimeout
	}
	if k.partitionedByKey {
		e.src.PartitionedByKey = true
	}
	return &e, nil
}

// kafkaRunSource is the run's source topic: --source, or the CREATE SOURCE's.
func kafkaRunSource(env *Env, k *kafkaFlags, q *planQuery) (kafka.Endpoint, error) {
	var src kafka.Endpoint
	var err error
	input := firstInput(q) // the declared source (a view's, for a query over views; an interval join's left stream)
	switch {
	case isKafkaURL(k.source):
		src, err = kafka.ParseURL(k.source, kafka.RoleSource, env.Getenv)
		if err == nil {
			err = sameFormat(input, src)
		}
	case k.source != "":
		return src, fmt.Errorf("%w: --source %s is not a kafka:// URL", ErrUsage, redactURL(k.source))
	case strings.EqualFold(input.Option("connector"), "kafka"):
		src, err = kafka.FromOptions(input.Options(), kafka.RoleSource, env.Getenv)
		if err != nil {
			err = fmt.Errorf("CREATE SOURCE %s: %w", input.Name(), err)
		}
	default:
		return src, fmt.Errorf("%w: a Kafka sink needs a Kafka source (--source kafka://host:port/topic, or connector = 'kafka' in CREATE SOURCE %s): exactly-once output rests on consuming the input in the same transactions", ErrUsage, input.Name())
	}
	return src, err
}

// kafkaRunTable is the topic of the run's second input, if any: the
// versioned table (or an interval join's right stream), read with the
// source's connection settings unless it names brokers.
func kafkaRunTable(env *Env, k *kafkaFlags, q *planQuery, src kafka.Endpoint) (kafka.Endpoint, error) {
	t, create, what := secondKafkaInput(q)
	if t == nil {
		return kafka.Endpoint{}, nil
	}
	if !strings.EqualFold(t.Option("connector"), "kafka") {
		return kafka.Endpoint{}, fmt.Errorf("%w: query %s joins %s, which over Kafka is read from a topic: %s %s (...) WITH (connector = 'kafka', topic = 'TOPIC'); a file (path) is for a file run", ErrUsage, q.Name(), what, create, t.Name())
	}
	opts := t.Options()
	if opts["brokers"] == "" {
		// Without brokers, the table is on the source's cluster.
		opts["brokers"] = strings.Join(src.Config.Brokers, ",")
	}
	table, err := kafka.FromOptions(opts, kafka.RoleSource, env.Getenv)
	if err != nil {
		return table, fmt.Errorf("%s %s: %w", create, t.Name(), err)
	}
	if table.PartitionedByKey {
		if create == "CREATE SOURCE" {
			return table, fmt.Errorf("%w: CREATE SOURCE %s: partitioned_by_key: an interval join's inputs are both split by the join key", ErrUsage, t.Name())
		}
		return table, fmt.Errorf("%w: CREATE TABLE %s: partitioned_by_key is a stream's option: every partition reads the whole table", ErrUsage, t.Name())
	}
	if k.idleTimeout > 0 {
		table.IdleTimeout = k.idleTimeout
	}
	return table, nil
}

// kafkaRunSink is the run's changelog topic: --sink, or the CREATE SINK's.
func kafkaRunSink(env *Env, k *kafkaFlags, prog *ubik.Program, q *planQuery) (kafka.Endpoint, error) {
	var sink kafka.Endpoint
	var err error
	switch s := querySink(prog, q); {
	case isKafkaURL(k.sink):
		sink, err = kafka.ParseURL(k.sink, kafka.RoleSink, env.Getenv)
	case k.sink != "":
		return sink, fmt.Errorf("%w: --sink %s is not a kafka:// URL", ErrUsage, redactURL(k.sink))
	case s != nil && strings.EqualFold(s.Option("connector"), "kafka"):
		sink, err = kafka.FromOptions(s.Options(), kafka.RoleSink, env.Getenv)
		if err != nil {
			err = fmt.Errorf("CREATE SINK %s: %w", s.Name(), err)
		}
	default:
		return sink, fmt.Errorf("%w: a Kafka source needs a Kafka sink (--sink kafka://host:port/topic, or CREATE SINK ... WITH (connector = 'kafka', ...)): the output is produced in the transactions that commit the input offsets", ErrUsage)
	}
	return sink, err
}

// pingEndpoints reaches the source's and the sink's clusters. started is
// false when the run ends here, with err: a cluster that cannot be
// reached, or a stop (SIGINT, SIGTERM) while starting, a clean stop,
// said and ended as a later one (signalEnd).
func pingEndpoints(ctx context.Context, env *Env, k *kafkaFlags, f *runFlags, q *planQuery, eps *kafkaEndpoints) (started bool, err error) {
	for _, c := range []kafka.Config{eps.src.Config, eps.sink.Config} {
		if err := pingKafka(ctx, c); err != nil {
			if ctx.Err() != nil {
				if !f.quiet {
					fmt.Fprintf(env.Stderr, "ubik: %s: stopped (%s) while starting: 0 events consumed\n", q.Name(), stopCause(ctx))
				}
				return false, signalEnd(ctx, !k.untilCaughtUp)
			}
			return false, err
		}
	}
	return true, nil
}

// kafkaOptions are the pipeline's options for a run of q.
func kafkaOptions(k *kafkaFlags, q *planQuery, eps *kafkaEndpoints, log *slog.Logger, lvl slog.Level, late *kafkaLate) kafka.Options {
	var clientOpts []kgo.Opt
	if lvl <= slog.LevelDebug {
		// The Kafka client's own log: joins, syncs, leaves, retries.
		clientOpts = append(clientOpts, kafka.ClientLogger(log, kgo.LogLevelInfo))
	}
	reported := 0
	return kafka.Options{
		Plan:           q,
		ClientOpts:     clientOpts,
		Source:         eps.src,
		Sink:           eps.sink,
		InstanceID:     k.instanceID,
		CommitInterval: k.commitInterval,
		CommitRecords:  k.commitRecords,
		GiveUpAfter:    k.giveUpAfter,
		AllowDataLoss:  k.allowDataLoss,
		Logger:         log,
		UntilCaughtUp:  k.untilCaughtUp,
		OnLateEvent:    late.hook(),
		ResetState:     k.resetState,
		ViewSinks:      eps.views,
		Table:          eps.table,
		JoinSource:     eps.joinSrc,
		OnBadEvent: func(e *kafka.BadEvent) {
			if reported < 10 {
				log.Warn("ubik: event not applied", "topic", e.Topic, "partition", e.Partition, "offset", e.Offset, "err", e.Err)
			}
			reported++
		},
	}
}

// kafkaSummary is the line a Kafka run prints at its end; how says why
// it ended ("" at the end of its input), el its seconds.
func kafkaSummary(q *planQuery, st kafka.Stats, idleTimeout time.Duration, how string, el float64) string {
	end := ""
	if st.HeadersSkipped > 0 {
		end = fmt.Sprintf(", %d CSV header records skipped", st.HeadersSkipped)
	}
	if t, _, what := secondKafkaInput(q); t != nil {
		end += fmt.Sprintf(", %s: %d rows read, %d malformed, %d late", what, st.TableRows, st.TableMalformed, st.TableLate)
	}
	if st.DataLost > 0 {
		end += fmt.Sprintf(", %d source records lost (deleted before they were read; --allow-data-loss)", st.DataLost)
	}
	if st.CaughtUp {
		end += ", caught up"
	} else {
		if idleTimeout == 0 {
			idleTimeout = kafka.DefaultIdleTimeout
		}
		if len(st.SilentPartitions) > 0 {
			end += fmt.Sprintf(", no events yet from source partitions %s (they hold the watermark back, so windows wait, until --idle-timeout %s passes)", joinParts(st.SilentPartitions), idleTimeout)
		}
		if len(st.IdlePartitions) > 0 {
			end += fmt.Sprintf(", idle source partitions %s (quiet for --idle-timeout %s: they no longer hold the watermark back)", joinParts(st.IdlePartitions), idleTimeout)
		}
	}
	// Duplicates and unchanged records are named as the file run's
	// summary names them (summary.text).
	dups, unchanged := "", ""
	if st.Duplicates+st.DedupLate > 0 {
		dups = fmt.Sprintf(", %d duplicates, %d dedup late", st.Duplicates, st.DedupLate)
	}
	if st.UnchangedSuppressed > 0 {
		unchanged = fmt.Sprintf(", %d unchanged suppressed", st.UnchangedSuppressed)
	}
	return fmt.Sprintf("ubik: %s: %s%d events consumed, %d malformed, %d eval errors, %d late%s, %d records produced%s, %d commits, %d aborts, %d operator restores, %.3fs, %.0f events/s%s\n",
		q.Name(), how, st.EventsIn, st.Malformed, st.EvalErrors, st.Late, dups, st.RecordsOut, unchanged, st.Commits, st.Aborts, st.Restores, el, float64(st.EventsIn)/max(el, 1e-9), end)
}

// viewSinks gives each view q reads (directly or through other views)
// its own changelog topic: its CREATE SINK's (connector = 'kafka'), or
// else the sink topic's name, a dash and the view's name, on the sink's
// cluster, as ksqlDB gives each persistent query its own topic.
func viewSinks(prog *ubik.Program, q *planQuery, sink kafka.Endpoint, env *Env) (map[string]kafka.Endpoint, error) {
	ups := allViews(q) // both sides' of a join of two views
	if len(ups) == 0 {
		return nil, nil
	}
	out := map[string]kafka.Endpoint{}
	for _, v := range ups {
		if s := querySink(prog, v); s != nil && strings.EqualFold(s.Option("connector"), "kafka") {
			e, err := kafka.FromOptions(s.Options(), kafka.RoleSink, env.Getenv)
			if err != nil {
				return nil, fmt.Errorf("CREATE SINK %s: %w", s.Name(), err)
			}
			out[v.Name()] = e
			continue
		}
		e := sink
		e.Topic = sink.Topic + "-" + v.Name()
		out[v.Name()] = e
	}
	return out, nil
}

// sameFormat refuses a --source URL whose format (json or csv) is not the
// one the CREATE SOURCE names: the URL's options replace the statement's,
// and a script written for CSV read as JSON would only yield malformed
// events.
func sameFormat(s *ubik.Source, src kafka.Endpoint) error {
	f, ok := s.Options()["format"]
	if !ok {
		return nil
	}
	name := func(csv bool) string {
		if csv {
			return "csv"
		}
		return "json"
	}
	if want, err := kafka.ParseFormat(map[string]string{"format": f}); err == nil && want != src.Format.CSV {
		return fmt.Errorf("%w: CREATE SOURCE %s reads format %s, --source reads %s (its options replace the statement's): say format=%s in the URL",
			ErrUsage, s.Name(), name(want), name(src.Format.CSV), name(want))
	}
	return nil
}

func joinParts(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// watchPartitions logs, once a second while the query runs, when the set
// of source partitions that hold the watermark back (no event yet) or
// that are idle changes: why windows wait is then visible on stderr.
func watchPartitions(log *slog.Logger, pl *kafka.Pipeline, idleTimeout time.Duration, done <-chan struct{}) {
	if idleTimeout == 0 {
		idleTimeout = kafka.DefaultIdleTimeout
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var silent, idle string
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		st := pl.Stats()
		if s := joinParts(st.SilentPartitions); s != silent {
			silent = s
			if s != "" {
				log.Info("ubik: source partitions without events hold the watermark back; windows wait until they are idle", "partitions", s, "idle_timeout", idleTimeout)
			}
		}
		if s := joinParts(st.IdlePartitions); s != idle {
			idle = s
			if s != "" {
				log.Info("ubik: idle source partitions no longer hold the watermark back", "partitions", s, "idle_timeout", idleTimeout)
			}
		}
	}
}

// secondKafkaInput is the second topic a Kafka run of q reads: a temporal
// join's versioned table or an interval join's right stream (nil for
// any other query), the statement that declares it, and its name.
func secondKafkaInput(q *planQuery) (src *ubik.Source, create, what string) {
	if viewJoinOf(q) != nil {
		return nil, "", "" // a join of two views: its second stream is the join source (kafkaJoinSource)
	}
	r := inputQuery(q)
	if t := joinTable(r); t != nil { // q's, or the temporal join of the view its chain starts at
		return t, "CREATE TABLE", "table " + t.Name()
	}
	if _, right, ok := r.IntervalJoin(); ok && len(r.Views()) == 0 { // q's, or the one of the view its chain starts at
		return right, "CREATE SOURCE", "source " + right.Name()
	}
	return nil, "", ""
}
