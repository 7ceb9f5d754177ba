package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
)

const (
	envChaosRounds  = "UBIK_E2E_CHAOS_ROUNDS"  // rounds; default one per shape (6)
	envChaosEvents  = "UBIK_E2E_CHAOS_EVENTS"  // events per round; default 30000 (the size: 500000)
	envChaosSeconds = "UBIK_E2E_CHAOS_SECONDS" // seconds of production under chaos per round; default 12
	envChaosSeed    = "UBIK_E2E_CHAOS_SEED"
	envChaosKeep    = "UBIK_E2E_CHAOS_KEEP"  // a directory: a failed or slow round's logs are copied there
	envChaosShape   = "UBIK_E2E_CHAOS_SHAPE" // a shape's name (query, views, regroup, join, viewjoin, jointable): every round runs it
)

// chaosSQL is the query of the chaos rounds: input dedup, a 1-minute
// TUMBLE per merchant with count, sum, max and approx_count_distinct,
// early emissions every 100 ms. Its source has no connector: the Kafka
// runs name their topics with --source/--sink, the oracle reads a file.
const chaosSQL = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (dedup_key = 'event_id', dedup_within = '10 minutes');
CREATE VIEW chaos AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest, approx_count_distinct(customer) AS customers
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '100' MILLISECOND;
`

// chaosViewsSQL is the other shape of the rotation: a chain of three
// views over the same source (with its dedup), each with its own
// changelog in its own topic: ten-second totals (EMIT FINAL), minute
// totals over them (EMIT FINAL), and a continuous total per merchant over
// the minutes, the query the runs name.
const chaosViewsSQL = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (dedup_key = 'event_id', dedup_within = '10 minutes');
CREATE VIEW tens AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '10' SECOND) AS ws, count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW mins AS
SELECT merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS window_start, sum(orders) AS orders, sum(total) AS total,
       max(biggest) AS biggest, count(*) AS tens
FROM tens GROUP BY merchant, TUMBLE(ws, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW per_merchant AS
SELECT merchant, sum(orders) AS orders, sum(total) AS total, count(*) AS minutes
FROM mins GROUP BY merchant;
`

