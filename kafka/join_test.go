package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// The temporal join over Kafka: a stream of usage events and a versioned
// table of prices, each over several partitions, must give the finals of
// the in-process run (drive.Driver with both inputs) byte for byte,
// whatever the partition counts, and after kill -9 at random points.
// The join key is a DOUBLE with the edge cells: -0.0 and 0.0 (one key),
// NULL (never matches; LEFT JOIN keeps the event), and customers with
// escapes and non-ASCII text.

const kjoinSQL = `
CREATE SOURCE usage (customer VARCHAR, tier DOUBLE, qty DECIMAL(10,2), note VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE TABLE prices (tier DOUBLE, price DECIMAL(12,6), label VARCHAR, valid_from TIMESTAMP,
  PRIMARY KEY (tier) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '3' SECOND);
CREATE VIEW charge AS SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '10' SECOND) AS w, sum(u.qty * p.price) AS charge,
  count(*) AS events, count(p.price) AS priced, max(p.label) AS label
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '10' SECOND);`

func kjoinQuery(t testing.TB) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(kjoinSQL, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

var (
	kjoinCustomers = []string{`a`, `b\"q`, `c\\d`, `é😀`, ``, `t\tab`, `z`}
	kjoinTiers     = []string{`-0.0`, `0.0`, `1.5`, `2.5`, `null`, `7`} // 7 has no version
)

// kjoinData returns the events (100 ms apart with up to 1.5 s of
// disorder, under the stream's 2 s delay) and the price versions (each
// tier's every ~2 s, in time order: none late in any partition).
func kjoinData(seed uint64, n int) (events, versions [][]byte) {
	r := rand.New(rand.NewPCG(seed, seed^0x51))
	ts := func(us int64) string { return string(changelog.AppendCell(nil, types.TS(us))) }
	span := int64(n) * 100_000
	for at := int64(-5_000_000); at < span+10_000_000; at += 700_000 {
		tier := kjoinTiers[r.IntN(4)] // never null: a NULL primary key is a bad row
		versions = append(versions, fmt.Appendf(nil, `{"tier":%s,"price":"%d.%06d","label":"L\"%d\\é","valid_from":%s}`,
			tier, r.IntN(5), r.IntN(1_000_000), r.IntN(9), ts(baseTS+at)))
	}
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000)
		events = append(events, fmt.Appendf(nil, `{"customer":"%s","tier":%s,"qty":"%d.%02d","note":"n%d","ts":%s}`,
			kjoinCustomers[r.IntN(len(kjoinCustomers))], kjoinTiers[r.IntN(len(kjoinTiers))], r.IntN(50), r.IntN(100), i, ts(baseTS+at)))
	}
	return events, versions
}

