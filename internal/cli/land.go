package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chlander"
	"github.com/ubiksql/ubik/land/dynamolander"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landprom"
	"github.com/ubiksql/ubik/land/pglander"
	"github.com/ubiksql/ubik/land/redislander"
)

const landUsage = `usage: ubik land --from kafka://HOST:PORT[,HOST:PORT...]/TOPIC --to STORE --mode MODE [flags]

Upserts a ubik changelog topic into a store, committing the consumer
group's offsets only after the store acknowledged the writes.

STORE is one of:
  redis://[:PASSWORD@]HOST:PORT/DB[?prefix=P]
  dynamodb://HOST:PORT/TABLE[?region=R&tls=1]   (credentials: AWS_ACCESS_KEY_ID and
                                                AWS_SECRET_ACCESS_KEY, else "local")
  postgres://USER[:PASSWORD]@HOST:PORT/DB[?table=T&fillfactor=F&sslmode=...]
                                                (fillfactor: of a table land creates, 10 to
                                                100, default 70: room for in-page updates)
  clickhouse://[USER[:PASSWORD]@]HOST:8123[/DB][?table=T&tls=1]
                                                (DB: default "default")
  (table=T: default ubik_land; created when missing)

MODE is continuous (a continuous view), latest (the latest window per
group) or history (one row per group and window).

A record that can never land (not a changelog record, a key that is not a
JSON array, or one the store refuses, such as a value holding \u0000 for
PostgreSQL or an item over 400 KB for DynamoDB) stops the run with an error
naming its topic, partition and offset. --skip-bad-records sets it aside
instead (logged, counted as bad or rejected, and written to --dead-letter
FILE when given) and lands the rest of its batch.

A store outage is retried until the store answers. A store error that
points at the configuration (a missing table, grant or credentials) stops
the run at once (exit status 1), naming the store's reason and what to check.

--metrics-addr HOST:PORT serves Prometheus metrics at http://HOST:PORT/metrics
(a host is required: 127.0.0.1:9465 for loopback, 0.0.0.0:9465 to mean every
interface):
  ubik_land_records_landed_total, ubik_land_records_duplicate_total,
  ubik_land_records_superseded_total, ubik_land_records_bad_total,
  ubik_land_records_rejected_total,
  ubik_land_batches_total, ubik_land_store_errors_total,
  ubik_land_commit_errors_total, ubik_land_retries_total,
  ubik_land_backlog_records, ubik_land_batch_store_seconds (histogram),
  ubik_land_partition_{committed_offset,end_offset,lag_records}{topic,partition},
  ubik_land_info{topic,group,mode,store}

flags:
`

// The default --batch. ClickHouse gets batches ten times larger: it writes
// a part per INSERT, and its guard read scans the table whatever the
// batch's size, so fewer, larger batches scan it less often.
const (
	defaultBatch           = 5000
	defaultBatchClickHouse = 50000
)

// batchGiven reports whether --batch was on the command line (its zero
// default stands for the store's own default).
func batchGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "batch" })
	return given
}

// landFlags is the parsed command line of ubik land.
type landFlags struct {
	from, to, mode, group, query string
	batch, inFlight              int
	skipBad, untilCaughtUp       bool
	statsEvery                   time.Duration
	metrics, cpuProfile          string
	deadLetter                   string
}

