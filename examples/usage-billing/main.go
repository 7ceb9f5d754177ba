// Command usage-billing is the helper of examples/usage-billing/run.sh: it
// generates the usage events, watches the changelog while the stream runs,
// checks the landed totals against the usage log, and cleans up. The
// pipeline itself is run with the ubik commands (produce, run, land, usage);
// this program only does what they do not.
//
//	usage-billing gen --out DIR [--seed 1] [--customers 1000] [--hours 6] [--per-hour 4] [--retry 0.01]
//	    DIR/events.jsonl: the stream, in arrival order, retried copies included
//	    DIR/usage.jsonl:  the same events in the usage log's shape, same order
//	    DIR/prices.jsonl: the price plans' versions, in valid_from order
//	usage-billing intervals --prices FILE --from T --to T
//	    prints the [from, to) intervals between the hour boundaries and the
//	    price changes, one "FROM TO" line each
//	usage-billing check-charge --charges FILE [--redis ADDR --db N --query Q] --prices FILE --customers C --hours H --logs FILE...
//	    checks ubik's hourly charges (from the file run, and landed in Redis from
//	    the run over Kafka) against the usage log's sums per price interval
//	usage-billing watch --brokers B --topic T --expect N
//	    follows the changelog topic (read_committed) from its start until it
//	    has seen N final records; checks every provisional total <= the final
//	usage-billing wait-topic --brokers B --topic T
//	    waits (30s at most) until the topic exists
//	usage-billing wait-store --redis ADDR --db N --query Q --expect N
//	    waits until Redis holds N final rows of the query
//	usage-billing check --redis ADDR --db N --query Q --events FILE --customers C --hours H --log FILE...
//	usage-billing cleanup [--redis ADDR --db N --query Q] [--pg DSN --ch URL --table T] [--brokers B --topics a,b --groups c,d --prefix P]
//
// Every failure exits 1 with a message that names it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chhttp"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/redislander"
)

// start is the first hour of the generated usage (UTC).
var start = time.Date(2026, 7, 18, 0, 0, 0, 0, time.UTC)

const meter = "gb_processed"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fail(errors.New("usage: usage-billing gen|watch|wait-topic|wait-store|check|intervals|check-charge|cleanup [flags]"))
	}
	cmds := map[string]func(context.Context, []string) error{
		"gen": gen, "watch": watch, "wait-topic": waitTopic, "wait-store": waitStore, "check": check, "cleanup": cleanup,
		"intervals": intervals, "check-charge": checkCharge,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
	if err := f(ctx, os.Args[2:]); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "usage-billing:", err)
	os.Exit(1)
}

// ---------------------------------------------------------------- gen

type event struct {
	id       string
	customer string
	plan     string
	qtyNano  int64 // quantity in billionths: DECIMAL(18,9), 18 significant digits
	ms       int64 // event time, epoch ms
	arrival  int64 // when it reaches the topic and the log (ms), for ordering
	seq      int
}

func (e event) qty() string {
	return fmt.Sprintf("%d.%09d", e.qtyNano/1_000_000_000, e.qtyNano%1_000_000_000)
}

