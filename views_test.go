package ubik_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// The view graph: a windowed EMIT FINAL view read by another query
// (views over views), checked against PostgreSQL computing the same
// composition in batch, and held byte for byte to one reference run under
// output bounds, checkpoints and restarts at random points.

const viewOracleSQL = oracleSource + `
CREATE VIEW secs AS SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, sum(price) AS total, count(*) AS n,
  sum(qty) AS sq, max(amount) AS top
  FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) HAVING count(*) > 1 EMIT FINAL;
CREATE VIEW tens AS SELECT k, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(total) AS total, sum(n) AS n,
  sum(sq) AS sq, count(*) AS secs, max(top) AS top, min(total) AS low
  FROM secs GROUP BY k, TUMBLE(ws, INTERVAL '10' SECOND);`

// TestViewOracle computes per-second totals and then ten-second totals
// over them, in ubik (one graph) and in PostgreSQL (the same two GROUP BYs
// nested in batch), and compares every final record of both views
// exactly: decimal and 128-bit integer sums, a HAVING upstream, NULL and
// non-ASCII keys, double maxima.
func TestViewOracle(t *testing.T) {
	sc, dsn, evs := loadOracle(t, 17, 20000)
	secs := `SELECT k, date_bin('1 second', ts, '1970-01-01') AS ws, sum(price) AS total, count(*) AS n, sum(qty) AS sq, max(amount) AS top
	  FROM ev GROUP BY 1, 2 HAVING count(*) > 1`
	qSecs := sc.Query(`SELECT k, ws, k, ws, total, n, sq, top FROM (` + secs + `) s`)
	qTens := sc.Query(`SELECT k, date_bin('10 seconds', ws, '1970-01-01') AS w, k, date_bin('10 seconds', ws, '1970-01-01'),
	  sum(total), sum(n), sum(sq), count(*), max(top), min(total) FROM (` + secs + `) s GROUP BY 1, 2`)
	res := sc.Run(t, dsn)

	eng, _ := ubik.Open(ubik.DefaultOptions())
	got := map[string]map[string]string{"secs": {}, "tens": {}}
	finals := map[string]int{}
	collect := func(r changelog.Record) error {
		if !r.Meta.Final {
			t.Errorf("%s: a record that is not final: %s", r.Meta.Query, r.Value)
		}
		if _, dup := got[r.Meta.Query][string(r.Key)]; dup {
			t.Errorf("%s: key %s published twice", r.Meta.Query, r.Key)
		}
		got[r.Meta.Query][string(r.Key)] = string(r.Value)
		finals[r.Meta.Query]++
		return nil
	}
	q, err := eng.Start(viewOracleSQL, ubik.QueryOptions{Name: "tens", OnRecord: collect, OnViewRecord: collect})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := q.Push(evs[i].json()); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Late != 0 || st.EvalErrors != 0 || st.EventsIn != int64(len(evs)) {
		t.Fatalf("stats %+v", st)
	}
	dec := types.Decimal(38, 3)
	check := func(name string, rows [][]*string, key []types.Type, cols []string, typs []types.Type) {
		want := map[string]string{}
		for _, vals := range rows {
			kc := make([]types.Value, len(key))
			for i := range key {
				kc[i] = pgCell(t, vals[i], key[i])
			}
			vc := make([]types.Value, len(typs))
			for i := range typs {
				vc[i] = pgCell(t, vals[len(key)+i], typs[i])
			}
			want[string(changelog.AppendKey(nil, kc))] = string(changelog.AppendValue(nil, cols, vc))
		}
		if len(want) < 50 {
			t.Fatalf("%s: the oracle has only %d rows", name, len(want))
		}
		if len(got[name]) != len(want) {
			t.Errorf("%s: ubik has %d keys, the oracle %d", name, len(got[name]), len(want))
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		bad := 0
		for _, k := range keys {
			if got[name][k] != want[k] {
				if bad++; bad <= 5 {
					t.Errorf("%s key %s:\n  ubik   %s\n  oracle %s", name, k, got[name][k], want[k])
				}
			}
		}
	}
	check("secs", res[qSecs], []types.Type{types.Varchar, types.Timestamp}, []string{"k", "ws", "total", "n", "sq", "top"},
		[]types.Type{types.Varchar, types.Timestamp, dec, types.BigInt, types.HugeInt, types.Double})
	check("tens", res[qTens], []types.Type{types.Varchar, types.Timestamp}, []string{"k", "w", "total", "n", "sq", "secs", "top", "low"},
		[]types.Type{types.Varchar, types.Timestamp, dec, types.HugeInt, types.HugeInt, types.BigInt, types.Double, dec})
}

// viewEdgeSQL regroups a view's rows by cells at every edge of the key
// rules: the double sum of a second (NaN, ±Inf, -0.0, NULL), and the
// view's string group (repaired invalid UTF-8, JSON escapes, NULL). The
// view allows lateness, so late events are routed at the view, and a
// third query reads the second (a chain of three).
const viewEdgeSQL = `CREATE SOURCE ev (g VARCHAR, d DOUBLE, x DECIMAL(20,4), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE VIEW v1 AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, sum(d) AS total, sum(x) AS ex, count(*) AS n
  FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL ALLOWED LATENESS INTERVAL '1' SECOND;
CREATE VIEW v2 AS SELECT total, g, HOP_START(ws, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS hs, count(*) AS secs,
  sum(n) AS n, sum(ex) AS ex, min(total) AS lo, max(g) AS mg
  FROM v1 GROUP BY total, g, HOP(ws, INTERVAL '2' SECOND, INTERVAL '6' SECOND);
CREATE VIEW v3 AS SELECT mg, TUMBLE_START(hs, INTERVAL '20' SECOND) AS t, sum(n) AS n, count(*) AS c, sum(ex) AS ex
  FROM v2 GROUP BY mg, TUMBLE(hs, INTERVAL '20' SECOND) EMIT CHANGES;`

// viewEdgeEvents makes JSON lines whose groups and sums hit the edges,
// with disorder past the watermark delay (some events are late).
func viewEdgeEvents(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 99))
	groups := []string{`"a"`, `"\u00e9"`, `"é"`, "\"\xff\"", "\"\xfe\"", "\"\xe2\x82\"", `null`, `"q\"t"`, `""`}
	doubles := []string{"1.5", "-0.0", "0.0", "NaN", "Infinity", "-Infinity", "null", "1e308", "-1e308", "0.1", "2.5e-300"}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	out := make([][]byte, n)
	for i := range out {
		ts := base + int64(i)*40_000 - r.Int64N(3_500_000)
		x := fmt.Sprintf("%d.%04d", r.IntN(2_000_000)-1_000_000, r.IntN(10000))
		out[i] = fmt.Appendf(nil, `{"g":%s,"d":%s,"x":%s,"ts":"%s"}`, groups[r.IntN(len(groups))], doubles[r.IntN(len(doubles))], x, tsText(ts))
	}
	return out
}