func parseLandFlags(args []string, env *Env) (landFlags, error) {
	var f landFlags
	fs := flag.NewFlagSet("land", flag.ContinueOnError)
	setUsage(fs, env, strings.TrimSuffix(landUsage, "\nflags:\n"),
		"ubik land --from kafka://127.0.0.1:9092/totals --to redis://127.0.0.1:6379/0 --mode latest",
		"ubik land --from kafka://127.0.0.1:9092/totals --to 'postgres://ubik@127.0.0.1:5432/ubik?table=totals&sslmode=disable' --mode history --until-caught-up",
		"ubik land --from kafka://127.0.0.1:9092/totals --to clickhouse://127.0.0.1:8123/default?table=totals --mode continuous --metrics-addr 127.0.0.1:9465")
	fs.StringVar(&f.from, "from", "", "the changelog topic: kafka://HOST:PORT/TOPIC")
	fs.StringVar(&f.to, "to", "", "the store URL (see above)")
	fs.StringVar(&f.mode, "mode", "", "continuous, latest or history")
	fs.StringVar(&f.group, "group", "", "consumer group (default ubik-land.TOPIC.STORE.MODE)")
	fs.StringVar(&f.query, "query", "", "namespace for records without a query name; records of another query are refused")
	fs.IntVar(&f.batch, "batch", 0, "records per batch (default 5000; ClickHouse 50000, which writes best in large inserts)")
	fs.IntVar(&f.inFlight, "in-flight", 2, "batches landing at once")
	fs.BoolVar(&f.skipBad, "skip-bad-records", false, "set aside (log, count, --dead-letter) records that can never land instead of stopping")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "with --skip-bad-records: append each record set aside to FILE, one JSON object a line with its topic, partition, offset, key, value, headers and the reason")
	fs.BoolVar(&f.untilCaughtUp, "until-caught-up", false, "exit once every partition is landed and committed up to its end")
	fs.DurationVar(&f.statsEvery, "stats-interval", 10*time.Second, "how often to print the counters on stderr (0: only at exit)")
	fs.StringVar(&f.metrics, "metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9465); off by default")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for performance work)")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("%w: land: unexpected argument %q", ErrUsage, fs.Arg(0))
	case f.from == "" || f.to == "" || f.mode == "":
		return f, fmt.Errorf("%w: land: --from, --to and --mode are required (ubik land -h)", ErrUsage)
	case batchGiven(fs) && f.batch <= 0 || f.inFlight <= 0:
		return f, fmt.Errorf("%w: land: --batch and --in-flight must be positive", ErrUsage)
	case f.deadLetter != "" && !f.skipBad:
		return f, fmt.Errorf("%w: land: --dead-letter is where --skip-bad-records puts records; give both", ErrUsage)
	}
	if f.metrics != "" {
		if err := checkMetricsAddr(f.metrics); err != nil {
			return f, fmt.Errorf("land: %w", err)
		}
	}
	return f, nil
}

// kafkaSource parses kafka://HOST:PORT[,HOST:PORT]/TOPIC.
func kafkaSource(s string) (brokers []string, topic string, err error) {
	bad := fmt.Errorf("%w: land: --from %s is not kafka://HOST:PORT/TOPIC", ErrUsage, redactURL(s))
	rest, ok := strings.CutPrefix(s, "kafka://")
	if !ok {
		return nil, "", bad
	}
	hosts, topic, ok := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return nil, "", fmt.Errorf("%w: land: --from %s carries a user or password; ubik land reads Kafka without authentication, and a URL is no place for a secret", ErrUsage, redactURL(s))
	}
	if !ok || hosts == "" || topic == "" || strings.ContainsAny(topic, "/?#") {
		return nil, "", bad
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			brokers = append(brokers, h)
		}
	}
	return brokers, topic, nil
}

// redactURL hides the password of a URL for messages: the user info's
// and a password query option's. A URL that does not parse is not shown.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "(a URL that does not parse)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	if q, err := url.ParseQuery(u.RawQuery); err != nil {
		u.RawQuery = "(options that do not parse)"
	} else {
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") || strings.Contains(strings.ToLower(k), "secret") {
				q.Set(k, "xxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// pgURLOptions are the query options of a postgres:// URL that ubik
// passes on (libpq's connection parameters and pgxpool's pool settings);
// anything else is refused rather than sent to the server as a setting.
func pgURLOptions() []string {
	return []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni", "sslnegotiation",
		"connect_timeout", "application_name", "target_session_attrs", "options", "search_path", "timezone",
		"statement_timeout", "krbsrvname", "passfile", "service", "servicefile",
		"pool_max_conns", "pool_min_conns", "pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_health_check_period"}
}

// storeQuery parses the query of a store URL strictly: every pair must
// parse (';' separates nothing: escape it as %3B), each option appears
// once, and only the options the store takes are accepted.
func storeQuery(flagName, raw string, u *url.URL, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: the options do not parse: %v", ErrUsage, flagName, redactURL(raw), err)
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			known := slices.Clone(allowed)
			slices.Sort(known)
			return nil, fmt.Errorf("%w: %s %s: unknown option %q%s (%s:// takes %s)", ErrUsage, flagName, redactURL(raw), k, suggest(k, allowed), u.Scheme, strings.Join(known, ", "))
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("%w: %s %s: option %q is given %d times", ErrUsage, flagName, redactURL(raw), k, len(vs))
		}
	}
	return q, nil
}