// gen writes the stream deterministically from the seed: for every
// customer and hour, 1 to per-hour*2-1 events (per-hour on average) with
// quantities of 18 significant digits in [100000000.000000000,
// 999999999.999999999]; each arrives up to 2 minutes after its
// event time (bounded disorder, under the query's 3-minute watermark
// delay); about retry of them are sent again, with the same event_id and
// payload, 30 seconds to 10 minutes later (a retry).
func gen(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	out := fs.String("out", "", "output directory")
	seed := fs.Uint64("seed", 1, "random seed")
	customers := fs.Int("customers", 1000, "customers")
	hours := fs.Int("hours", 6, "hours")
	perHour := fs.Int("per-hour", 4, "events per customer-hour, on average")
	retry := fs.Float64("retry", 0.01, "fraction of events retried")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *customers < 1 || *hours < 1 || *perHour < 1 || *retry < 0 || *retry > 1 {
		return errors.New("gen: need --out, and positive --customers, --hours, --per-hour, --retry in [0, 1]")
	}
	r := rand.New(rand.NewPCG(*seed, *seed^0x5851f42d4c957f2d))
	var evs []event
	n := 0
	for h := 0; h < *hours; h++ {
		hour := start.Add(time.Duration(h) * time.Hour).UnixMilli()
		for c := 0; c < *customers; c++ {
			k := 1 + r.IntN(2**perHour-1)
			for i := 0; i < k; i++ {
				ms := hour + r.Int64N(3_600_000)
				e := event{id: fmt.Sprintf("evt-%07d", n), customer: fmt.Sprintf("c%04d", c), plan: plans[c%len(plans)].name,
					qtyNano: 100_000_000_000_000_000 + r.Int64N(900_000_000_000_000_000), ms: ms, arrival: ms + r.Int64N(120_000)}
				n++
				evs = append(evs, e)
			}
		}
	}
	copies := 0
	for i, m := 0, len(evs); i < m; i++ {
		if r.Float64() < *retry {
			c := evs[i]
			c.arrival += 30_000 + r.Int64N(570_000)
			evs = append(evs, c)
			copies++
		}
	}
	for i := range evs {
		evs[i].seq = i
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].arrival != evs[j].arrival {
			return evs[i].arrival < evs[j].arrival
		}
		return evs[i].seq < evs[j].seq
	})
	versions := priceVersions(r, evs, *hours)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	write := func(name string, line func(*bufio.Writer, event)) error {
		f, err := os.Create(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for _, e := range evs {
			line(w, e)
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	if err := write("events.jsonl", func(w *bufio.Writer, e event) {
		fmt.Fprintf(w, `{"event_id":%q,"customer":%q,"plan":%q,"qty":%s,"ts":%q}`+"\n", e.id, e.customer, e.plan, e.qty(), ts(e.ms))
	}); err != nil {
		return err
	}
	if err := write("usage.jsonl", func(w *bufio.Writer, e event) {
		fmt.Fprintf(w, `{"key":%q,"time":%q,"meter":%q,"quantity":%s,"dims":{"customer":%q,"plan":%q}}`+"\n", e.id, ts(e.ms), meter, e.qty(), e.customer, e.plan)
	}); err != nil {
		return err
	}
	if err := writePrices(filepath.Join(*out, "prices.jsonl"), versions); err != nil {
		return err
	}
	fmt.Printf("generated %d events (%d distinct, %d retried copies) for %d customers over %d hours from %s; %d price versions of %d plans\n",
		len(evs), n, copies, *customers, *hours, start.Format(time.RFC3339), len(versions), len(plans))
	return nil
}

// ---------------------------------------------------------------- prices

// plans are the price plans; customer c is on plans[c % 3]. A price is per
// unit of quantity, DECIMAL(12,6), in millionths.
var plans = []struct {
	name    string
	initial int64
}{{"starter", 12_000}, {"growth", 9_500}, {"scale", 7_250}}

// priceVersion is one row of the prices table.
type priceVersion struct {
	plan      string
	micros    int64 // the price in millionths
	validFrom int64 // epoch ms
}

func (v priceVersion) price() string {
	return fmt.Sprintf("%d.%06d", v.micros/1_000_000, v.micros%1_000_000)
}

// priceVersions draws the price versions: every plan's initial price,
// valid from an hour before the first event, then two changes per plan at
// random instants inside the hours (never on an hour boundary), and one
// more change of the second plan at the exact time of one of its events
// (the event takes the new price: a version is valid from its valid_from
// on). The versions are in valid_from order; no plan has two versions at
// the same time.
func priceVersions(r *rand.Rand, evs []event, hours int) []priceVersion {
	var vs []priceVersion
	taken := map[priceVersion]bool{}
	add := func(plan string, micros, at int64) {
		for taken[priceVersion{plan: plan, validFrom: at}] {
			at++
		}
		taken[priceVersion{plan: plan, validFrom: at}] = true
		vs = append(vs, priceVersion{plan, micros, at})
	}
	for _, p := range plans {
		add(p.name, p.initial, start.Add(-time.Hour).UnixMilli())
		price := p.initial
		for i := 0; i < 2; i++ {
			hour := start.Add(time.Duration(r.IntN(hours)) * time.Hour).UnixMilli()
			price += r.Int64N(price/2) - price/4 // -25% to +25%
			add(p.name, price, hour+1+r.Int64N(3_599_999))
		}
	}
	var ofPlan []event
	for _, e := range evs {
		if e.plan == plans[1].name {
			ofPlan = append(ofPlan, e)
		}
	}
	if len(ofPlan) > 0 {
		e := ofPlan[r.IntN(len(ofPlan))]
		add(e.plan, plans[1].initial*3/2, e.ms)
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].validFrom < vs[j].validFrom })
	return vs
}

func writePrices(path string, vs []priceVersion) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, v := range vs {
		fmt.Fprintf(w, `{"plan":%q,"price":%s,"valid_from":%q}`+"\n", v.plan, v.price(),
			time.UnixMilli(v.validFrom).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ---------------------------------------------------------------- decimals

// dec parses an exact decimal (a JSON number's text or the usage log's
// decimal string).
func dec(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal", s)
	}
	return r, nil
}

// row is the value of a changelog record: {"customer", "hour", "total", "events"}.
type row struct {
	Customer string      `json:"customer"`
	Hour     string      `json:"hour"`
	Total    json.Number `json:"total"`
	Events   int64       `json:"events"`
}

func parseRow(b []byte) (row, *big.Rat, error) {
	var v row
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return v, nil, fmt.Errorf("value %s: %w", b, err)
	}
	t, err := dec(v.Total.String())
	if err != nil {
		return v, nil, fmt.Errorf("value %s: total: %w", b, err)
	}
	return v, t, nil
}

// ---------------------------------------------------------------- watch

type keyState struct {
	lastRev     uint64
	final       bool
	finalTotal  *big.Rat
	maxProvis   *big.Rat
	provisional int
}