// chaosRegroupSQL is the third shape: ten-second totals per merchant and
// customer (EMIT FINAL), read by per-merchant minutes that emit early
// every 100 ms. The reader groups by less than its view, so over Kafka
// the view's final rows reach it through a repartition topic keyed by
// merchant, written in the same transactions as the view's changelog.
const chaosRegroupSQL = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (dedup_key = 'event_id', dedup_within = '10 minutes');
CREATE VIEW tens AS
SELECT merchant, customer, TUMBLE_START(event_time, INTERVAL '10' SECOND) AS ws, count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events GROUP BY merchant, customer, TUMBLE(event_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW mins AS
SELECT merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS window_start, sum(orders) AS orders, sum(total) AS total,
       max(biggest) AS biggest, count(*) AS tens
FROM tens GROUP BY merchant, TUMBLE(ws, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '100' MILLISECOND;
`

// chaosJoinInputs are the temporal join shapes' inputs: the events, with
// a dedup key, and the versioned fee table.
const chaosJoinInputs = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (dedup_key = 'event_id', dedup_within = '10 minutes');
CREATE TABLE fees (merchant VARCHAR, rate DECIMAL(6,4), valid_from TIMESTAMP,
  PRIMARY KEY (merchant) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from - INTERVAL '5' SECOND)` + tableWith + `;
`

// chaosJoinSQL is the fourth shape: the events joined with a versioned
// table of per-merchant fee rates (an event-time temporal join, LEFT: an
// event before its merchant's first rate keeps NULL), per merchant and
// minute with early emissions every 100 ms. tableWith stands for the
// table's WITH clause: its path in the file run, its topic (fees, two
// partitions, produced while the chaos runs) over Kafka.
const chaosJoinSQL = chaosJoinInputs + `CREATE VIEW fees_due AS
SELECT e.merchant, TUMBLE_START(e.event_time, INTERVAL '1' MINUTE) AS window_start, count(*) AS orders,
       count(f.rate) AS priced, sum(e.amount * f.rate) AS due, max(f.rate) AS top_rate
FROM events e LEFT JOIN fees FOR SYSTEM_TIME AS OF e.event_time AS f ON e.merchant = f.merchant
GROUP BY e.merchant, TUMBLE(e.event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '100' MILLISECOND;
`

// chaosJoinByTableSQL is the sixth shape: the temporal join of the
// fourth grouped by a table column (the fee rate, NULL for an event
// before its merchant's first rate), so the join runs where the events
// are (over Kafka: after the dedup key's placement, no placement by the
// group) and its joined rows are placed by the rate for the aggregate.
const chaosJoinByTableSQL = chaosJoinInputs + `CREATE VIEW by_rate AS
SELECT f.rate, TUMBLE_START(e.event_time, INTERVAL '1' MINUTE) AS window_start, count(*) AS orders, sum(e.amount) AS total
FROM events e LEFT JOIN fees FOR SYSTEM_TIME AS OF e.event_time AS f ON e.merchant = f.merchant
GROUP BY f.rate, TUMBLE(e.event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '100' MILLISECOND;
`

// chaosViewJoinSQL is the fifth shape: a window join of two EMIT FINAL
// views over two streams (as Nexmark q8): the orders per merchant and
// minute, and the fee-rate changes per merchant and minute from a second
// stream (chaosFees' rows, produced beside the events, each eighth sent
// twice: the stream's dedup key drops the copy), joined on the merchant
// and the window start. Over Kafka the second stream is a topic of two
// partitions (tableWith stands for its WITH clause), which the join's
// stage reads through its own dedup stage.
const chaosViewJoinSQL = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (dedup_key = 'event_id', dedup_within = '10 minutes');
CREATE SOURCE fees (fee_id VARCHAR, merchant VARCHAR, rate DECIMAL(6,4), valid_from TIMESTAMP,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '5' SECOND)` + tableWith + `;
CREATE VIEW orders AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start, count(*) AS orders, sum(amount) AS total
FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW changes AS
SELECT merchant, TUMBLE_START(valid_from, INTERVAL '1' MINUTE) AS window_start, count(*) AS changes, max(rate) AS top
FROM fees GROUP BY merchant, TUMBLE(valid_from, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW joined AS
SELECT o.merchant, TUMBLE_START(o.window_start, INTERVAL '1' MINUTE) AS window_start, sum(o.orders) AS orders,
       sum(o.total) AS total, sum(c.changes) AS changes, max(c.top) AS top
FROM orders o JOIN changes c ON o.merchant = c.merchant AND o.window_start = c.window_start
GROUP BY o.merchant, TUMBLE(o.window_start, INTERVAL '1' MINUTE)
EMIT FINAL;
`

// tableWith marks where a shape's script takes its table's WITH clause.
const tableWith = "{{table}}"

// chaosShape is what a chaos round runs: a script, the query the runs
// name, and each query's sink topic with its oracle (the file run's
// output of that query).
type chaosShape struct {
	name, sql, query string
	// topics maps each query whose changelog is checked to its sink
	// topic (the named query's is the --sink topic, out; a view's is
	// out-VIEW).
	topics map[string]string
	// continuous names the queries without windows: no final record,
	// their last record per key is compared.
	continuous map[string]bool
	// table is the second input's name (a versioned table, or a second
	// stream) when the script reads one (chaosFees writes its rows).
	table string
	// tableDedup, if set, are the second stream's dedup options: its
	// rows then have ids, and some come twice.
	tableDedup string
}

// chaosShapes are the shapes the rounds take in turn: round 0 the single
// windowed query, round 1 the chain of views, round 2 the reader that
// groups by less than its view, round 3 the temporal join, and so on
// (CI runs the first rounds).
var chaosShapes = []chaosShape{
	{name: "query", sql: chaosSQL, query: "chaos", topics: map[string]string{"chaos": "out"}},
	{name: "views", sql: chaosViewsSQL, query: "per_merchant",
		topics:     map[string]string{"per_merchant": "out", "tens": "out-tens", "mins": "out-mins"},
		continuous: map[string]bool{"per_merchant": true}},
	{name: "regroup", sql: chaosRegroupSQL, query: "mins", topics: map[string]string{"mins": "out", "tens": "out-tens"}},
	{name: "join", sql: chaosJoinSQL, query: "fees_due", topics: map[string]string{"fees_due": "out"}, table: "fees"},
	{name: "viewjoin", sql: chaosViewJoinSQL, query: "joined", table: "fees", tableDedup: ", dedup_key = 'fee_id', dedup_within = '10 minutes'",
		topics: map[string]string{"joined": "out", "orders": "out-orders", "changes": "out-changes"}},
	{name: "jointable", sql: chaosJoinByTableSQL, query: "by_rate", topics: map[string]string{"by_rate": "out"}, table: "fees"},
}

// chaosFees writes the fee table's versions over the events' time (from
// a minute before the first to a minute after the last, every 0.5 to 5
// s, a random merchant's new rate), in time order, each with its time.
// Merchant m7 gets no version before the events' fifth minute, so its
// first events find none. With retries each row has an id (fee_id), and
// each eighth is sent again right after it.
func chaosFees(r *rand.Rand, retries bool) (rows [][]byte, times []time.Time, merchants []int) {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	for at := base.Add(-time.Minute); at.Before(base.Add(21 * time.Minute)); at = at.Add(time.Duration(500+r.IntN(4500)) * time.Millisecond) {
		m := r.IntN(8)
		if m == 7 && at.Before(base.Add(5*time.Minute)) {
			continue
		}
		id := ""
		if retries {
			id = fmt.Sprintf(`"fee_id":"f%d",`, len(rows))
		}
		row := fmt.Appendf(nil, `{%s"merchant":"m%d","rate":"0.%04d","valid_from":"%s"}`, id, m, r.IntN(10000), at.Format("2006-01-02 15:04:05.000"))
		rows, times, merchants = append(rows, row), append(times, at), append(merchants, m)
		if retries && len(rows)%8 == 1 {
			rows, times, merchants = append(rows, row), append(times, at), append(merchants, m) // its retry
		}
	}
	return rows, times, merchants
}

// TestChaosBinary runs the real ubik binary over Kafka under chaos: three
// processes (ubik run --instance-id ...) of one query, with a repartition
// stage, over a 4-partition topic on an in-process broker that compacts
// every second, while the events are produced; at random moments one is
// killed with SIGKILL and restarted, or frozen with SIGSTOP for up to 12 s
// (past its 10 s session timeout: the others take its partitions, and it
// resumes as a zombie); one that exits by itself is restarted as a
// supervisor would. Then all stop (SIGTERM), and one `ubik run
// --until-caught-up` finishes the query. A read_committed consumer reads
// the whole sink topic and checks: no (key, revision) twice, no revision
// going backwards, nothing after a final, exactly one final per (merchant,
// window), and the finals equal to the batch answer (the same query over a
// file holding the same events, duplicates included: no event lost or
// counted twice). The rounds take three shapes in turn (chaosShapes):
// the one query, a chain of three views, and a reader that groups by less
// than its view (a repartition topic between them), and a temporal join
// with a versioned table produced beside the events; every changelog of a
// shape (each in its own topic) is held to the same invariants and to the
// file run of the script. CI runs four short rounds, one of each; by
// hand, 20 rounds of the size:
//
//	UBIK_E2E_CHAOS_ROUNDS=20 UBIK_E2E_CHAOS_EVENTS=500000 UBIK_E2E_CHAOS_SECONDS=120 \
//	  go test -run TestChaosBinary -v -timeout 3h ./internal/cli
func TestChaosBinary(t *testing.T) {
	rounds, n, secs := len(chaosShapes), 30000, 12
	for env, p := range map[string]*int{envChaosRounds: &rounds, envChaosEvents: &n, envChaosSeconds: &secs} {
		if s := os.Getenv(env); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				t.Fatalf("%s=%q is not a positive integer", env, s)
			}
			*p = v
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envChaosSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	bin := buildUbik(t)
	for i := 0; i < rounds; i++ {
		shape := chaosShapes[i%len(chaosShapes)]
		if name := os.Getenv(envChaosShape); name != "" {
			i := slices.IndexFunc(chaosShapes, func(s chaosShape) bool { return s.name == name })
			if i < 0 {
				t.Fatalf("%s=%q: no such shape (query, views, regroup, join, viewjoin)", envChaosShape, name)
			}
			shape = chaosShapes[i]
		}
		t.Run(fmt.Sprintf("round=%d/%s", i, shape.name), func(t *testing.T) {
			s := seed + uint64(i)
			t.Logf("seed %d (rerun with %s=%d %s=%d: this round is the last), %d events over %d s", s, envChaosSeed, seed, envChaosRounds, i+1, n, secs)
			chaosRound(t, bin, shape, s, n, time.Duration(secs)*time.Second)
		})
	}
}

// chaosEvents generates n events over about 20 minutes of event time, 8
// merchants, in time order with up to 2 s of disorder (the watermark
// allows 5), and about 2% of them sent twice a few events later (the
// source's dedup drops the second).
func chaosEvents(r *rand.Rand, n int) [][]byte {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	step := 20 * time.Minute / time.Duration(n)
	var out [][]byte
	var dups []struct {
		at int
		ev []byte
	}
	for i := 0; i < n; i++ {
		ts := base.Add(time.Duration(i)*step - time.Duration(r.IntN(2000))*time.Millisecond)
		ev := fmt.Appendf(nil, `{"event_id":"e%d","merchant":"m%d","customer":"c%d","amount":%d,"event_time":"%s"}`,
			i, r.IntN(8), r.IntN(300), 1+r.IntN(1000), ts.Format("2006-01-02 15:04:05.000"))
		out = append(out, ev)
		if r.IntN(50) == 0 {
			dups = append(dups, struct {
				at int
				ev []byte
			}{i + 1 + r.IntN(20), ev})
		}
		for len(dups) > 0 && dups[0].at <= i {
			out = append(out, dups[0].ev)
			dups = dups[1:]
		}
	}
	for _, d := range dups {
		out = append(out, d.ev)
	}
	return out
}

type chaosProc struct {
	id     string
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
	frozen bool
}

func chaosRound(t *testing.T, bin string, shape chaosShape, seed uint64, n int, produceFor time.Duration) {
	r := rand.New(rand.NewPCG(seed, 13))
	dir := t.TempDir()
	if keep := os.Getenv(envChaosKeep); keep != "" {
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			to := filepath.Join(keep, fmt.Sprint(seed))
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			if err := os.MkdirAll(to, 0o755); err == nil {
				for _, l := range logs {
					if b, err := os.ReadFile(l); err == nil {
						os.WriteFile(filepath.Join(to, filepath.Base(l)), b, 0o644)
					}
				}
				t.Logf("the round's logs: %s", to)
			}
		})
	}
	trace, err := newBrokerTrace(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "1000"}),
		kfake.WithLogger(trace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(trace.close) // after the cluster's close (cleanups run last first)
	t.Cleanup(c.Close)
	trace.observe(c)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	const parts = 4
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), parts, -1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	evs := chaosEvents(r, n)
	// A table: its rows in a file for the file run, in a topic of two
	// partitions (each merchant's versions in one) over Kafka.
	var tableRows [][]byte
	var tableTimes []time.Time
	var tableParts []int
	fileSQL, kafkaSQL := shape.sql, shape.sql
	if shape.table != "" {
		tableRows, tableTimes, tableParts = chaosFees(r, shape.tableDedup != "")
		tpath := filepath.Join(dir, shape.table+".jsonl")
		if err := os.WriteFile(tpath, append(joinLines(tableRows), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, -1, nil, shape.table); err != nil {
			t.Fatal(err)
		}
		fileSQL = strings.Replace(shape.sql, tableWith, fmt.Sprintf(" WITH (path = '%s'%s)", tpath, shape.tableDedup), 1)
		kafkaSQL = strings.Replace(shape.sql, tableWith, fmt.Sprintf(" WITH (connector = 'kafka', topic = '%s'%s)", shape.table, shape.tableDedup), 1)
	}
	sqlPath, fileSQLPath := filepath.Join(dir, "chaos.sql"), filepath.Join(dir, "chaos-file.sql")
	if err := os.WriteFile(sqlPath, []byte(kafkaSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fileSQLPath, []byte(fileSQL), 0o644); err != nil {
		t.Fatal(err)
	}

	// The batch answer: the same script over a file of the same events,
	// each query's changelog in its own file.
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, append(joinLines(evs), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	oracleDir := filepath.Join(dir, "oracle")
	if out, err := exec.Command(bin, "run", fileSQLPath, "--input", input, "--output-dir", oracleDir).CombinedOutput(); err != nil {
		t.Fatalf("the file run: %v\n%s", err, out)
	}
	want := map[string]map[string]map[string]any{}
	for q := range shape.topics {
		want[q] = readTSVFinals(t, filepath.Join(oracleDir, q+".tsv"))
		if min := 100; !shape.continuous[q] && len(want[q]) < min {
			t.Fatalf("the file run gave %s %d finals, want at least %d (8 merchants over 20 one-minute windows)", q, len(want[q]), min)
		}
	}

	kafkaArgs := []string{"run", sqlPath, "--query", shape.query, "--source", "kafka://" + addr + "/events", "--sink", "kafka://" + addr + "/out",
		"--idle-timeout", "10m", "--log-level", "debug"}
	var exits []string // instances that exited by themselves, and why
	start := func(p *chaosProc) {
		p.log = filepath.Join(dir, fmt.Sprintf("%s.%d.log", p.id, time.Now().UnixNano()))
		f, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(bin, append(kafkaArgs, "--instance-id", p.id)...)
		p.cmd.Env = append(os.Environ(), "GOTRACEBACK=all") // SIGQUIT dumps every goroutine
		p.cmd.Stdout, p.cmd.Stderr = f, f
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", p.id, err)
		}
		p.done, p.frozen = make(chan struct{}), false
		go func(cmd *exec.Cmd, done chan struct{}) {
			cmd.Wait()
			f.Close()
			close(done)
		}(p.cmd, p.done)
	}
	procs := make([]*chaosProc, 3)
	for i := range procs {
		procs[i] = &chaosProc{id: fmt.Sprintf("chaos-%d", i)}
		start(procs[i])
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	})

	// Produce while the chaos runs: the events round-robin over the
	// partitions; a table's versions up to two minutes of event time
	// ahead of the events of the chunk (an event waits for the table's
	// watermark to pass it), the rest with the last chunk.
	produced := make(chan error, 1)
	go func() {
		chunks := 40
		per := (len(evs) + chunks - 1) / chunks
		step := 20 * time.Minute / time.Duration(n) // chaosEvents' spacing
		ti := 0
		for i := 0; i < len(evs); i += per {
			var recs []*kgo.Record
			ahead := time.Date(2026, 7, 18, 10, 2, 0, 0, time.UTC).Add(time.Duration(min(i+per, n)) * step)
			for ; ti < len(tableRows) && (tableTimes[ti].Before(ahead) || i+per >= len(evs)); ti++ {
				recs = append(recs, &kgo.Record{Topic: shape.table, Partition: int32(tableParts[ti] % 2), Value: tableRows[ti]})
			}
			for j := i; j < min(i+per, len(evs)); j++ {
				recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(j % parts), Value: evs[j]})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(produceFor / time.Duration(chunks))
		}
		produced <- nil
	}()
	var kills, stops, restarts int
	thaw := map[*chaosProc]time.Time{}
	began := time.Now()
	for producing := true; producing; {
		select {
		case err := <-produced:
			if err != nil {
				t.Fatalf("producing: %v", err)
			}
			producing = false
		case <-time.After(time.Duration(300+r.IntN(1500)) * time.Millisecond):
		}
		for p, at := range thaw {
			if time.Now().After(at) {
				p.cmd.Process.Signal(syscall.SIGCONT)
				p.frozen = false
				delete(thaw, p)
			}
		}
		for _, p := range procs {
			select {
			case <-p.done:
				// It stopped by itself (a fenced zombie does): a
				// supervisor restarts it.
				exits = append(exits, fmt.Sprintf("%s (%v): %s", p.id, p.cmd.ProcessState, tail(p.log, 3)))
				start(p)
				restarts++
			default:
			}
		}
		if !producing {
			break
		}
		p := procs[r.IntN(len(procs))]
		if p.frozen {
			continue
		}
		if r.IntN(3) == 0 {
			p.cmd.Process.Signal(syscall.SIGSTOP)
			p.frozen = true
			thaw[p] = time.Now().Add(time.Duration(500+r.IntN(11500)) * time.Millisecond)
			stops++
			continue
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		start(p)
		kills++
	}
	t.Logf("produced %d events in %s: %d kill -9, %d SIGSTOP, %d restarts after an exit", len(evs), time.Since(began).Round(time.Millisecond), kills, stops, restarts)
	for _, e := range exits {
		// Only a zombie fenced by the broker may stop by itself.
		if !strings.Contains(e, "fenced") {
			t.Errorf("an instance exited by itself: %s", e)
		}
	}
	// Everyone stops cleanly and promptly (see stopBound); a stop that
	// takes longer is dumped (SIGQUIT: every goroutine's stack) and fails.
	stopping := time.Now()
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		checkStopped(t, p, stopping)
	}
	t.Logf("all stopped %s after SIGTERM", time.Since(stopping).Round(time.Millisecond))
	// One process finishes the query.
	trace.mark("final catch-up")
	final := filepath.Join(dir, "final.log")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fin := time.Now()
	out, err := exec.CommandContext(ctx, bin, append(kafkaArgs, "--instance-id", "chaos-0", "--until-caught-up")...).CombinedOutput()
	os.WriteFile(final, out, 0o644)
	if err != nil || !strings.Contains(string(out), "caught up") {
		t.Fatalf("ubik run --until-caught-up: %v\n%s", err, out)
	}
	took := time.Since(fin)
	aborts := summaryCount(string(out))
	t.Logf("--until-caught-up finished in %s (%d aborts): %s", took.Round(time.Millisecond), aborts, lastLine(string(out)))
	if slow, many := chaosThresholds(); took > slow || aborts > many {
		// A slow round: keep every log (each process's, the final
		// run's, the broker's), and show why transactions did not
		// commit and what the broker was asked meanwhile.
		kept := keepRoundLogs(dir, os.Getenv(envChaosKeep), seed)
		t.Logf("SLOW ROUND: --until-caught-up took %s with %d aborts (limits %s, %d); logs kept in %s\nwhy, from its log:\n%s\nthe broker, from the final catch-up on:\n%s",
			took.Round(time.Millisecond), aborts, slow, many, kept, abortDigest(string(out)), tailFrom(trace.path, "=== final catch-up", 400))
	}
	for q, topic := range shape.topics {
		checkChaosSink(t, addr, q, topic, want[q], shape.continuous[q])
	}
}