// kjoinInProcess is the in-process answer: the finals (key -> value) of
// one driver fed the whole table, then the events, then closed.
func kjoinInProcess(t testing.TB, q *plan.Query, events, versions [][]byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	d, err := drive.New(q, drive.Config{Emit: func(r *changelog.Record) error {
		if r.Meta.Final {
			if _, dup := out[string(r.Key)]; dup {
				t.Errorf("in process: two finals for %s", r.Key)
			}
			out[string(r.Key)] = string(r.Value)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if err := d.PushInput(1, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := d.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if st := d.JoinStats(); st.LateEvents != 0 || st.LateTableRows != 0 || st.Joined == 0 || st.Unmatched == 0 {
		t.Fatalf("in process: the data must join some events, leave some unmatched and have nothing late: %+v", st)
	}
	return out
}

func compareFinals(t testing.TB, got, want map[string]string) {
	t.Helper()
	var bad []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: missing (want %s)", k, v))
		} else if g != v {
			bad = append(bad, fmt.Sprintf("%s: got %s, want %s", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected %s", k, v))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... %d more", len(bad)-10))
		}
		t.Errorf("%d of %d finals differ from the in-process run:\n%s", len(bad), len(want), strings.Join(bad, "\n"))
	}
}

func kjoinOptions(q *plan.Query, addrs []string) Options {
	tbl := endpoint(addrs, "prices")
	return Options{Query: q, Source: endpoint(addrs, "usage"), Table: tbl, Sink: endpoint(addrs, "charges"), InstanceID: "kjoin-1"}
}

// TestRunKafkaTemporalJoin: finals equal to the in-process run's at
// several source, table and repartition partition counts.
func TestRunKafkaTemporalJoin(t *testing.T) {
	t.Parallel()
	q := kjoinQuery(t)
	events, versions := kjoinData(7, 1500)
	want := kjoinInProcess(t, q, events, versions)
	for _, c := range []struct{ src, tbl, rep int }{{1, 1, 0}, {3, 2, 0}, {4, 3, 2}} {
		t.Run(fmt.Sprintf("source%d-table%d-rep%d", c.src, c.tbl, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", c.src, nil)
			mkTopic(t, addrs, "prices", c.tbl, nil)
			produceValues(t, addrs, "prices", c.tbl, versions, nil)
			produceValues(t, addrs, "usage", c.src, events, nil)
			o := kjoinOptions(q, addrs)
			o.RepartitionPartitions = c.rep
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			var late int
			o.OnLate = func(*drive.LateEvent) { late++ }
			pl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := pl.Run(ctx); err != nil {
				t.Fatal(err)
			}
			st := pl.Stats()
			if !st.CaughtUp || st.Late != 0 || late != 0 || st.TableLate != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(versions)) {
				t.Errorf("stats %+v, late hook %d", st, late)
			}
			if st.JoinJoined+st.JoinUnmatched != int64(len(events)) || st.JoinUnmatched == 0 || st.JoinWaiting != 0 || st.JoinVersions == 0 || st.JoinKeys == 0 {
				t.Errorf("join gauges: joined %d, unmatched %d (want %d in all), waiting %d, versions %d, keys %d",
					st.JoinJoined, st.JoinUnmatched, len(events), st.JoinWaiting, st.JoinVersions, st.JoinKeys)
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)

			// The state belongs to the table's topic too.
			o.Table.Topic = "prices2"
			if pl, err = New(o); err != nil {
				t.Fatal(err)
			}
			if err := pl.Run(ctx); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), `the versioned table's topic was "prices", now "prices2"`) {
				t.Errorf("a moved table: %v", err)
			}
		})
	}
}

// envKJoinChild makes the test binary a child running the join pipeline
// over the brokers it names (TestRunKafkaTemporalJoinKill kills it).
const envKJoinChild = "UBIK_KAFKA_KJOIN_CHILD"