// watch follows the changelog topic from its start, read_committed, as a
// consumer of the serving topic would, while the stream runs. Per key it
// checks that revisions only go up and that nothing follows the final
// record; at the end, that every provisional total is at most the final
// total. A provisional record the broker compacted away before the watcher
// read it is not seen (the topic is compacted); the watcher reads as the
// records commit, and reports how many it saw.
func watch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "host:port[,host:port]")
	topic := fs.String("topic", "", "changelog topic")
	expect := fs.Int("expect", 0, "stop after this many final records")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after this long")
	ready := fs.String("ready", "", "create this file once the consumer is polling")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" || *topic == "" || *expect <= 0 {
		return errors.New("watch: need --brokers, --topic and --expect > 0")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumeTopics(*topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := map[string]*keyState{}
	finals, records := 0, 0
	var violations []string
	violate := func(f string, a ...any) {
		if len(violations) < 10 {
			violations = append(violations, fmt.Sprintf(f, a...))
		}
	}
	deadline := time.Now().Add(*timeout)
	if *ready != "" {
		if err := os.WriteFile(*ready, nil, 0o644); err != nil {
			return err
		}
	}
	for finals < *expect {
		if time.Now().After(deadline) {
			return fmt.Errorf("watch: %d of %d final records after %s (%d records read)", finals, *expect, *timeout, records)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("watch: interrupted after %d records, %d finals", records, finals)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kerr.UnknownTopicOrPartition) && ferr == nil {
				ferr = fmt.Errorf("watch: %s partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			rec, err := kafkasrc.Decode(r)
			if err != nil {
				violate("partition %d offset %d: %v", r.Partition, r.Offset, err)
				return
			}
			_, total, err := parseRow(rec.Value)
			if err != nil {
				violate("%v", err)
				return
			}
			k := string(rec.Key)
			s := keys[k]
			if s == nil {
				s = &keyState{}
				keys[k] = s
			}
			switch {
			case s.final:
				violate("key %s: revision %d after the final record", k, rec.Meta.Revision)
			case rec.Meta.Revision <= s.lastRev:
				violate("key %s: revision %d after %d", k, rec.Meta.Revision, s.lastRev)
			}
			s.lastRev = rec.Meta.Revision
			if rec.Meta.Final {
				s.final, s.finalTotal = true, total
				finals++
				return
			}
			s.provisional++
			if s.maxProvis == nil || total.Cmp(s.maxProvis) > 0 {
				s.maxProvis = total
			}
		})
	}
	provisional, withProvisional, above := 0, 0, 0
	for k, s := range keys {
		if !s.final {
			violate("key %s: no final record", k)
			continue
		}
		if s.provisional == 0 {
			continue
		}
		provisional += s.provisional
		withProvisional++
		if s.maxProvis.Cmp(s.finalTotal) > 0 {
			above++
			violate("key %s: a provisional total %s is above the final %s", k, s.maxProvis.FloatString(9), s.finalTotal.FloatString(9))
		}
	}
	fmt.Printf("watch: %d records read: %d final, %d provisional (for %d of %d (customer, hour)); every provisional total <= its final: %v\n",
		records, finals, provisional, withProvisional, len(keys), above == 0)
	if len(violations) > 0 {
		return fmt.Errorf("watch: changelog violations:\n  %s", strings.Join(violations, "\n  "))
	}
	if provisional == 0 {
		return errors.New("watch: no provisional record seen: the early emission was not exercised")
	}
	return nil
}

// ---------------------------------------------------------------- wait-topic

