package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Hand-built plans: the SQL binder lives in another package, and these
// tests exercise the Kafka path over the executor directly. The plans are
// what plan.Compile produces for:
//
//	CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
//	  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND);
//	tumble:     SELECT merchant, TUMBLE_START(...) AS window_start, count(*) AS orders, sum(amount) AS total
//	            FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) [EMIT EARLY EVERY ...]
//	continuous: SELECT merchant, count(*) AS orders, sum(amount) AS total FROM events GROUP BY merchant

type col struct {
	i int
	t types.Type
}

func (c col) Type() types.Type                            { return c.t }
func (c col) Eval(row []types.Value) (types.Value, error) { return row[c.i], nil }
func (c col) String() string                              { return fmt.Sprintf("$%d", c.i) }

const delayUS = 5_000_000

func testSource() *plan.Source {
	return &plan.Source{
		Name:           "events",
		Columns:        []plan.Column{{Name: "merchant", Type: types.Varchar}, {Name: "amount", Type: types.BigInt}, {Name: "event_time", Type: types.Timestamp}},
		TimeCol:        2,
		WatermarkDelay: delayUS,
	}
}

func aggs() []plan.AggCall {
	return []plan.AggCall{
		{Func: "count_star", Type: types.BigInt, Name: "count(*)"},
		{Func: "sum", Args: []plan.Expr{col{1, types.BigInt}}, Type: types.HugeInt, Name: "sum(amount)"},
	}
}

// tumbleQuery: per merchant one-minute totals; early emission when every > 0.
func tumbleQuery(name string, every time.Duration) *plan.Query {
	q := &plan.Query{
		Name:   name,
		Source: testSource(),
		Window: &plan.Window{Kind: plan.Tumble, TimeCol: 2, Size: 60_000_000, Slide: 60_000_000},
		Keys:   []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: col{0, types.Varchar}, Name: "merchant"}, {Kind: plan.KeyWindowStart, Name: "window"}},
		Aggs:   aggs(),
		Select: []plan.OutputColumn{
			{Name: "merchant", Expr: col{0, types.Varchar}},
			{Name: "window_start", Expr: col{1, types.Timestamp}},
			{Name: "orders", Expr: col{2, types.BigInt}},
			{Name: "total", Expr: col{3, types.HugeInt}},
		},
	}
	if every > 0 {
		q.Emit = plan.Emit{Mode: plan.EmitEarly, EarlyEvery: every.Microseconds()}
	}
	return q
}

func continuousQuery(name string) *plan.Query {
	return &plan.Query{
		Name:   name,
		Source: testSource(),
		Keys:   []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: col{0, types.Varchar}, Name: "merchant"}},
		Aggs:   aggs(),
		Select: []plan.OutputColumn{
			{Name: "merchant", Expr: col{0, types.Varchar}},
			{Name: "orders", Expr: col{1, types.BigInt}},
			{Name: "total", Expr: col{2, types.HugeInt}},
		},
		Emit: plan.Emit{Mode: plan.EmitChanges},
	}
}

// event is one generated input event.
type event struct {
	merchant string
	amount   int64
	ts       int64 // µs
}

func (e event) json() []byte {
	ts := changelog.AppendCell(nil, types.TS(e.ts)) // a JSON string
	return fmt.Appendf(nil, `{"merchant":%q,"amount":%d,"event_time":%s}`, e.merchant, e.amount, ts)
}

var baseTS = int64(1784368800) * 1_000_000 // 2026-07-18 10:00:00 UTC

// genEvents returns n events, 1 ms apart with up to 2 s of disorder (less
// than the 5 s watermark delay, so none is late), over 40 skewed merchants.
func genEvents(seed uint64, n int) []event {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]event, n)
	for i := range out {
		m := r.IntN(40)
		if r.IntN(3) == 0 {
			m = r.IntN(4) // skew
		}
		out[i] = event{merchant: fmt.Sprintf("m%02d", m), amount: int64(r.IntN(1000) + 1), ts: baseTS + int64(i)*1000 - r.Int64N(2_000_000)}
	}
	return out
}

// flushEvents closes every window of the real events: one far-future event
// per partition (merchant "~flush", excluded from the oracle).
const flushMerchant = "~flush"

func flushEvent(after int64, part int) event {
	return event{merchant: fmt.Sprintf("%s%d", flushMerchant, part), amount: 0, ts: after + 10*60_000_000}
}

type agg struct{ orders, total int64 }

// tumbleOracle computes, in Go directly from the events, the final value of
// every (merchant, minute) keyed by the contract key bytes.
func tumbleOracle(evs []event) map[string]agg {
	out := map[string]agg{}
	for _, e := range evs {
		if strings.HasPrefix(e.merchant, flushMerchant) {
			continue
		}
		ws := types.FloorDiv(e.ts, 60_000_000) * 60_000_000
		k := string(changelog.AppendKey(nil, []types.Value{types.Str(e.merchant), types.TS(ws)}))
		a := out[k]
		a.orders++
		a.total += e.amount
		out[k] = a
	}
	return out
}

