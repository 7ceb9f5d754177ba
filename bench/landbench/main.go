// Command landbench measures `ubik land` against each store's own ceiling
// in one run, on the same data: N latest-mode changelog records over K
// keys (each key's revisions in order), produced once to a Kafka topic.
// For each store and repeat it runs the ceiling and the lander back to
// back, alternating which goes first, and reports the ratio of each pair
// (these machines are shared and noisy: only same-run ratios mean much).
//
//	ceilings:
//	  redis       redis-benchmark -q -P 64 -n N -r K HSET of the lander's six fields, same sizes (and, beside it, a one-field HSET)
//	  postgres    one plain COPY of the same N rows into an empty table of the lander's shape
//	  clickhouse  the same rows appended in the lander's INSERT size, no guard read (chlander AppendOnly)
//	  dynamodb    unconditional BatchWriteItem of the same rows, 25 per call, 16 calls in flight
//	lander: ubik land --from kafka://BROKERS/TOPIC --to URL --mode latest --until-caught-up
//
// --stores picks the stores (default all four; an unknown name is an error).
// --pg-fillfactor N gives the PostgreSQL ceiling's table and the lander's (ubik
// land's fillfactor= option) that fillfactor.
// See bench/README.md ("Landers") for how to run it and the last figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chlander"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
	"github.com/ubiksql/ubik/land/pglander"
)

type config struct {
	ubik, brokers, redis, pg, ch, dynamo string
	n, keys, dynN, repeat, batch, pgFill int
	stores                               []string
}