// openStore opens the lander for --to. closeFn releases its client.
func openStore(ctx context.Context, env *Env, to string, mode land.Mode, query string) (l land.Lander, closeFn func(), err error) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	u, err := url.Parse(to)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: land: --to is not a URL", ErrUsage)
	}
	var q url.Values
	switch u.Scheme {
	case "redis", "rediss":
		// go-redis refuses the options it does not know; prefix is ours.
		if q, err = url.ParseQuery(u.RawQuery); err != nil {
			return nil, nil, fmt.Errorf("%w: land: --to %s: the options do not parse: %v", ErrUsage, redactURL(to), err)
		}
		if len(q["prefix"]) > 1 {
			return nil, nil, fmt.Errorf("%w: land: --to %s: option \"prefix\" is given %d times", ErrUsage, redactURL(to), len(q["prefix"]))
		}
		prefix := q.Get("prefix")
		q.Del("prefix")
		u.RawQuery = q.Encode()
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("%w: land: --to %s: %v", ErrUsage, redactURL(to), err)
		}
		c := redis.NewClient(opts)
		rl, err := redislander.New(ctx, redislander.Options{Client: c, Mode: mode, Query: query, Prefix: prefix})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return rl, func() { c.Close() }, nil
	case "dynamodb":
		if q, err = storeQuery("land: --to", to, u, "region", "tls"); err != nil {
			return nil, nil, err
		}
		table := strings.Trim(u.Path, "/")
		if u.Host == "" || table == "" {
			return nil, nil, fmt.Errorf("%w: land: --to %s is not dynamodb://HOST:PORT/TABLE", ErrUsage, redactURL(to))
		}
		scheme := "http"
		if q.Get("tls") == "1" || q.Get("tls") == "true" {
			scheme = "https"
		}
		region := q.Get("region")
		if region == "" {
			region = "us-east-1"
		}
		creds := credentials.NewStaticCredentialsProvider("local", "local", "")
		if id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
			creds = credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))
		}
		c := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: aws.String(scheme + "://" + u.Host), Credentials: creds})
		dl, err := dynamolander.New(ctx, dynamolander.Options{Client: c, Mode: mode, Query: query, Table: table})
		if err != nil {
			return nil, nil, err
		}
		return dl, func() {}, nil
	case "postgres", "postgresql":
		if q, err = storeQuery("land: --to", to, u, append([]string{"table", "fillfactor"}, pgURLOptions()...)...); err != nil {
			return nil, nil, err
		}
		table := q.Get("table")
		var fillFactor int
		if v := q.Get("fillfactor"); v != "" {
			if fillFactor, err = strconv.Atoi(v); err != nil || fillFactor < 10 || fillFactor > 100 {
				return nil, nil, fmt.Errorf("%w: land: --to %s: fillfactor %q is not an integer from 10 to 100", ErrUsage, redactURL(to), v)
			}
		}
		q.Del("table")
		q.Del("fillfactor")
		u.RawQuery = q.Encode()
		pool, err := pgxpool.New(ctx, u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("land: connecting to %s: %v", redactURL(to), err)
		}
		pl, err := pglander.New(ctx, pglander.Options{Pool: pool, Mode: mode, Query: query, Table: table, FillFactor: fillFactor})
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return pl, pool.Close, nil
	case "clickhouse":
		if q, err = storeQuery("land: --to", to, u, "table", "tls"); err != nil {
			return nil, nil, err
		}
		scheme := "http"
		if q.Get("tls") == "1" || q.Get("tls") == "true" {
			scheme = "https"
		}
		opts := chlander.Options{URL: scheme + "://" + u.Host, Database: strings.Trim(u.Path, "/"), Table: q.Get("table"), Mode: mode, Query: query}
		if u.User != nil {
			opts.User = u.User.Username()
			opts.Password, _ = u.User.Password()
		}
		cl, err := chlander.New(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		return cl, func() {}, nil
	}
	return nil, nil, fmt.Errorf("%w: land: --to scheme %q is not redis, dynamodb, postgres or clickhouse", ErrUsage, u.Scheme)
}