func continuousOracle(evs []event) map[string]agg {
	out := map[string]agg{}
	for _, e := range evs {
		k := string(changelog.AppendKey(nil, []types.Value{types.Str(e.merchant)}))
		a := out[k]
		a.orders++
		a.total += e.amount
		out[k] = a
	}
	return out
}

// cluster starts an in-process kfake broker (a real Kafka-protocol server
// on a TCP port) for one test.
func cluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	base := []kfake.Opt{kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "3600000"})}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func mkTopic(t testing.TB, addrs []string, topic string, parts int, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(client(t, addrs))
	resp, err := adm.CreateTopic(context.Background(), int32(parts), -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produceEvents writes evs round-robin over the topic's partitions, then
// one flush event per partition.
func produceEvents(t testing.TB, addrs []string, topic string, parts int, evs []event, flush bool) {
	t.Helper()
	var maxTS int64
	values := make([][]byte, 0, len(evs)+parts)
	for _, e := range evs {
		maxTS = max(maxTS, e.ts)
		values = append(values, e.json())
	}
	var tail [][]byte
	if flush {
		for p := 0; p < parts; p++ {
			tail = append(tail, flushEvent(maxTS, p).json())
		}
	}
	produceValues(t, addrs, topic, parts, values, tail)
}

// produceValues writes values round-robin over the topic's partitions,
// then tail[p] to partition p.
func produceValues(t testing.TB, addrs []string, topic string, parts int, values, tail [][]byte) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	prom := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			perr = err
			mu.Unlock()
		}
		wg.Done()
	}
	for i, v := range values {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: v}, prom)
	}
	for p, v := range tail {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(p), Value: v}, prom)
	}
	wg.Wait()
	if perr != nil {
		t.Fatalf("producing input: %v", perr)
	}
}

// outRec is one sink record as a read_committed consumer sees it.
type outRec struct {
	key, value string
	part       int32
	offset     int64
	meta       changelog.Meta
	orders     int64
	total      int64
}

// follower reads the sink topic with read_committed from the start and
// checks the changelog invariants on every record as it arrives: no (key,
// revision) twice, revisions strictly increasing per key, nothing after a
// final, a key always on the same partition, and (for a continuous count)
// orders never decreasing.
type follower struct {
	t          testing.TB
	cl         *kgo.Client
	mu         sync.Mutex
	latest     map[string]outRec
	finals     map[string]outRec
	n          int
	violations []string
	monotone   bool
}

func follow(t testing.TB, addrs []string, topic string, monotone bool) *follower {
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	return &follower{t: t, cl: cl, latest: map[string]outRec{}, finals: map[string]outRec{}, monotone: monotone}
}

func (f *follower) violate(format string, args ...any) {
	if len(f.violations) < 20 {
		f.violations = append(f.violations, fmt.Sprintf(format, args...))
	}
}

// poll consumes what is available for up to d.
func (f *follower) poll(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := f.cl.PollFetches(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		f.n++
		rec := decodeOut(f.t, r)
		prev, ok := f.latest[rec.key]
		switch {
		case r.Value == nil:
			f.violate("null value at partition %d offset %d", r.Partition, r.Offset)
		case ok && prev.part != rec.part:
			f.violate("key %s on partitions %d and %d", rec.key, prev.part, rec.part)
		case ok && rec.meta.Revision == prev.meta.Revision:
			f.violate("duplicate: key %s revision %d at offsets %d and %d", rec.key, rec.meta.Revision, prev.offset, rec.offset)
		case ok && rec.meta.Revision < prev.meta.Revision:
			f.violate("revision regression: key %s revision %d after %d (offset %d)", rec.key, rec.meta.Revision, prev.meta.Revision, rec.offset)
		case ok && prev.meta.Final:
			f.violate("record after final: key %s revision %d", rec.key, rec.meta.Revision)
		case ok && f.monotone && rec.orders < prev.orders:
			f.violate("count decreased: key %s %d -> %d", rec.key, prev.orders, rec.orders)
		}
		f.latest[rec.key] = rec
		if rec.meta.Final {
			f.finals[rec.key] = rec
		}
	})
}