func waitTopic(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait-topic", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "host:port[,host:port]")
	topic := fs.String("topic", "", "topic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, *topic)
		if err == nil && td.Has(*topic) && td[*topic].Err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait-topic: %s does not exist after 30s (%v)", *topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---------------------------------------------------------------- wait-store

// waitStore waits until Redis holds expect final rows of the query: once
// every (customer, hour) has its final row, everything published is
// landed (nothing follows a final record, and a stale record landing later
// would be refused by the guard).
func waitStore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait-store", flag.ContinueOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	db := fs.Int("db", 0, "Redis database")
	query := fs.String("query", "", "the query name (the Redis key namespace)")
	expect := fs.Int("expect", 0, "final rows to wait for")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *query == "" || *expect <= 0 {
		return errors.New("wait-store: need --query and --expect > 0")
	}
	c := redis.NewClient(&redis.Options{Addr: *addr, DB: *db})
	defer c.Close()
	deadline := time.Now().Add(*timeout)
	for {
		finals, rows, err := countFinals(ctx, c, *query)
		if err != nil {
			return err
		}
		if finals >= *expect {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait-store: %d of %d final rows (%d rows) in Redis after %s", finals, *expect, rows, *timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func countFinals(ctx context.Context, c *redis.Client, query string) (finals, rows int, err error) {
	var keys []string
	iter := c.Scan(ctx, 0, query+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, fmt.Errorf("scanning Redis: %w", err)
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGet(ctx, k, "final")
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, 0, fmt.Errorf("reading Redis: %w", err)
		}
	}
	for _, cmd := range cmds {
		if cmd.Val() == "1" {
			finals++
		}
	}
	return finals, len(keys), nil
}

// ---------------------------------------------------------------- check

type cell struct {
	customer string
	hourMS   int64
}

// logTotals is what `ubik usage aggregate --group-by customer --window 1h` prints.
type logTotals struct {
	Sum    string `json:"sum"`
	Count  int64  `json:"count"`
	Groups []struct {
		WindowStart string `json:"window_start"`
		Dims        []struct {
			Name    string          `json:"name"`
			Present bool            `json:"present"`
			Value   json.RawMessage `json:"value"`
		} `json:"dims"`
		Sum   string `json:"sum"`
		Count int64  `json:"count"`
	} `json:"groups"`
}

func check(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	db := fs.Int("db", 0, "Redis database")
	query := fs.String("query", "", "the query name (the Redis key namespace)")
	events := fs.String("events", "", "the generated events.jsonl (copies included)")
	customers := fs.Int("customers", 1000, "customers")
	hours := fs.Int("hours", 6, "hours")
	var logs []string
	fs.Func("log", "a `ubik usage aggregate` output file (repeatable)", func(s string) error { logs = append(logs, s); return nil })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *query == "" || *events == "" || len(logs) == 0 {
		return errors.New("check: need --query, --events and at least one --log")
	}
	want := *customers * *hours

	// Redis: every (customer, hour) the lander wrote, history mode:
	// query ":" ["customer"] ":" window start µs.
	c := redis.NewClient(&redis.Options{Addr: *addr, DB: *db})
	defer c.Close()
	type landed struct {
		total  *big.Rat
		text   string // the total as ubik printed it
		events int64
	}
	store := map[cell]landed{}
	var bad []string
	// The lander's own key layout and reader: no copy of either here.
	rl, err := redislander.New(ctx, redislander.Options{Client: c, Mode: land.History, Query: *query})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer rl.Close()
	iter := c.Scan(ctx, 0, *query+land.QuerySeparator+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		q, rest, _ := strings.Cut(k, land.QuerySeparator)
		i := strings.LastIndex(rest, land.QuerySeparator)
		if q != *query || i < 0 {
			bad = append(bad, fmt.Sprintf("%s: not a history key of %s", k, *query))
			continue
		}
		ws, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: window start %q", k, rest[i+1:]))
			continue
		}
		st, err := rl.Get(ctx, land.Ref{Query: q, Group: []byte(rest[:i]), WindowStart: ws})
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		if !st.Final {
			bad = append(bad, fmt.Sprintf("%s: not final (revision %d)", k, st.Version.Revision))
			continue
		}
		v, total, err := parseRow(st.Value)
		if err != nil {
			return fmt.Errorf("check: %s: %w", k, err)
		}
		ref := land.Ref{Query: *query, Group: append(changelog.AppendString([]byte("["), v.Customer), ']'), WindowStart: st.Version.WindowStart}
		if wantKey := rl.Key(ref); k != wantKey {
			bad = append(bad, fmt.Sprintf("%s: the value says %s", k, wantKey))
		}
		store[cell{v.Customer, st.Version.WindowStart / 1000}] = landed{total, v.Total.String(), v.Events}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("check: scanning Redis: %w", err)
	}
	if len(store) != want {
		bad = append(bad, fmt.Sprintf("Redis holds %d final (customer, hour) totals, want %d", len(store), want))
	}

	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var lt logTotals
		if err := json.Unmarshal(b, &lt); err != nil {
			return fmt.Errorf("check: %s: %w", path, err)
		}
		if len(lt.Groups) != want {
			bad = append(bad, fmt.Sprintf("%s: %d (customer, hour) groups, want %d", path, len(lt.Groups), want))
		}
		equal := 0
		for _, g := range lt.Groups {
			t, err := time.Parse(time.RFC3339Nano, g.WindowStart)
			if err != nil || len(g.Dims) != 1 || g.Dims[0].Name != "customer" || !g.Dims[0].Present {
				return fmt.Errorf("check: %s: unexpected group %+v", path, g)
			}
			var cust string
			if err := json.Unmarshal(g.Dims[0].Value, &cust); err != nil {
				return fmt.Errorf("check: %s: customer %s: %w", path, g.Dims[0].Value, err)
			}
			sum, err := dec(g.Sum)
			if err != nil {
				return fmt.Errorf("check: %s: %w", path, err)
			}
			k := cell{cust, t.UnixMilli()}
			got, ok := store[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s: %s %s: in the log (%s), not in Redis", path, cust, g.WindowStart, g.Sum))
			case got.total.Cmp(sum) != 0:
				bad = append(bad, fmt.Sprintf("%s: %s %s: Redis %s, usage log %s", path, cust, g.WindowStart, got.total.FloatString(9), g.Sum))
			case got.text != g.Sum:
				// A sum of DECIMAL(18,9) is DECIMAL(38,9); ubik prints its
				// nine fractional digits and so does the usage log.
				bad = append(bad, fmt.Sprintf("%s: %s %s: Redis prints %s, usage log %s", path, cust, g.WindowStart, got.text, g.Sum))
			case got.events != g.Count:
				bad = append(bad, fmt.Sprintf("%s: %s %s: Redis counts %d events, usage log %d", path, cust, g.WindowStart, got.events, g.Count))
			default:
				equal++
			}
		}
		fmt.Printf("check: %s: %d of %d (customer, hour) totals equal Redis exactly (log total %s over %d events)\n",
			filepath.Base(path), equal, want, lt.Sum, lt.Count)
	}

	// What the dedup key is for: the (customer, hour) whose sum over every
	// copy differs from the billed total.
	naive, err := naiveTotals(*events)
	if err != nil {
		return err
	}
	over := 0
	for k, n := range naive {
		if l, ok := store[k]; ok && l.total.Cmp(n) != 0 {
			over++
		}
	}
	fmt.Printf("check: %d (customer, hour) received a retried copy; without the dedup key, a copy arriving while its hour is open is billed twice\n", over)
	if over == 0 {
		bad = append(bad, "no (customer, hour) has a retried copy: the data does not exercise the dedup key")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 15 {
			bad = append(bad[:15], fmt.Sprintf("... %d more", len(bad)-15))
		}
		return fmt.Errorf("check failed:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// naiveTotals sums every line of events.jsonl, copies included.
func naiveTotals(path string) (map[cell]*big.Rat, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[cell]*big.Rat{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Customer string      `json:"customer"`
			Qty      json.Number `json:"qty"`
			TS       string      `json:"ts"`
		}
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		t, err := time.Parse(time.RFC3339Nano, e.TS)
		if err != nil {
			return nil, err
		}
		q, err := dec(e.Qty.String())
		if err != nil {
			return nil, err
		}
		k := cell{e.Customer, t.Truncate(time.Hour).UnixMilli()}
		if out[k] == nil {
			out[k] = new(big.Rat)
		}
		out[k].Add(out[k], q)
	}
	return out, sc.Err()
}

// ---------------------------------------------------------------- cleanup

// cleanup removes what a run created; every step runs, and every failure
// is reported.
func cleanup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	addr := fs.String("redis", "", "Redis address")
	db := fs.Int("db", 0, "Redis database")
	query := fs.String("query", "", "delete the Redis keys of this query")
	pg := fs.String("pg", "", "PostgreSQL DSN")
	ch := fs.String("ch", "", "ClickHouse HTTP URL")
	table := fs.String("table", "", "usage log table to drop (both backends)")
	brokers := fs.String("brokers", "", "Kafka brokers")
	topics := fs.String("topics", "", "comma-separated topics to delete")
	groups := fs.String("groups", "", "comma-separated consumer groups to delete")
	prefix := fs.String("prefix", "", "also delete every topic and consumer group whose name starts with this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	if *addr != "" && *query != "" {
		c := redis.NewClient(&redis.Options{Addr: *addr, DB: *db})
		iter := c.Scan(ctx, 0, *query+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		errs = append(errs, iter.Err())
		for i := 0; i < len(keys); i += 500 {
			errs = append(errs, c.Del(ctx, keys[i:min(i+500, len(keys))]...).Err())
		}
		c.Close()
	}
	if *table != "" && *pg != "" {
		conn, err := pgx.Connect(ctx, *pg)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{*table}.Sanitize())
			conn.Close(ctx)
		}
		errs = append(errs, err)
	}
	if *table != "" && *ch != "" {
		errs = append(errs, dropCH(ctx, *ch, *table))
	}
	if *brokers != "" && (*topics != "" || *groups != "" || *prefix != "") {
		errs = append(errs, deleteKafka(ctx, *brokers, split(*topics), split(*groups), *prefix))
	}
	return errors.Join(errs...)
}

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// dropCH drops the usage log's table through the library's ClickHouse
// client.
func dropCH(ctx context.Context, base, table string) error {
	if !chhttp.ValidIdent(table) {
		return fmt.Errorf("cleanup: table %q is not a plain identifier", table)
	}
	c, err := chhttp.New(chhttp.Options{URL: base})
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, "DROP TABLE IF EXISTS "+chhttp.QuoteIdent(table), nil)
	return err
}