func runLand(ctx context.Context, env *Env, args []string) error {
	f, err := parseLandFlags(args, env)
	if err != nil {
		return err
	}
	mode, err := land.ParseMode(f.mode)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	brokers, topic, err := kafkaSource(f.from)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if f.group == "" {
		scheme, _, _ := strings.Cut(f.to, ":")
		f.group = "ubik-land." + topic + "." + scheme + "." + mode.String()
	}

	if f.batch == 0 {
		f.batch = defaultBatch
		if storeKind(f.to) == "clickhouse" {
			f.batch = defaultBatchClickHouse
		}
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	lander, closeStore, err := openStore(ctx, env, f.to, mode, f.query)
	if err != nil {
		return err
	}
	defer closeStore()
	defer lander.Close()

	var dl *deadLetter
	if f.deadLetter != "" {
		if dl, err = openDeadLetter(f.deadLetter); err != nil {
			return err
		}
		defer dl.Close()
	}
	srcOpts := kafkasrc.Options{
		Brokers: brokers, Topics: []string{topic}, Group: f.group, MaxBatch: f.batch,
		SkipBadRecords: f.skipBad, Logger: logger,
	}
	if dl != nil {
		srcOpts.DeadLetter = dl.Kafka
	}
	src, err := kafkasrc.New(srcOpts)
	if err != nil {
		return err
	}
	defer src.Close()
	// A missing topic would make the consumer wait forever: say so instead.
	topics, err := kadm.NewClient(src.Client()).ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("land: listing topic %s on %s: %w", topic, strings.Join(brokers, ","), err)
	}
	if !topics.Has(topic) || topics[topic].Err != nil {
		return fmt.Errorf("land: topic %s does not exist on %s", topic, strings.Join(brokers, ","))
	}

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	errCaughtUp := errors.New("caught up")
	if f.untilCaughtUp {
		if done, err := src.CaughtUp(ctx); err != nil {
			return err
		} else if done {
			fmt.Fprintf(env.Stderr, "land: %s is already landed up to its end (group %s)\n", topic, f.group)
			return nil
		}
	}
	var c land.Counters
	c.Lag.Store(-1)
	opts := land.RunOptions{MaxInFlight: f.inFlight, Logger: logger, Counters: &c}
	if f.skipBad {
		// Run logs and counts each record it sets aside.
		opts.OnBadRecord = func(land.BadRecord) error { return nil }
		if dl != nil {
			opts.OnBadRecord = dl.Refused
		}
	}
	if f.metrics != "" {
		reg := prometheus.NewRegistry()
		opts, err = landprom.Instrument(opts, landprom.Options{Reg: reg, Partitions: src.Partitions,
			Info: landprom.Info{Topic: topic, Group: f.group, Mode: mode.String(), Store: storeKind(f.to)}})
		if err != nil {
			return err
		}
		stopMetrics, bound, err := serveRegistry(ctx, env.Stderr, f.metrics, reg)
		if err != nil {
			return fmt.Errorf("land: %w", err)
		}
		defer stopMetrics()
		fmt.Fprintf(env.Stderr, "ubik: metrics on http://%s/metrics\n", bound)
	}
	printStats := func(prefix string) {
		fmt.Fprintf(env.Stderr, "land: %s%s -> %s: landed %d, duplicate %d, superseded %d, bad %d, rejected %d, store errors %d, retried %d, lag %d\n",
			prefix, topic, redactURL(f.to), c.Landed.Load(), c.Duplicate.Load(), c.Superseded.Load(),
			c.Skipped.Load(), c.Rejected.Load(), c.StoreErrors.Load(), c.Retried.Load(), c.Lag.Load())
	}
	if f.statsEvery > 0 {
		go func() {
			t := time.NewTicker(f.statsEvery)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					printStats("")
				}
			}
		}()
	}
	observe := opts.OnBatch
	opts.OnBatch = func(s land.BatchStats) {
		if observe != nil {
			observe(s)
		}
		if !f.untilCaughtUp || s.Lag != 0 {
			return
		}
		if done, err := src.CaughtUp(runCtx); err == nil && done {
			stop(errCaughtUp)
		}
	}
	err = land.Run(runCtx, src, lander, opts)
	if errors.Is(context.Cause(runCtx), errCaughtUp) {
		err = nil
	} else if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Interrupted: what landed is committed. A service's normal
		// stop; with --until-caught-up, an end not reached (signalEnd).
		err = signalEnd(ctx, !f.untilCaughtUp)
	}
	printStats("done: ")
	return err
}