// viewRun is one run of a view graph over a history; it collects each
// query's changelog (key, value, final, revision), truncated back to the
// last checkpoint on a simulated crash.
type viewRun struct {
	logs  map[string][]string
	late  int
	stats ubik.Stats // the graph's: Late counts every node's late events
	own   ubik.Stats // the primary's own (ViewStats)
}

type viewOpts struct {
	pull     bool  // take the primary's records with Next, bounded
	maxPend  int   // MaxPendingRecords when pulling
	ckptAt   []int // checkpoint after these events
	crashAt  []int // crash after these events: restart from the last checkpoint
	full     bool  // full checkpoints (else incremental)
	primary  string
	script   string
	eventsIn []([]byte)
	inputOf  []string // the input each event goes to (PushInput); nil: Push
}

func recText(r changelog.Record) string {
	return fmt.Sprintf("%s\t%s\tfinal=%v rev=%d", r.Key, r.Value, r.Meta.Final, r.Meta.Revision)
}

func runViews(t *testing.T, o viewOpts) viewRun {
	t.Helper()
	opts := ubik.DefaultOptions()
	if o.pull {
		opts.MaxPendingRecords = o.maxPend
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	run := viewRun{logs: map[string][]string{}}
	var state map[string][]byte
	var ckLens map[string]int
	ckPos := -1
	var q *ubik.Query
	onRec := func(r changelog.Record) error {
		run.logs[r.Meta.Query] = append(run.logs[r.Meta.Query], recText(r))
		return nil
	}
	start := func() {
		qo := ubik.QueryOptions{Name: o.primary, OnViewRecord: onRec, OnLate: func(*ubik.LateEvent) { run.late++ }}
		if !o.pull {
			qo.OnRecord = onRec
		}
		var err error
		if q, err = eng.Start(o.script, qo); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		for r := range q.Records() {
			onRec(r)
		}
	}
	do := func(f func() error) {
		for {
			err := f()
			if st := q.Stats(); o.pull && st.Pending > o.maxPend {
				t.Fatalf("%d records buffered, more than MaxPendingRecords %d", st.Pending, o.maxPend)
			}
			if errors.Is(err, ubik.ErrBackpressure) {
				drain()
				continue
			}
			var ee *ubik.EventError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			return
		}
	}
	start()
	ck, crash := map[int]bool{}, map[int]bool{}
	for _, i := range o.ckptAt {
		ck[i] = true
	}
	for _, i := range o.crashAt {
		crash[i] = true
	}
	crashed := map[int]bool{}
	for i := 0; i < len(o.eventsIn); i++ {
		if o.inputOf != nil {
			do(func() error { return q.PushInput(o.inputOf[i], o.eventsIn[i]) })
		} else {
			do(func() error { return q.Push(o.eventsIn[i]) })
		}
		if o.pull && i%3 == 0 {
			// Take only some records now and then: the bound and the
			// inbox hold the rest.
			for k := 0; k < 2; k++ {
				if r, ok := q.Next(); ok {
					onRec(r)
				}
			}
		}
		if ck[i] {
			if state == nil || o.full {
				state = map[string][]byte{}
			}
			do(func() error {
				return q.Checkpoint(o.full, []byte(strconv.Itoa(i)), func(k, v []byte) error {
					if v == nil {
						delete(state, string(k))
					} else {
						state[string(k)] = bytes.Clone(v)
					}
					return nil
				})
			})
			drain() // records rendered before the checkpoint are the host's to deliver
			ckLens = map[string]int{}
			for name, l := range run.logs {
				ckLens[name] = len(l)
			}
			ckPos = i
		}
		if crash[i] && !crashed[i] && ckPos >= 0 {
			crashed[i] = true
			// kill: what was published after the checkpoint is cut back
			// (a state dir truncates its outputs), the input resumes after it.
			for name := range run.logs {
				run.logs[name] = run.logs[name][:ckLens[name]]
			}
			start()
			var pos []byte
			keys := make([]string, 0, len(state))
			for k := range state {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p, err := q.Restore([]byte(k), state[k])
				if err != nil {
					t.Fatal(err)
				}
				if p != nil {
					pos = p
				}
			}
			if err := q.FinishRestore(); err != nil {
				t.Fatal(err)
			}
			if string(pos) != strconv.Itoa(ckPos) {
				t.Fatalf("restored position %q, want %d", pos, ckPos)
			}
			i = ckPos
		}
	}
	do(q.Close)
	drain()
	run.stats = q.Stats()
	run.own, _ = q.ViewStats(o.primary)
	return run
}

var viewsSeed = flag.Uint64("views.seed", 0, "seed of TestViewGraphMetamorphic (0: the clock)")

// TestViewGraphMetamorphic holds every query of a three-view graph to one
// reference run, byte for byte over the full changelogs, under output
// bounds, partial pulls, full and incremental checkpoints and restarts
// from random checkpoints.
func TestViewGraphMetamorphic(t *testing.T) {
	seed := *viewsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -views.seed=%d)", seed, seed)
	evs := viewEdgeEvents(seed, 3000)
	for _, primary := range []string{"v2", "v3"} {
		ref := runViews(t, viewOpts{primary: primary, script: viewEdgeSQL, eventsIn: evs})
		if ref.late == 0 {
			t.Fatal("the history has no late event")
		}
		if ref.own.Late != 0 {
			t.Fatalf("%s: %d rows of a view were late at their reader", primary, ref.own.Late)
		}
		if ref.stats.Late != int64(ref.late) {
			t.Fatalf("%s: Stats().Late = %d, but %d events were handed to OnLate", primary, ref.stats.Late, ref.late)
		}
		for _, name := range ref.queries() {
			if len(ref.logs[name]) < 20 {
				t.Fatalf("%s published only %d records", name, len(ref.logs[name]))
			}
		}
		if primary == "v3" && len(ref.logs) != 3 {
			t.Fatalf("logs of %d queries, want 3", len(ref.logs))
		}
		r := rand.New(rand.NewPCG(seed, uint64(len(primary))))
		for trial := 0; trial < 12; trial++ {
			o := viewOpts{primary: primary, script: viewEdgeSQL, eventsIn: evs, full: trial%2 == 0,
				pull: trial%3 != 0, maxPend: 1 + r.IntN(5)}
			for k := 0; k < 1+r.IntN(6); k++ {
				c := r.IntN(len(evs))
				o.ckptAt = append(o.ckptAt, c)
				if r.IntN(2) == 0 {
					o.crashAt = append(o.crashAt, c+r.IntN(400))
				}
			}
			got := runViews(t, o)
			for _, name := range ref.queries() {
				if d := firstDiff(ref.logs[name], got.logs[name]); d != "" {
					t.Fatalf("seed %d primary %s trial %d (checkpoints %v, crashes %v) query %s: %s", seed, primary, trial, o.ckptAt, o.crashAt, name, d)
				}
			}
		}
	}
}