func main() {
	var c config
	var stores string
	flag.StringVar(&c.ubik, "ubik", "", "the ubik binary (required)")
	flag.StringVar(&c.brokers, "brokers", env("UBIK_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka brokers")
	flag.StringVar(&c.redis, "redis", env("UBIK_REDIS_ADDR", "127.0.0.1:6379"), "Redis address")
	flag.StringVar(&c.pg, "pg", env("UBIK_PG_DSN", "postgres://ubik@127.0.0.1:5432/ubik?sslmode=disable"), "PostgreSQL DSN")
	flag.StringVar(&c.ch, "clickhouse", env("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), "ClickHouse HTTP URL")
	flag.StringVar(&c.dynamo, "dynamodb", env("UBIK_DYNAMODB_ENDPOINT", "http://127.0.0.1:8000"), "DynamoDB endpoint")
	flag.IntVar(&c.n, "records", 1_000_000, "records")
	flag.IntVar(&c.keys, "keys", 100_000, "distinct keys")
	flag.IntVar(&c.dynN, "dynamodb-records", 5000, "records for DynamoDB (dynalite lands about 1000/s)")
	flag.IntVar(&c.repeat, "repeat", 1, "pairs per store")
	flag.IntVar(&c.pgFill, "pg-fillfactor", 0, "PostgreSQL: the fillfactor of both the ceiling's table and the lander's (ubik land's fillfactor= option; default the lander's, 70)")
	flag.IntVar(&c.batch, "batch", 0, "ubik land --batch (default: ubik land's own, 5000; ClickHouse 50000)")
	flag.StringVar(&stores, "stores", "redis,postgres,clickhouse,dynamodb", "stores to measure, comma-separated, of redis, postgres, clickhouse, dynamodb")
	flag.Parse()
	c.stores = strings.Split(stores, ",")
	for _, s := range c.stores {
		// Checked before the records are produced, which takes a while.
		if !slices.Contains([]string{"redis", "postgres", "clickhouse", "dynamodb"}, s) {
			fmt.Fprintf(os.Stderr, "landbench: --stores: unknown store %q (known: redis, postgres, clickhouse, dynamodb)\n", s)
			os.Exit(2)
		}
	}
	if c.ubik == "" {
		fmt.Fprintln(os.Stderr, "landbench: --ubik is required")
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "landbench:", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// records are the lander benchmarks' own data (landtest.BenchRecords):
// latest-mode records over keys groups of one window, record i at revision
// i/keys+1, so every group moves forward n/keys times, in order.
func records(n, keys int) []changelog.Record { return landtest.BenchRecords(n, keys) }

func produce(ctx context.Context, brokers, topic string, recs []changelog.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	var (
		mu   sync.Mutex
		perr error
		wg   sync.WaitGroup
	)
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, kafkasrc.ToKafka(topic, r), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				perr = errors.Join(perr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return perr
}

// pair is one ceiling and one lander run, back to back; hset1 is Redis's
// one-field HSET rate beside them.
type pair struct{ ceiling, lander, hset1 float64 }

func run(ctx context.Context, c config) error {
	stamp := strconv.FormatInt(time.Now().Unix(), 36)
	recs := records(c.n, c.keys)
	topic := "landbench_" + stamp
	fmt.Fprintf(os.Stderr, "landbench: producing %d records over %d keys to %s\n", c.n, c.keys, topic)
	if err := produce(ctx, c.brokers, topic, recs); err != nil {
		return err
	}
	dynTopic := topic + "_dyn"
	if slices.Contains(c.stores, "dynamodb") {
		if err := produce(ctx, c.brokers, dynTopic, records(c.dynN, c.dynN/10)); err != nil {
			return err
		}
	}
	results := map[string][]pair{}
	for rep := range c.repeat {
		for _, store := range c.stores {
			n, tp := c.n, topic
			if store == "dynamodb" {
				n, tp = c.dynN, dynTopic
			}
			name := fmt.Sprintf("lb_%s_%s_%d", stamp, store[:2], rep)
			var p pair
			var err error
			steps := []func() error{
				func() error { p.ceiling, err = ceiling(ctx, c, store, name+"_ceil", n); return err },
				func() error { p.lander, err = lander(ctx, c, store, tp, name, n); return err },
			}
			if rep%2 == 1 {
				slices.Reverse(steps)
			}
			for _, s := range steps {
				if err := s(); err != nil {
					return fmt.Errorf("%s: %w", store, err)
				}
			}
			if store == "redis" {
				if p.hset1, err = ceiling(ctx, c, "redis-hset1", name+"_h1", n); err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "landbench: %s repeat %d: ceiling %.0f/s, lander %.0f/s, ratio %.2f\n", store, rep+1, p.ceiling, p.lander, p.lander/p.ceiling)
			results[store] = append(results[store], p)
		}
	}
	fmt.Printf("| store | records | lander records/s | ceiling records/s | ratio (median of %d) |\n|---|---|---|---|---|\n", c.repeat)
	for _, store := range c.stores {
		ps := results[store]
		var l, ce, r, h1 []float64
		for _, p := range ps {
			l, ce, r, h1 = append(l, p.lander), append(ce, p.ceiling), append(r, p.lander/p.ceiling), append(h1, p.lander/p.hset1)
		}
		n := c.n
		if store == "dynamodb" {
			n = c.dynN
		}
		fmt.Printf("| %s | %d | %.0f | %.0f | %.2f |\n", store, n, median(l), median(ce), median(r))
		if store == "redis" {
			fmt.Printf("| redis, against a one-field HSET (-t hset) | %d | | | %.2f |\n", n, median(h1))
		}
	}
	return nil
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// lander runs ubik land over the topic into a fresh table (or key prefix)
// and returns records per second of wall time, process start included.
func lander(ctx context.Context, c config, store, topic, name string, n int) (float64, error) {
	var to string
	switch store {
	case "redis":
		to = "redis://" + c.redis + "/0?prefix=" + name + ":"
	case "postgres":
		to = c.pg
		if strings.Contains(to, "?") {
			to += "&table=" + name
		} else {
			to += "?table=" + name
		}
		if c.pgFill != 0 {
			to += "&fillfactor=" + strconv.Itoa(c.pgFill)
		}
	case "clickhouse":
		to = strings.Replace(c.ch, "http://", "clickhouse://", 1) + "/default?table=" + name
	case "dynamodb":
		to = strings.Replace(c.dynamo, "http://", "dynamodb://", 1) + "/" + name
	default:
		return 0, fmt.Errorf("unknown store %q", store)
	}
	args := []string{"land", "--from", "kafka://" + c.brokers + "/" + topic, "--to", to,
		"--mode", "latest", "--until-caught-up", "--group", name, "--stats-interval", "0"}
	if c.batch > 0 {
		args = append(args, "--batch", strconv.Itoa(c.batch))
	}
	cmd := exec.CommandContext(ctx, c.ubik, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	el := time.Since(start)
	defer cleanup(ctx, c, store, name)
	if err != nil {
		return 0, fmt.Errorf("ubik land: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`landed (\d+), duplicate (\d+), superseded (\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("ubik land printed no counts:\n%s", out)
	}
	var total int
	for _, s := range m[1:] {
		v, _ := strconv.Atoi(string(s))
		total += v
	}
	if total != n {
		return 0, fmt.Errorf("ubik land counted %d records, %d were produced:\n%s", total, n, out)
	}
	return float64(n) / el.Seconds(), nil
}

func cleanup(ctx context.Context, c config, store, name string) {
	switch store {
	case "redis":
		r := redis.NewClient(&redis.Options{Addr: c.redis})
		defer r.Close()
		it := r.Scan(ctx, 0, name+":*", 1000).Iterator()
		var keys []string
		for it.Next(ctx) {
			if keys = append(keys, it.Val()); len(keys) == 1000 {
				r.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			r.Unlink(ctx, keys...)
		}
	case "postgres":
		if p, err := pgxpool.New(ctx, c.pg); err == nil {
			p.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
			p.Close()
		}
	case "clickhouse":
		if l, err := chlander.New(ctx, chlander.Options{URL: c.ch, Table: name, Mode: land.Latest, NoCreate: true}); err == nil {
			l.Exec(ctx, "DROP TABLE IF EXISTS "+l.View())
			l.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
		}
	case "dynamodb":
		if d, err := dynamo(c); err == nil {
			d.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	}
}

// redisBenchmark runs redis-benchmark -P 64 over cmd and returns its rate.
func redisBenchmark(ctx context.Context, c config, n int, cmd ...string) (float64, error) {
	args := append([]string{"-h", hostOf(c.redis), "-p", portOf(c.redis), "-q", "-P", "64",
		"-n", strconv.Itoa(n), "-r", strconv.Itoa(c.keys)}, cmd...)
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v\n%s", err, out)
	}
	// -q ends with "CMD ...: R requests per second", after progress lines
	// separated by carriage returns.
	m := regexp.MustCompile(`: ([0-9.]+) requests per second`).FindAllSubmatch(out, -1)
	if m == nil {
		return 0, fmt.Errorf("redis-benchmark printed no rate:\n%s", out)
	}
	return strconv.ParseFloat(string(m[len(m)-1][1]), 64)
}

func hostOf(a string) string { h, _, _ := strings.Cut(a, ":"); return h }
func portOf(a string) string { _, p, _ := strings.Cut(a, ":"); return p }

func dynamo(c config) (*dynamodb.Client, error) {
	return dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(c.dynamo),
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
	}), nil
}

// ceiling runs the store's own fastest write of the same rows.
func ceiling(ctx context.Context, c config, store, name string, n int) (float64, error) {
	defer cleanup(ctx, c, store, name)
	switch store {
	case "redis":
		// The lander's hash, all six fields, values of the same sizes, with
		// no guard: what the server does per record minus the function.
		r := records(1, c.keys)[0]
		return redisBenchmark(ctx, c, n, "HSET", name+":__rand_int__", "value", string(r.Value),
			"window_start", strconv.FormatInt(r.Meta.WindowStart, 10), "revision", "__rand_int__",
			"final", "0", "window_end", strconv.FormatInt(r.Meta.WindowEnd, 10), "key", string(r.Key))
	case "redis-hset1":
		// The first figure: one short field per key.
		return redisBenchmark(ctx, c, n, "HSET", name+":__rand_int__", "f", "v")
	case "postgres":
		pool, err := pgxpool.New(ctx, c.pg)
		if err != nil {
			return 0, err
		}
		defer pool.Close()
		// The lander's own table (History: the key is distinct per row).
		if _, err := pglander.New(ctx, pglander.Options{Pool: pool, Mode: land.History, Table: name, FillFactor: c.pgFill}); err != nil {
			return 0, err
		}
		recs := records(n, c.keys)
		rows := make([][]any, len(recs))
		for i, r := range recs {
			rows[i] = []any{"bench", string(r.Key), int64(i), int64(r.Meta.Revision), false, r.Meta.WindowEnd, string(r.Key), string(r.Value)}
		}
		start := time.Now()
		got, err := pool.CopyFrom(ctx, pgx.Identifier{name}, []string{"query", "group_key", "window_start", "revision", "final", "window_end", "key", "value"}, pgx.CopyFromRows(rows))
		if err != nil || got != int64(n) {
			return 0, fmt.Errorf("COPY: %d rows, %v", got, err)
		}
		return float64(n) / time.Since(start).Seconds(), nil
	case "clickhouse":
		l, err := chlander.New(ctx, chlander.Options{URL: c.ch, Table: name, Mode: land.Latest, AppendOnly: true})
		if err != nil {
			return 0, err
		}
		recs := records(n, c.keys)
		batch := c.batch
		if batch == 0 {
			batch = 50000 // ubik land's default for ClickHouse: the same inserts
		}
		start := time.Now()
		for i := 0; i < n; i += batch {
			if _, err := l.Land(ctx, recs[i:min(i+batch, n)]); err != nil {
				return 0, err
			}
		}
		return float64(n) / time.Since(start).Seconds(), nil
	case "dynamodb":
		d, _ := dynamo(c)
		_, err := d.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		})
		if err != nil {
			return 0, err
		}
		if err := dynamodb.NewTableExistsWaiter(d).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
			return 0, err
		}
		recs := records(n, n/10)
		start := time.Now()
		work := make(chan []changelog.Record)
		errs := make(chan error, 16)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for chunk := range work {
					var reqs []types.WriteRequest
					seen := map[string]bool{}
					for _, r := range chunk {
						pk := "bench:" + string(r.Key)
						if seen[pk] {
							pk += ":" + strconv.FormatUint(r.Meta.Revision, 10) // one batch may not write a key twice
						}
						seen[pk] = true
						reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
							"pk": &types.AttributeValueMemberS{Value: pk}, "value": &types.AttributeValueMemberS{Value: string(r.Value)},
							"window_start": &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Meta.WindowStart, 10)}, "revision": &types.AttributeValueMemberN{Value: strconv.FormatUint(r.Meta.Revision, 10)},
							"final": &types.AttributeValueMemberBOOL{Value: false}, "window_end": &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Meta.WindowEnd, 10)},
							"key": &types.AttributeValueMemberS{Value: string(r.Key)},
						}}})
					}
					for len(reqs) > 0 {
						out, err := d.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{name: reqs}})
						if err != nil {
							errs <- err
							return
						}
						reqs = out.UnprocessedItems[name]
					}
				}
			}()
		}
		for i := 0; i < n; i += 25 {
			work <- recs[i:min(i+25, n)]
		}
		close(work)
		wg.Wait()
		select {
		case err := <-errs:
			return 0, err
		default:
		}
		return float64(n) / time.Since(start).Seconds(), nil
	}
	return 0, fmt.Errorf("unknown store %q", store)
}