// stopBound is how long a ubik run may take to stop after SIGTERM: end
// (commit or abort) the open transaction, leave the groups, exit. The
// transaction timeout is 30 s, the rebalance timeout 60 s: a stop that
// waits on either is caught.
const stopBound = 10 * time.Second

// checkStopped waits for p to exit after SIGTERM sent at since, and checks
// that it exited within stopBound with the documented status (0 and a
// stopped summary). One that takes longer gets SIGQUIT, which makes the Go
// runtime print every goroutine's stack to its log, and fails with that.
func checkStopped(t *testing.T, p *chaosProc, since time.Time) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Until(since.Add(stopBound))):
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		b, _ := os.ReadFile(p.log)
		if len(b) > 400000 {
			b = b[len(b)-400000:]
		}
		t.Errorf("%s did not stop within %s of SIGTERM; its log and the stacks of its goroutines (SIGQUIT), %s:\n%s", p.id, stopBound, p.log, b)
		return
	}
	took := time.Since(since)
	// A run stopped by SIGTERM exits 0 (a service's normal stop) with its
	// "stopped" summary. A
	// process restarted a moment before may not have installed its
	// handler yet (the first thing main does) and then dies of the
	// signal having written nothing.
	st, log := p.cmd.ProcessState, tail(p.log, 5)
	stopped := st.ExitCode() == 0 && strings.Contains(log, "stopped (terminated by SIGTERM)")
	unstarted := !st.Exited() && strings.TrimSpace(log) == ""
	if !stopped && !unstarted && !strings.Contains(tail(p.log, 3), "fenced") {
		t.Errorf("%s after SIGTERM: %v, want exit status 0 and a stopped summary: %s", p.id, st, log)
	}
	t.Logf("%s stopped %s after SIGTERM (%v)", p.id, took.Round(time.Millisecond), st)
}