// deleteKafka deletes topics and groups, and with a prefix every topic
// and group whose name starts with it (the internal topics a query names
// after itself).
func deleteKafka(ctx context.Context, brokers string, topics, groups []string, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var errs []error
	if prefix != "" {
		td, err := adm.ListTopics(ctx)
		errs = append(errs, err)
		for _, t := range td.Names() {
			if strings.HasPrefix(t, prefix) {
				topics = append(topics, t)
			}
		}
		gl, err := adm.ListGroups(ctx)
		errs = append(errs, err)
		for _, g := range gl.Groups() {
			if strings.HasPrefix(g, prefix) {
				groups = append(groups, g)
			}
		}
	}
	if len(groups) > 0 {
		resp, err := adm.DeleteGroups(ctx, groups...)
		errs = append(errs, err)
		for g, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
				errs = append(errs, fmt.Errorf("deleting group %s: %w", g, r.Err))
			}
		}
	}
	if len(topics) > 0 {
		resp, err := adm.DeleteTopics(ctx, topics...)
		errs = append(errs, err)
		for t, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("deleting topic %s: %w", t, r.Err))
			}
		}
	}
	return errors.Join(errs...)
}

// ---------------------------------------------------------------- charges

const tsLayout = "2006-01-02T15:04:05.000Z"