func (r viewRun) queries() []string {
	var names []string
	for n := range r.logs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func firstDiff(a, b []string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d:\n  want %s\n  got  %s", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d records, want %d", len(b), len(a))
	}
	return ""
}

// TestViewEdgeCells checks the edge cells of the view's rows as they meet
// the reader's GROUP BY: a NaN, an infinity and NULL sum are one group
// (key null), -0.0 and 0.0 one (key 0.0), and a repaired string's group is
// the repaired text's; the reader's sums over the view's exact decimals
// equal the sums over the events.
func TestViewEdgeCells(t *testing.T) {
	eng, _ := ubik.Open(ubik.DefaultOptions())
	script := `CREATE SOURCE ev (g VARCHAR, d DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW v AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, sum(d) AS s, count(*) AS n
  FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND);
SELECT s, count(*) AS seconds, sum(n) AS n, min(g) AS g FROM v GROUP BY s`
	var recs []string
	q, err := eng.Start(script, ubik.QueryOptions{Name: "query", OnRecord: func(r changelog.Record) error {
		recs = append(recs, string(r.Key)+" "+string(r.Value))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"g":"a","d":"NaN","ts":"2026-01-01 00:00:00"}`,
		`{"g":"b","d":Infinity,"ts":"2026-01-01 00:00:01"}`,
		`{"g":"c","d":null,"ts":"2026-01-01 00:00:02"}`,
		`{"g":"d","d":-Infinity,"ts":"2026-01-01 00:00:03"}`,
		`{"g":"e","d":-0.0,"ts":"2026-01-01 00:00:04"}`,
		`{"g":"f","d":0.0,"ts":"2026-01-01 00:00:05"}`,
		"{\"g\":\"\xff\",\"d\":1.5,\"ts\":\"2026-01-01 00:00:06\"}",
		`{"g":"\ufffd","d":1.5,"ts":"2026-01-01 00:00:07"}`,
		`{"g":"z","d":1,"ts":"2026-01-01 00:00:09"}`,
	}
	for _, l := range lines {
		if err := q.Push([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, r := range recs {
		k, v, _ := strings.Cut(r, " ")
		last[k] = v
	}
	want := map[string]string{
		`[null]`: `{"s": null, "seconds": 4, "n": 4, "g": "a"}`,
		`[0.0]`:  `{"s": 0.0, "seconds": 2, "n": 2, "g": "e"}`,
		`[1.5]`:  `{"s": 1.5, "seconds": 2, "n": 2, "g": "\ufffd"}`,
		`[1.0]`:  `{"s": 1.0, "seconds": 1, "n": 1, "g": "z"}`,
	}
	if len(last) != len(want) {
		t.Errorf("groups %v, want %v", last, want)
	}
	for k, v := range want {
		if last[k] != v {
			t.Errorf("key %s: %s, want %s", k, last[k], v)
		}
	}
}

// TestViewRefusals: the root API's errors for a graph it cannot run.
func TestViewRefusals(t *testing.T) {
	eng, _ := ubik.Open(ubik.DefaultOptions())
	script := `CREATE SOURCE ev (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW v AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND);
CREATE VIEW r AS SELECT g, sum(n) AS n FROM v GROUP BY g;
CREATE SINK rs FROM r WITH (path = 'r.tsv');`
	// v feeds r: pulled with Next it could not feed r in order.
	if _, err := eng.Start(script, ubik.QueryOptions{Name: "v", With: []string{"r"}}); err == nil || !strings.Contains(err.Error(), "callback") {
		t.Errorf("pulling a view that feeds another: %v", err)
	}
	if _, err := eng.Start(script, ubik.QueryOptions{Name: "r", With: []string{"nope"}, OnRecord: func(changelog.Record) error { return nil }}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown With: %v", err)
	}
	// With a callback, both run and r's records name r.
	var names []string
	q, err := eng.Start(script, ubik.QueryOptions{Name: "v", With: []string{"r"}, OnRecord: func(r changelog.Record) error {
		names = append(names, r.Meta.Query)
		return nil
	}, OnViewRecord: func(r changelog.Record) error { names = append(names, r.Meta.Query); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Queries(); fmt.Sprint(got) != "[v r]" {
		t.Errorf("Queries() = %v", got)
	}
	q.Push([]byte(`{"g":"a","ts":"2026-01-01 00:00:00"}`))
	q.Push([]byte(`{"g":"a","ts":"2026-01-01 00:00:05"}`))
	q.Close()
	if fmt.Sprint(names) != "[v r v r]" {
		t.Errorf("records of %v", names)
	}
	if st, ok := q.ViewStats("r"); !ok || st.RecordsOut != 2 || st.EventsIn != 2 {
		t.Errorf("ViewStats(r) = %+v, %v", st, ok)
	}
}