// checkChaosSink reads query's sink topic with read_committed to its end
// and checks the changelog invariants and the finals: for a continuous
// query (no windows, no final record) the last record per key.
func checkChaosSink(t *testing.T, addr, query, topic string, want map[string]map[string]any, continuous bool) {
	t.Helper()
	// Nothing writes to the sink any more: read every partition to its
	// end offset. Control records are kept so that the last offset (often
	// a transaction marker) is seen; a quiet spell is no proof of the end
	// (under load the consumer took longer than that to start).
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rem := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			rem[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type last struct {
		rev   uint64
		final bool
	}
	seen := map[string]last{}
	finals := map[string]map[string]any{}
	var records, violations int
	violate := func(format string, args ...any) {
		violations++
		if violations <= 20 {
			t.Errorf(topic+": "+format, args...)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(rem) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the sink was not read to its end within 3 minutes (partitions left: %v)", rem)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= rem[r.Partition] {
				delete(rem, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			records++
			kr, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
			if err != nil {
				violate("sink record at partition %d offset %d: %v", r.Partition, r.Offset, err)
				return
			}
			if kr.Meta.Query != query {
				violate("a record of query %q at partition %d offset %d", kr.Meta.Query, r.Partition, r.Offset)
			}
			k := string(r.Key)
			prev, ok := seen[k]
			switch {
			case ok && kr.Meta.Revision == prev.rev:
				violate("duplicate (key, revision): %s revision %d (partition %d offset %d)", k, kr.Meta.Revision, r.Partition, r.Offset)
			case ok && kr.Meta.Revision < prev.rev:
				violate("revision backwards: %s revision %d after %d (partition %d offset %d)", k, kr.Meta.Revision, prev.rev, r.Partition, r.Offset)
			case ok && prev.final:
				violate("a record after the final: %s revision %d", k, kr.Meta.Revision)
			}
			seen[k] = last{kr.Meta.Revision, prev.final || kr.Meta.Final}
			if continuous && kr.Meta.Final {
				violate("a final record of a continuous query: %s revision %d", k, kr.Meta.Revision)
			}
			if kr.Meta.Final || continuous {
				var v map[string]any
				if err := json.Unmarshal(r.Value, &v); err != nil {
					violate("sink value %q: %v", r.Value, err)
				}
				finals[k] = v
			}
		})
	}
	var bad []string
	for k, v := range want {
		got, ok := finals[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: no final (want %v)", k, v))
		case !reflect.DeepEqual(got, v):
			bad = append(bad, fmt.Sprintf("%s: final %v, want %v", k, got, v))
		}
	}
	for k := range seen {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: a key the batch answer does not have", k))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		n := len(bad)
		if n > 15 {
			bad = append(bad[:15], "...")
		}
		t.Errorf("%s (%s): %d of %d finals differ from the batch answer:\n%s", topic, query, n, len(want), strings.Join(bad, "\n"))
	}
	t.Logf("sink %s (%s): %d records, %d keys, %d finals (%d expected), %d invariant violations", topic, query, records, len(seen), len(finals), len(want), violations)
}

// readTSVFinals reads a file run's changelog (key TAB value per line) and
// returns each key's last value, which is its final.
func readTSVFinals(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("%s: line %q is not key TAB value", path, sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			t.Fatalf("%s: value %q: %v", path, v, err)
		}
		out[k] = m
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func joinLines(ls [][]byte) []byte {
	var b []byte
	for i, l := range ls {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, l...)
	}
	return b
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return ls[len(ls)-1]
}