// readPrices reads prices.jsonl: per plan, its versions in valid_from order.
func readPrices(path string) (map[string][]pricedAt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]pricedAt{}
	for i, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var v struct {
			Plan      string      `json:"plan"`
			Price     json.Number `json:"price"`
			ValidFrom string      `json:"valid_from"`
		}
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		t, err := time.Parse(time.RFC3339Nano, v.ValidFrom)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: valid_from: %w", path, i+1, err)
		}
		p, err := dec(v.Price.String())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: price: %w", path, i+1, err)
		}
		out[v.Plan] = append(out[v.Plan], pricedAt{t.UnixMilli(), p})
	}
	for _, vs := range out {
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].from < vs[j].from })
	}
	return out, nil
}

type pricedAt struct {
	from  int64 // epoch ms
	price *big.Rat
}

// priceAt is the plan's version valid at ms: the latest at or before it.
func priceAt(vs []pricedAt, ms int64) (*big.Rat, bool) {
	i := sort.Search(len(vs), func(i int) bool { return vs[i].from > ms }) - 1
	if i < 0 {
		return nil, false
	}
	return vs[i].price, true
}

// intervals prints the [from, to) pieces of [--from, --to) cut at every
// hour boundary and every price change: within a piece no plan's price
// changes, so a plan's charge over it is its usage times one price.
func intervals(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("intervals", flag.ContinueOnError)
	prices := fs.String("prices", "", "prices.jsonl")
	from := fs.String("from", "", "start (RFC 3339)")
	to := fs.String("to", "", "end (RFC 3339)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, err1 := time.Parse(time.RFC3339Nano, *from)
	b, err2 := time.Parse(time.RFC3339Nano, *to)
	if err := errors.Join(err1, err2); err != nil || *prices == "" || !a.Before(b) {
		return fmt.Errorf("intervals: need --prices and --from < --to (RFC 3339): %v", err)
	}
	vs, err := readPrices(*prices)
	if err != nil {
		return err
	}
	cuts := map[int64]bool{a.UnixMilli(): true, b.UnixMilli(): true}
	for t := a.Truncate(time.Hour).Add(time.Hour); t.Before(b); t = t.Add(time.Hour) {
		cuts[t.UnixMilli()] = true
	}
	for _, pv := range vs {
		for _, v := range pv {
			if v.from > a.UnixMilli() && v.from < b.UnixMilli() {
				cuts[v.from] = true
			}
		}
	}
	ms := make([]int64, 0, len(cuts))
	for t := range cuts {
		ms = append(ms, t)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	for i := 1; i < len(ms); i++ {
		fmt.Printf("%s %s\n", time.UnixMilli(ms[i-1]).UTC().Format(tsLayout), time.UnixMilli(ms[i]).UTC().Format(tsLayout))
	}
	return nil
}

// charge is the value of an hourly_charge record.
type charge struct {
	Customer string      `json:"customer"`
	Hour     string      `json:"hour"`
	Charge   json.Number `json:"charge"`
	Events   int64       `json:"events"`
}

// checkCharge compares ubik's hourly charges (the final record of every
// (customer, hour) in `ubik run --format jsonl` output) with the batch
// computation from the usage log: for every piece of an hour in which no
// price changes, the log's usage per (customer, plan) (`ubik usage
// aggregate --group-by customer --group-by plan`) times the plan's price
// valid over the piece, summed per (customer, hour). Exact: decimals as
// rationals, and ubik's text must be the exact sum printed at the result's
// scale. With --redis and --query it also checks the charges landed in
// Redis from the run over Kafka: each the file run's value, byte for byte,
// and so each equal to the batch computation too.
func checkCharge(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("check-charge", flag.ContinueOnError)
	charges := fs.String("charges", "", "ubik run --format jsonl output of hourly_charge")
	addr := fs.String("redis", "", "Redis address: also check the charges `ubik land --mode history` landed there")
	db := fs.Int("db", 0, "Redis database")
	query := fs.String("query", "", "the query name of the landed charges (the Redis key namespace)")
	pricesPath := fs.String("prices", "", "prices.jsonl")
	customers := fs.Int("customers", 1000, "customers")
	hours := fs.Int("hours", 6, "hours")
	scale := fs.Int("scale", 15, "fractional digits of the charge (sum of DECIMAL(18,9) * DECIMAL(12,6))")
	var lists []string
	fs.Func("logs", "a file of 'FROM TO AGGREGATE.json' lines, one backend's aggregates per interval (repeatable)", func(s string) error { lists = append(lists, s); return nil })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *charges == "" || *pricesPath == "" || len(lists) == 0 {
		return errors.New("check-charge: need --charges, --prices and at least one --logs")
	}
	if (*addr == "") != (*query == "") {
		return errors.New("check-charge: --redis and --query go together")
	}
	want := *customers * *hours
	prices, err := readPrices(*pricesPath)
	if err != nil {
		return err
	}

	var bad []string
	got, err := chargesFromFile(*charges, &bad)
	if err != nil {
		return err
	}
	if len(got) != want {
		bad = append(bad, fmt.Sprintf("ubik emitted %d final (customer, hour) charges, want %d", len(got), want))
	}
	sources := []map[cell]billed{got}
	names := []string{filepath.Base(*charges)}
	if *addr != "" {
		landed, err := chargesFromRedis(ctx, *addr, *db, *query, &bad)
		if err != nil {
			return err
		}
		if len(landed) != want {
			bad = append(bad, fmt.Sprintf("Redis holds %d final (customer, hour) charges of %s, want %d", len(landed), *query, want))
		}
		// The two runs (the file run and the one over Kafka that was
		// landed) read the same events and price versions: every final
		// value is the same bytes.
		same := 0
		for k, g := range got {
			l, ok := landed[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s %d: in %s, not in Redis", k.customer, k.hourMS, names[0]))
			case !bytes.Equal(l.value, g.value):
				bad = append(bad, fmt.Sprintf("%s %d: Redis %s, %s %s", k.customer, k.hourMS, l.value, names[0], g.value))
			default:
				same++
			}
		}
		fmt.Printf("check-charge: %d of %d final charges landed in Redis from Kafka are byte for byte the file run's\n", same, want)
		sources = append(sources, landed)
		names = append(names, "Redis")
	}

	spanning := 0 // (customer, hour) whose plan changed price inside the hour
	for _, list := range lists {
		lb, err := os.ReadFile(list)
		if err != nil {
			return err
		}
		expect := map[cell]*big.Rat{}
		counts := map[cell]int64{}
		changed := map[cell]bool{}
		opening := map[cell]*big.Rat{} // the hour's usage times the price at the hour's start
		pieces := 0
		for _, line := range strings.Split(strings.TrimSpace(string(lb)), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				return fmt.Errorf("check-charge: %s: line %q: want FROM TO FILE", list, line)
			}
			from, err1 := time.Parse(time.RFC3339Nano, f[0])
			to, err2 := time.Parse(time.RFC3339Nano, f[1])
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("check-charge: %s: %w", list, err)
			}
			hour := from.Truncate(time.Hour)
			if to.After(hour.Add(time.Hour)) {
				return fmt.Errorf("check-charge: %s: [%s, %s) crosses an hour", list, f[0], f[1])
			}
			ab, err := os.ReadFile(f[2])
			if err != nil {
				return err
			}
			var lt logTotals
			if err := json.Unmarshal(ab, &lt); err != nil {
				return fmt.Errorf("check-charge: %s: %w", f[2], err)
			}
			pieces++
			for _, g := range lt.Groups {
				dims := map[string]string{}
				for _, dm := range g.Dims {
					var s string
					if err := json.Unmarshal(dm.Value, &s); err != nil || !dm.Present {
						return fmt.Errorf("check-charge: %s: dimension %s = %s", f[2], dm.Name, dm.Value)
					}
					dims[dm.Name] = s
				}
				cust, plan := dims["customer"], dims["plan"]
				vs := prices[plan]
				price, ok := priceAt(vs, from.UnixMilli())
				if !ok || cust == "" {
					return fmt.Errorf("check-charge: %s: group %v has no price at %s", f[2], dims, f[0])
				}
				for _, v := range vs {
					if v.from > from.UnixMilli() && v.from < to.UnixMilli() {
						return fmt.Errorf("check-charge: %s: plan %s changes price inside [%s, %s)", list, plan, f[0], f[1])
					}
				}
				sum, err := dec(g.Sum)
				if err != nil {
					return fmt.Errorf("check-charge: %s: %w", f[2], err)
				}
				k := cell{cust, hour.UnixMilli()}
				if expect[k] == nil {
					expect[k], opening[k] = new(big.Rat), new(big.Rat)
				}
				expect[k].Add(expect[k], new(big.Rat).Mul(sum, price))
				p0, _ := priceAt(vs, hour.UnixMilli())
				opening[k].Add(opening[k], new(big.Rat).Mul(sum, p0))
				if p0.Cmp(price) != 0 {
					changed[k] = true
				}
				counts[k] += g.Count
			}
		}
		if len(expect) != want {
			bad = append(bad, fmt.Sprintf("%s: %d (customer, hour) in the log, want %d", list, len(expect), want))
		}
		equal := make([]int, len(sources))
		for si, got := range sources {
			for k, e := range expect {
				g, ok := got[k]
				hour := time.UnixMilli(k.hourMS).UTC().Format("2006-01-02 15:04")
				switch {
				case !ok:
					bad = append(bad, fmt.Sprintf("%s: %s %s: in the log, no final charge in %s", list, k.customer, hour, names[si]))
				case g.charge.Cmp(e) != 0:
					bad = append(bad, fmt.Sprintf("%s: %s %s: %s %s, batch %s", list, k.customer, hour, names[si], g.text, e.FloatString(*scale)))
				case g.text != e.FloatString(*scale):
					bad = append(bad, fmt.Sprintf("%s: %s %s: %s prints %s, batch %s", list, k.customer, hour, names[si], g.text, e.FloatString(*scale)))
				case g.events != counts[k]:
					bad = append(bad, fmt.Sprintf("%s: %s %s: %s counts %d events, the log %d", list, k.customer, hour, names[si], g.events, counts[k]))
				default:
					equal[si]++
				}
			}
		}
		n := 0
		for k := range changed {
			if expect[k].Cmp(opening[k]) != 0 {
				n++
			}
		}
		spanning = n
		for si := range sources {
			fmt.Printf("check-charge: %s: %d of %d (customer, hour) charges in %s equal the batch computation exactly (%d price pieces); %d of them span a price change\n",
				filepath.Base(list), equal[si], want, names[si], pieces, n)
		}
	}
	if spanning == 0 {
		bad = append(bad, "no (customer, hour) spans a price change: the data does not exercise the temporal join")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 15 {
			bad = append(bad[:15], fmt.Sprintf("... %d more", len(bad)-15))
		}
		return fmt.Errorf("check-charge failed:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// billed is one final (customer, hour) charge: its value's bytes as ubik
// wrote them, and the charge and count they hold.
type billed struct {
	value  []byte
	charge *big.Rat
	text   string
	events int64
}

// parseCharge reads a charge row's value.
func parseCharge(value []byte) (cell, billed, error) {
	var v charge
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return cell{}, billed{}, err
	}
	h, err := time.Parse("2006-01-02 15:04:05", v.Hour)
	if err != nil {
		return cell{}, billed{}, fmt.Errorf("hour: %w", err)
	}
	c, err := dec(v.Charge.String())
	if err != nil {
		return cell{}, billed{}, fmt.Errorf("charge: %w", err)
	}
	return cell{v.Customer, h.UnixMilli()}, billed{value, c, v.Charge.String(), v.Events}, nil
}

// chargesFromFile reads the final charges of `ubik run --format jsonl`
// output; a (customer, hour) with two final records goes to bad.
func chargesFromFile(path string, bad *[]string) (map[cell]billed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	got := map[cell]billed{}
	for i, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var rec struct {
			Value json.RawMessage `json:"value"`
			Final bool            `json:"final"`
		}
		if err := json.Unmarshal(l, &rec); err != nil {
			return nil, fmt.Errorf("check-charge: %s:%d: %w", path, i+1, err)
		}
		if !rec.Final {
			continue
		}
		k, v, err := parseCharge(rec.Value)
		if err != nil {
			return nil, fmt.Errorf("check-charge: %s:%d: %w", path, i+1, err)
		}
		if _, dup := got[k]; dup {
			*bad = append(*bad, fmt.Sprintf("%s: %s %d: two final records", path, k.customer, k.hourMS))
		}
		got[k] = v
	}
	return got, nil
}

// chargesFromRedis reads the final charges `ubik land --mode history`
// landed for query, through the lander's own key layout and reader; a
// row that is not final, or under a key its value does not give, goes to
// bad.
func chargesFromRedis(ctx context.Context, addr string, db int, query string, bad *[]string) (map[cell]billed, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	defer c.Close()
	rl, err := redislander.New(ctx, redislander.Options{Client: c, Mode: land.History, Query: query})
	if err != nil {
		return nil, fmt.Errorf("check-charge: %w", err)
	}
	defer rl.Close()
	got := map[cell]billed{}
	iter := c.Scan(ctx, 0, query+land.QuerySeparator+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		q, rest, _ := strings.Cut(k, land.QuerySeparator)
		i := strings.LastIndex(rest, land.QuerySeparator)
		if q != query || i < 0 {
			*bad = append(*bad, fmt.Sprintf("%s: not a history key of %s", k, query))
			continue
		}
		ws, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if err != nil {
			*bad = append(*bad, fmt.Sprintf("%s: window start %q", k, rest[i+1:]))
			continue
		}
		st, err := rl.Get(ctx, land.Ref{Query: q, Group: []byte(rest[:i]), WindowStart: ws})
		if err != nil {
			return nil, fmt.Errorf("check-charge: %w", err)
		}
		if !st.Final {
			*bad = append(*bad, fmt.Sprintf("%s: not final (revision %d)", k, st.Version.Revision))
			continue
		}
		cl, v, err := parseCharge(st.Value)
		if err != nil {
			return nil, fmt.Errorf("check-charge: %s: %w", k, err)
		}
		ref := land.Ref{Query: query, Group: append(changelog.AppendString([]byte("["), cl.customer), ']'), WindowStart: st.Version.WindowStart}
		if wantKey := rl.Key(ref); k != wantKey {
			*bad = append(*bad, fmt.Sprintf("%s: the value says %s", k, wantKey))
		}
		if cl.hourMS != st.Version.WindowStart/1000 {
			*bad = append(*bad, fmt.Sprintf("%s: the value's hour is %d ms, the window start %d µs", k, cl.hourMS, st.Version.WindowStart))
		}
		got[cl] = v
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("check-charge: scanning Redis: %w", err)
	}
	return got, nil
}