func init() {
	brokers := os.Getenv(envKJoinChild)
	if brokers == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	sql := kjoinSQL
	if os.Getenv(envKJoinChild+"_LABEL") != "" {
		sql = kjoinByLabelSQL
	}
	prog, err := plan.Compile(sql, plan.CompileOptions{})
	if err == nil {
		o := kjoinOptions(prog.Queries[len(prog.Queries)-1], strings.Split(brokers, ","))
		o.UntilCaughtUp = os.Getenv(envKJoinChild+"_END") != ""
		var pl *Pipeline
		if pl, err = New(o); err == nil {
			err = pl.Run(ctx)
			st := pl.Stats()
			fmt.Printf("restored %d entries, late %d, table late %d, caught up %v\n", st.RestoredEntries, st.Late, st.TableLate, st.CaughtUp)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kjoin child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRunKafkaTemporalJoinKill: the pipeline in a child process, killed
// with SIGKILL at random points while both inputs arrive, restarted each
// time (same instance id), then run until caught up: the finals equal
// the in-process run's, one per key, with no revision twice.
func TestRunKafkaTemporalJoinKill(t *testing.T) {
	t.Parallel()
	t.Run("stream-group", func(t *testing.T) { kjoinKill(t, false) })
	t.Run("table-group", func(t *testing.T) { kjoinKill(t, true) }) // the joined rows repartitioned
}

func kjoinKill(t *testing.T, byLabel bool) {
	t.Parallel() // a subtest; each on a cluster (or names) of its own
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	q := kjoinQuery(t)
	if byLabel {
		prog, err := plan.Compile(kjoinByLabelSQL, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q = prog.Queries[len(prog.Queries)-1]
	}
	events, versions := kjoinData(seed, 3000)
	want := kjoinInProcess(t, q, events, versions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 3, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	child := func(end bool) *crashtest.Proc {
		env := []string{envKJoinChild + "=" + strings.Join(addrs, ",")}
		if byLabel {
			env = append(env, envKJoinChild+"_LABEL=1")
		}
		if end {
			env = append(env, envKJoinChild+"_END=1")
		}
		return crashtest.Start(t, crashtest.Self(env...))
	}
	// Both inputs arrive in slices, the table slightly ahead, while the
	// child is killed and restarted.
	const slices = 6
	kills := 0
	for i := range slices {
		cmd := child(false)
		lo, hi := i*len(events)/slices, (i+1)*len(events)/slices
		vlo, vhi := i*len(versions)/slices, (i+1)*len(versions)/slices
		// Either input first: events wait in the join for the table's
		// watermark, or versions wait for the events.
		if r.IntN(2) == 0 {
			produceValues(t, addrs, "prices", 2, versions[vlo:vhi], nil)
			produceValues(t, addrs, "usage", 3, events[lo:hi], nil)
		} else {
			produceValues(t, addrs, "usage", 3, events[lo:hi], nil)
			time.Sleep(time.Duration(r.IntN(500)) * time.Millisecond)
			produceValues(t, addrs, "prices", 2, versions[vlo:vhi], nil)
		}
		time.Sleep(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		if i == slices-1 {
			// Under load a child can be killed before its first commit
			// every time; the last one is killed only after some state
			// is committed, so the final run has a restore to make.
			waitCommittedRecord(t, addrs, q.Name+"-state", time.Minute)
		}
		killChild(t, cmd)
		kills++
	}
	final := child(true)
	if err := final.Wait(t, 3*time.Minute); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out := final.Stdout()
	t.Logf("%d kills; final run: %s", kills, strings.TrimSpace(out))
	var restored, late, tlate int64
	var caught bool
	if _, err := fmt.Sscanf(out, "restored %d entries, late %d, table late %d, caught up %v", &restored, &late, &tlate, &caught); err != nil {
		t.Fatalf("final run's summary %q: %v", out, err)
	}
	if restored == 0 || late != 0 || tlate != 0 || !caught {
		t.Errorf("final run: restored %d entries (want some), late %d and %d (want 0), caught up %v", restored, late, tlate, caught)
	}
	compareFinals(t, readFinals(t, addrs, "charges"), want)
}

// TestCheckQueryJoins: what CheckQuery (and New) refuse of the joins.
func TestCheckQueryJoins(t *testing.T) {
	const src = `CREATE SOURCE u (c VARCHAR, k VARCHAR, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE v (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE TABLE t2 (k VARCHAR, p BIGINT, ms BIGINT, vf AS to_timestamp_ltz(ms, 3), PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
`
	for _, c := range []struct{ name, sql, want string }{
		{"stream keys", `SELECT u.c, count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY u.c`, ""},
		{"an expression of stream columns", `SELECT upper(u.c) || u.k AS g, sum(t.p) AS n FROM u LEFT JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY upper(u.c) || u.k`, ""},
		{"global", `SELECT count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k`, ""},
		{"a table column", `SELECT t.k, count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY t.k`, ""},                                        // the joined rows repartitioned (TestRunKafkaTemporalJoinTableGroup)
		{"a table column in an expression", `SELECT u.c, count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY u.c, coalesce(t.p, 0) + 1`, ""}, // likewise
		{"a table column, a computed column", `SELECT t2.p, count(*) AS n FROM u JOIN t2 FOR SYSTEM_TIME AS OF u.ts ON u.k = t2.k GROUP BY t2.p`, ""},                 // likewise (TestRunKafkaTemporalJoinDerived),
		{"interval join", `SELECT count(*) AS n FROM u JOIN v ON u.k = v.k AND v.ts BETWEEN u.ts AND u.ts + INTERVAL '1' MINUTE`, ""},                                 // runs over Kafka (ijoin_test.go)
	} {
		prog, err := plan.Compile(src+c.sql, plan.CompileOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = CheckQuery(prog.Queries[len(prog.Queries)-1])
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
	q := kjoinQuery(t)
	ep := func(topic string) Endpoint {
		return Endpoint{Config: Config{Brokers: []string{"k:9092"}}, Topic: topic}
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"no table", Options{Query: q, Source: ep("usage"), Sink: ep("out")}, "query charge joins table prices: give its topic"},
		{"table is the source", Options{Query: q, Source: ep("usage"), Sink: ep("out"), Table: ep("usage")}, "source usage's topic and table prices's topic are both topic usage"},
		{"table is the sink", Options{Query: q, Source: ep("usage"), Sink: ep("out"), Table: ep("out")}, "table prices's topic and query charge's sink are both topic out (on brokers=k:9092): the query would read its own output"},
		{"partitioned by key", Options{Query: q, Source: Endpoint{Config: Config{Brokers: []string{"k:9092"}}, Topic: "usage", PartitionedByKey: true}, Sink: ep("out"), Table: ep("prices")}, ""},
		{"another cluster", Options{Query: q, Source: ep("usage"), Sink: ep("out"), Table: Endpoint{Config: Config{Brokers: []string{"other:9092"}}, Topic: "prices"}}, "must be on the source's cluster"},
		{"from latest", Options{Query: q, Source: ep("usage"), Sink: ep("out"), Table: Endpoint{Topic: "prices", From: FromLatest}}, "is read from its start"},
		{"a table without a join", Options{Query: tumbleQuery("x", time.Minute), Source: ep("usage"), Sink: ep("out"), Table: ep("prices")}, "query x has no join of a stream with a table or another stream"},
		{"runs", Options{Query: q, Source: ep("usage"), Sink: ep("out"), Table: ep("prices")}, ""},
	} {
		_, err := New(c.o)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
}

// kjoinByLabelSQL is kjoinSQL grouped by a column of the table: the
// events join at partitions they reach by a hash of their record, the
// joined rows go to a second segment by the GROUP BY key.
var kjoinByLabelSQL = strings.NewReplacer("SELECT u.customer,", "SELECT p.label AS plabel,", "GROUP BY u.customer,", "GROUP BY p.label,").Replace(kjoinSQL)

// TestRunKafkaTemporalJoinTableGroup: a temporal join whose GROUP BY
// names a column of the table (a LEFT JOIN: the events without a version
// in the NULL label's groups) gives the in-process finals byte for byte
// at several partition counts.
func TestRunKafkaTemporalJoinTableGroup(t *testing.T) {
	t.Parallel()
	q := lastQuery(t, kjoinByLabelSQL)
	events, versions := kjoinData(9, 1500)
	want := kjoinInProcess(t, q, events, versions)
	if _, ok := want[`[null, "2026-07-18 10:00:00"]`]; !ok {
		t.Fatalf("in process: no NULL label group: %v", want)
	}
	for _, c := range []struct{ src, tbl, rep int }{{1, 1, 0}, {3, 2, 0}, {4, 3, 2}} {
		t.Run(fmt.Sprintf("source%d-table%d-rep%d", c.src, c.tbl, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", c.src, nil)
			mkTopic(t, addrs, "prices", c.tbl, nil)
			produceValues(t, addrs, "prices", c.tbl, versions, nil)
			produceValues(t, addrs, "usage", c.src, events, nil)
			o := kjoinOptions(q, addrs)
			o.RepartitionPartitions = c.rep
			o.Logger = testLogger(t)
			st := runToEnd(t, o, 2*time.Minute)
			if !st.CaughtUp || st.Late != 0 || st.TableLate != 0 || st.TableRows != int64(len(versions)) || st.JoinJoined+st.JoinUnmatched != int64(len(events)) {
				t.Errorf("stats %+v", st)
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)
		})
	}
}

// TestRunKafkaTemporalJoinBuffer crosses the bound of the events waiting
// for the table's watermark: a table partition that gets no rows holds
// that watermark back (until its idle timeout, a minute here), so every
// event waits; past Options.JoinBuffer the pipeline stops with
// drive.ErrJoinBuffer and says why, instead of aborting the same
// transaction forever.
func TestRunKafkaTemporalJoinBuffer(t *testing.T) {
	q := kjoinQuery(t)
	events, versions := kjoinData(3, 200)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 1, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	var only0 [][]byte // every version on partition 0
	produceValues(t, addrs, "prices", 1, append(only0, versions...), nil)
	produceValues(t, addrs, "usage", 1, events, nil)
	o := kjoinOptions(q, addrs)
	o.JoinBuffer = 20
	o.UntilCaughtUp = true
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = pl.Run(ctx)
	if !errors.Is(err, drive.ErrJoinBuffer) || !strings.Contains(err.Error(), "20 events wait for the watermark of table prices") ||
		!strings.Contains(err.Error(), "the minimum over the partitions of topic prices: one that gets no rows holds it back") {
		t.Fatalf("Run: %v, want the join buffer error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run stopped by the test's timeout, not by the bound")
	}
}

// TestRunKafkaTemporalJoinInstances: two processes share the stages
// (their partitions move between them as they join, and again as one
// stops) while both topics grow in slices, either one ahead; then one
// runs until caught up. The finals equal the in-process run's, grouped
// by the stream and by the table (whose join's group reads the source
// and the table's broadcast, partition i of both in one process).
func TestRunKafkaTemporalJoinInstances(t *testing.T) {
	t.Parallel()
	prog, err := plan.Compile(derivedTJoinSQL, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byTable := prog.Queries[len(prog.Queries)-1]
	events, versions := kjoinData(11, 2400)
	tevents, tversions := derivedTJoinData(11, 2400)
	t.Run("by the stream", func(t *testing.T) { kjoinInstances(t, kjoinQuery(t), events, versions) })
	t.Run("by the table", func(t *testing.T) { kjoinInstances(t, byTable, tevents, tversions) })
}

func kjoinInstances(t *testing.T, q *plan.Query, events, versions [][]byte) {
	want := kjoinInProcess(t, q, events, versions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 4, nil)
	mkTopic(t, addrs, "prices", 3, nil)
	opts := func(id string) Options {
		o := kjoinOptions(q, addrs)
		o.InstanceID = id
		o.Logger = testLogger(t)
		return o
	}
	_, stopA := runPipeline(t, opts("a"))
	_, stopB := runPipeline(t, opts("b"))
	const slices = 4
	for i := range slices {
		lo, hi := i*len(events)/slices, (i+1)*len(events)/slices
		vlo, vhi := i*len(versions)/slices, (i+1)*len(versions)/slices
		if i%2 == 0 {
			produceValues(t, addrs, "prices", 3, versions[vlo:vhi], nil)
			produceValues(t, addrs, "usage", 4, events[lo:hi], nil)
		} else {
			produceValues(t, addrs, "usage", 4, events[lo:hi], nil)
			produceValues(t, addrs, "prices", 3, versions[vlo:vhi], nil)
		}
		time.Sleep(700 * time.Millisecond)
		if i == 1 {
			stopA() // b takes a's partitions of all three stages
		}
	}
	time.Sleep(time.Second)
	stopB()
	o := opts("a")
	if st := runToEnd(t, o, 2*time.Minute); !st.CaughtUp || st.Late != 0 || st.TableLate != 0 {
		t.Errorf("final run: %+v", st)
	}
	compareFinals(t, readFinals(t, addrs, "charges"), want)
}

// TestRunKafkaTemporalJoinCSV: both topics in CSV, whose cells can hold
// what JSON cannot: a NaN join key (NaN matches NaN, as group keys do),
// beside -0.0 and 0.0 (one key), an empty unquoted tier (NULL), quoted
// customers with the delimiter, doubled quotes and non-ASCII text. The
// finals equal one in-process driver's over the same records.
func TestRunKafkaTemporalJoinCSV(t *testing.T) {
	t.Parallel()
	q := kjoinQuery(t)
	csv, err := drive.ParseMessageFormat(map[string]string{"format": "csv"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(21, 4))
	ts := func(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.000000") }
	tiers := []string{"NaN", "-0.0", "0.0", "1.5", "", "7"}
	customers := []string{`a`, `"b""q"`, `"c,d"`, `é😀`, `""`}
	var events, versions [][]byte
	const n = 1500
	for at := int64(-5_000_000); at < n*100_000+10_000_000; at += 700_000 {
		versions = append(versions, fmt.Appendf(nil, `%s,%d.%06d,"L""%d",%s`, tiers[r.IntN(4)], r.IntN(5), r.IntN(1_000_000), r.IntN(9), ts(baseTS+at)))
	}
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000)
		events = append(events, fmt.Appendf(nil, `%s,%s,%d.%02d,n%d,%s`, customers[r.IntN(len(customers))], tiers[r.IntN(len(tiers))], r.IntN(50), r.IntN(100), i, ts(baseTS+at)))
	}
	want := map[string]string{}
	d, err := drive.New(q, drive.Config{
		Emit: func(rec *changelog.Record) error {
			if rec.Meta.Final {
				want[string(rec.Key)] = string(rec.Value)
			}
			return nil
		},
		Decoder:      drive.NewMessageSourceDecoder(q.Join.Stream, q.StreamUsed(), csv),
		TableDecoder: drive.NewMessageSourceDecoder(q.Join.Table, q.TableUsed(), csv),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if err := d.PushInput(1, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := d.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if st := d.JoinStats(); st.LateEvents != 0 || st.LateTableRows != 0 || st.Joined == 0 || st.NullKeys == 0 || st.Keys != 3 {
		t.Fatalf("in process: %+v (want 3 keys: NaN, 0 and 1.5; NULL keys; nothing late)", st)
	}
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 3, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	produceValues(t, addrs, "prices", 2, versions, nil)
	produceValues(t, addrs, "usage", 3, events, nil)
	o := kjoinOptions(q, addrs)
	o.Source.Format, o.Table.Format = csv, csv
	if st := runToEnd(t, o, 2*time.Minute); !st.CaughtUp || st.Late != 0 || st.Malformed != 0 || st.TableMalformed != 0 || st.JoinKeys != 3*3 {
		t.Errorf("stats %+v (want 3 keys in each of 3 partitions)", st)
	}
	compareFinals(t, readFinals(t, addrs, "charges"), want)
}

// waitCommittedRecord waits until a read_committed consumer of topic sees a
// record other than a state topic's binding (written once, before any
// transaction), failing after timeout. (A record in the topic is not
// enough: a child killed inside its first transaction leaves records that
// the next child's start aborts.)
func waitCommittedRecord(t *testing.T, addrs []string, topic string, timeout time.Duration) {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		committed := false
		fs.EachRecord(func(r *kgo.Record) { committed = committed || string(r.Key) != bindingKey })
		if committed {
			return
		}
		time.Sleep(50 * time.Millisecond) // an error came back (the topic not created yet)
	}
	t.Fatalf("topic %s has no committed record after %s", topic, timeout)
}