func decodeOut(t testing.TB, r *kgo.Record) outRec {
	kr, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
	if err != nil {
		t.Errorf("sink record at partition %d offset %d: %v", r.Partition, r.Offset, err)
	}
	var v struct {
		Orders int64 `json:"orders"`
		Total  int64 `json:"total"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Errorf("sink value %q: %v", r.Value, err)
	}
	return outRec{key: string(r.Key), value: string(r.Value), part: r.Partition, offset: r.Offset, meta: kr.Meta, orders: v.Orders, total: v.Total}
}

// waitFinals follows until every oracle key has a final record or the
// timeout passes, then compares.
func (f *follower) waitFinals(t testing.TB, want map[string]agg, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && !t.Failed() {
		f.poll(500 * time.Millisecond)
		if f.countFinals(want) == len(want) {
			break
		}
	}
	f.compare(t, want, true)
}

func (f *follower) countFinals(want map[string]agg) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range want {
		if _, ok := f.finals[k]; ok {
			n++
		}
	}
	return n
}

// waitLatest follows until the latest value of every oracle key equals it
// (a continuous view has no finals).
func (f *follower) waitLatest(t testing.TB, want map[string]agg, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && !t.Failed() {
		f.poll(500 * time.Millisecond)
		if f.matches(want) {
			break
		}
	}
	f.compare(t, want, false)
}

func (f *follower) matches(want map[string]agg) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, a := range want {
		r, ok := f.latest[k]
		if !ok || r.orders != a.orders || r.total != a.total {
			return false
		}
	}
	return true
}

func (f *follower) compare(t testing.TB, want map[string]agg, finals bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Errorf("read_committed consumer saw: %s", v)
	}
	got := f.latest
	if finals {
		got = f.finals
	}
	var bad []string
	for k, a := range want {
		r, ok := got[k]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: missing (want %+v)", k, a))
		} else if r.orders != a.orders || r.total != a.total {
			bad = append(bad, fmt.Sprintf("%s: got orders=%d total=%d, want %+v", k, r.orders, r.total, a))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !strings.Contains(k, flushMerchant) {
			bad = append(bad, fmt.Sprintf("%s: unexpected key", k))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... %d more", len(bad)-10))
		}
		t.Errorf("%d of %d keys differ from the oracle (%d records read):\n%s", len(bad), len(want), f.n, strings.Join(bad, "\n"))
	}
}

// inProcess runs q over evs with one in-process operator (the file path's
// engine) and returns the emitted records.
func inProcess(t testing.TB, q *plan.Query, evs []event) []changelog.Record {
	t.Helper()
	var out []changelog.Record
	d, err := drive.New(q, drive.Config{Emit: func(r *changelog.Record) error { out = append(out, r.Clone()); return nil },
		Decoder: drive.NewDecoder(q.Source)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := d.Push(e.json()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runToEnd runs o until caught up (it sets UntilCaughtUp) within limit
// and returns its stats for the caller to check, CaughtUp among them; a
// New or Run error fails the test.
func runToEnd(t testing.TB, o Options, limit time.Duration) Stats {
	t.Helper()
	o.UntilCaughtUp = true
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := pl.Run(ctx); err != nil {
		t.Fatalf("the run until caught up: %v", err)
	}
	return pl.Stats()
}

// runCaughtUp runs o to its end as runToEnd does, logging to the test,
// and fails the test unless it caught up.
func runCaughtUp(t *testing.T, o Options) Stats {
	t.Helper()
	o.Logger = testLogger(t)
	st := runToEnd(t, o, 2*time.Minute)
	if !st.CaughtUp {
		t.Fatalf("not caught up: %+v", st)
	}
	return st
}

// runPipeline runs a pipeline in a goroutine until the returned stop is
// called; a Run error fails the test.
func runPipeline(t testing.TB, o Options) (pl *Pipeline, stop func()) {
	t.Helper()
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := pl.Run(ctx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("pipeline %s/%s stopped: %v", o.Query.Name, o.InstanceID, err)
			err = nil
		}
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("pipeline %s/%s: %v", o.Query.Name, o.InstanceID, err)
				}
			case <-time.After(60 * time.Second):
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("pipeline %s/%s did not stop; goroutines:\n%s", o.Query.Name, o.InstanceID, buf)
			}
		})
	}
	t.Cleanup(stop)
	return pl, stop
}

func endpoint(addrs []string, topic string) Endpoint {
	return Endpoint{Config: Config{Brokers: addrs}, Topic: topic, IdleTimeout: time.Minute}
}

// testLogger logs the pipeline's diagnostics through t.Log when -v is set.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// killChild kills a child pipeline with SIGKILL. The child runs until it
// is killed: one that ended by itself failed.
func killChild(t testing.TB, p *crashtest.Proc) {
	t.Helper()
	if killed, err := p.Kill(); !killed {
		t.Fatalf("the child ended before its kill: %v\n%s", err, p.Stderr())
	}
}

// lastQuery compiles script and returns its last query, the one a test
// runs (the views before it are what it reads).
func lastQuery(t testing.TB, script string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(script, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}
