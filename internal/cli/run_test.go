package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/ubiksql/ubik"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func runTestEnv(stdin string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, &out, &errb
}

// TestRunExample runs the README's first command in process.
func TestRunExample(t *testing.T) {
	env, out, errb := runTestEnv("")
	dir := t.TempDir()
	stats := filepath.Join(dir, "stats.json")
	dead := filepath.Join(dir, "dead.jsonl")
	code := Main(context.Background(), env, []string{"run", "../../examples/merchant_totals.sql",
		"--input", "../../examples/events.jsonl", "--stats-json", stats, "--dead-letter", dead})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "\t")
		if !ok || !strings.HasPrefix(k, `["`) || !strings.HasPrefix(v, `{"merchant": "`) {
			t.Fatalf("bad line %q", l)
		}
	}
	var s summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.EventsRead != 401 || s.Malformed != 1 || int(s.RecordsEmitted) != len(lines) || s.WindowsFinalized != s.RecordsEmitted {
		t.Fatalf("summary %+v with %d lines", s, len(lines))
	}
	d, _ := os.ReadFile(dead)
	var rec struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(d), &rec); err != nil || rec.Line != 124 || !strings.Contains(rec.Error, `"amount"`) {
		t.Fatalf("dead letter %s (%v)", d, err)
	}
	if !strings.Contains(errb.String(), "401 events read, 1 malformed") {
		t.Fatalf("summary line missing: %s", errb)
	}
}

func writeFile(t *testing.T, name, text string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const cliQuery = `CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`

func TestRunJSONLStrictLate(t *testing.T) {
	sql := writeFile(t, "q.sql", cliQuery)
	input := `{"k":"a","ts":"2026-07-18 10:00:01"}
{"k":"a","ts":"2026-07-18 10:00:12"}
{"k":"a","ts":"2026-07-18 10:00:02"}
{"k":"a","ts":"bad"}
{"k":"a","ts":"2026-07-18 10:00:13"}
`
	// jsonl envelope, late output, malformed reported with its line.
	env, out, errb := runTestEnv(input)
	late := filepath.Join(t.TempDir(), "late.jsonl")
	if code := Main(context.Background(), env, []string{"run", sql, "--format", "jsonl", "--late-output", late}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var env1 struct {
		Key       []any          `json:"key"`
		Value     map[string]any `json:"value"`
		Query     string         `json:"query"`
		Final     bool           `json:"final"`
		Revision  int            `json:"revision"`
		Positions []int          `json:"window_positions"`
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if err := json.Unmarshal([]byte(first), &env1); err != nil {
		t.Fatalf("%q: %v", first, err)
	}
	if env1.Query != "q" || !env1.Final || env1.Revision != 1 || len(env1.Positions) != 1 || env1.Positions[0] != 1 || env1.Value["n"].(float64) != 1 {
		t.Fatalf("envelope %+v", env1)
	}
	if !strings.Contains(errb.String(), "stdin:4: malformed event") || !strings.Contains(errb.String(), "1 late") {
		t.Fatalf("stderr %s", errb)
	}
	lb, _ := os.ReadFile(late)
	if !strings.Contains(string(lb), `{"query": "q", "key": ["a", "2026-07-18 10:00:00"], "reason": "window already final"`) || !strings.Contains(string(lb), `"row": {"k": "a", "ts": "2026-07-18 10:00:02"}`) {
		t.Fatalf("late output %s", lb)
	}

	// --strict stops at the first malformed event and names it; it is
	// --max-bad 0, so the exit status is the bad-input one.
	env, _, errb = runTestEnv(input)
	if code := Main(context.Background(), env, []string{"run", sql, "--strict"}); code != ExitBadInput || !strings.Contains(errb.String(), "stdin:4:") {
		t.Fatalf("strict: exit %d, %s", code, errb)
	}
}

func TestRunSQLErrorHasCaret(t *testing.T) {
	sql := writeFile(t, "bad.sql", "CREATE SOURCE ev (k VARCHAR) WITH (format = 'jsonl');\nSELECT k, count(*) FROM ev GROUP BY kk")
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql}); code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := "GROUP BY kk\n" + strings.Repeat(" ", 36) + "^"
	if !strings.Contains(errb.String(), "line 2:37") || !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr:\n%s", errb)
	}
}

func TestExplainDedup(t *testing.T) {
	sql := writeFile(t, "hourly.sql", `CREATE SOURCE u (id VARCHAR, c VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts)
		WITH (dedup_key = 'id', dedup_within = '1 hour');
		SELECT c, count(*) FROM u GROUP BY c, TUMBLE(ts, INTERVAL '1' HOUR)`)
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "dedup: first copy of each id wins within 01:00:00") {
		t.Fatalf("explain:\n%s", out)
	}
}

func TestExplain(t *testing.T) {
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", "../../examples/merchant_totals.sql"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{
		"source events (", "watermark event_time - 00:00:05",
		"window: TUMBLE(event_time, size 00:01:00)",
		"key #0: merchant VARCHAR", "key #1: window_start TIMESTAMP",
		"agg #3: sum(amount DOUBLE) -> DOUBLE", "emit: EARLY every 00:00:01",
		"state per live (group, window):", "window cells at key positions [1]",
		"dataflow:\nsegment 0:\n  #0 decode events; out any\n  #1 exchange events <- #0; out hash(merchant) by group identity\n",
		"segment 1 (reads exchange #1):\n  #2 aggregate merchant_totals <- #1 [hash(merchant) by group identity]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	m := newQueryMetrics("q1")
	stop, addr, err := serveMetrics(context.Background(), io.Discard, "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var st ubik.Stats
	st.EventsIn, st.Malformed, st.Late, st.RecordsOut, st.LiveGroups, st.StateBytes = 10, 2, 1, 7, 3, 999
	st.Watermark = time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	st.Duplicates, st.DedupKeys = 4, 12
	m.publish(st)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ubik_events_read_total{query="q1"} 10`, `ubik_events_malformed_total{query="q1"} 2`,
		`ubik_events_late_total{query="q1"} 1`, `ubik_records_emitted_total{query="q1"} 7`,
		`ubik_live_groups{query="q1"} 3`, `ubik_state_bytes{query="q1"} 999`,
		`ubik_watermark_seconds{query="q1"} 1.7843688e+09`, `ubik_watermark_lag_seconds{query="q1"}`,
		`ubik_events_duplicate_total{query="q1"} 4`, `ubik_dedup_keys{query="q1"} 12`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if _, _, err := serveMetrics(context.Background(), io.Discard, ":0", m); err == nil {
		t.Error("an address without a host was accepted")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunLiveStdin: reading a stream that goes quiet, early records still
// come out on time and reach stdout, before the input ends.
func TestRunLiveStdin(t *testing.T) {
	sql := writeFile(t, "live.sql", `CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
		SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '50' MILLISECOND`)
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	var errb bytes.Buffer
	env := &Env{Stdin: pr, Stdout: out, Stderr: &errb, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() { done <- Main(context.Background(), env, []string{"run", sql, "--format", "jsonl"}) }()
	io.WriteString(pw, `{"k":"a","ts":"2026-07-18 10:00:01"}`+"\n"+`{"k":"a","ts":"2026-07-18 10:00:02"}`+"\n")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"n": 2}, "query": "live", "final": false`) {
		if time.Now().After(deadline) {
			t.Fatalf("no early record while the input is open; stdout: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pw.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"final": true`) {
		t.Fatalf("no final record after the input ended: %q", out.String())
	}
}

// TestRunStatsJSONCompleted: a run over a state dir whose run already
// completed still writes --stats-json, with the completed run's counters
// (from the checkpoint). A run killed after its last checkpoint, while it
// wrote the summary, had left the file empty, and the rerun that a
// supervisor makes wrote nothing.
func TestRunStatsJSONCompleted(t *testing.T) {
	dir := t.TempDir()
	stats := filepath.Join(dir, "stats.json")
	args := []string{"run", "../../examples/merchant_totals.sql", "--input", "../../examples/events.jsonl",
		"--output", filepath.Join(dir, "out.tsv"), "--state-dir", filepath.Join(dir, "state"), "--stats-json", stats, "--quiet"}
	read := func() summary {
		t.Helper()
		var s summary
		b, err := os.ReadFile(stats)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v: %q", stats, err, b)
		}
		return s
	}
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	first := read()
	for _, damage := range []func() error{
		func() error { return os.WriteFile(stats, nil, 0o644) }, // truncated by a kill mid-write
		func() error { return os.Remove(stats) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		env, _, errb := runTestEnv("")
		if code := Main(context.Background(), env, args); code != 0 || !strings.Contains(errb.String(), "already completed") {
			t.Fatalf("rerun: exit %d: %s", code, errb)
		}
		again := read()
		if again.EventsRead != first.EventsRead || again.Malformed != first.Malformed || again.RecordsEmitted != first.RecordsEmitted ||
			again.WindowsFinalized != first.WindowsFinalized || again.EventsRead != 401 {
			t.Errorf("rerun's summary %+v, the run's %+v", again, first)
		}
	}
	if _, err := os.Stat(stats + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("a temporary summary was left: %v", err)
	}
}

// TestLateOutputAllColumns: a late event in --late-output carries every
// column its source declares, by name, with its value, also the columns
// the query does not read (the decoder skips those for the query); for a
// temporal join, the late stream event and the late table row each carry
// their own source's columns.
func TestLateOutputAllColumns(t *testing.T) {
	sql := writeFile(t, "q.sql", `CREATE SOURCE ev (id VARCHAR, k VARCHAR, v BIGINT, note VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`)
	in := `{"id":"a","k":"x","v":1,"note":"hi","ts":"2026-07-18 10:00:01"}
{"id":"b","k":"x","v":2,"note":"yo","ts":"2026-07-18 10:00:30"}
{"id":"c","k":"x","v":3,"note":"late","ts":"2026-07-18 10:00:02"}
`
	late := filepath.Join(t.TempDir(), "late.jsonl")
	if _, errb, code := runArgs(t, in, "run", sql, "--late-output", late); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	b, _ := os.ReadFile(late)
	if want := `"row": {"id": "c", "k": "x", "v": 3, "note": "late", "ts": "2026-07-18 10:00:02"}`; !strings.Contains(string(b), want) {
		t.Fatalf("late output %s\nwant it to hold %s", b, want)
	}

	dir := t.TempDir()
	table := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(table, []byte(`{"k":"x","price":5,"label":"five","ts":"2026-07-18 10:00:00"}
{"k":"x","price":6,"label":"six","ts":"2026-07-18 10:01:00"}
{"k":"x","price":4,"label":"old","ts":"2026-07-18 09:00:00"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sql = writeFile(t, "j.sql", `CREATE SOURCE ev (id VARCHAR, k VARCHAR, v BIGINT, note VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE TABLE t (k VARCHAR, price BIGINT, label VARCHAR, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR ts AS ts) WITH (format = 'jsonl', path = '`+table+`');
SELECT e.k AS k, sum(t.price) AS p FROM ev e JOIN t FOR SYSTEM_TIME AS OF e.ts ON e.k = t.k GROUP BY e.k, TUMBLE(e.ts, INTERVAL '10' SECOND)`)
	in = `{"id":"a","k":"x","v":1,"note":"hi","ts":"2026-07-18 10:00:01"}
{"id":"b","k":"x","v":2,"note":"yo","ts":"2026-07-18 10:02:00"}
{"id":"c","k":"x","v":3,"note":"late","ts":"2026-07-18 10:00:02"}
`
	late = filepath.Join(dir, "late.jsonl")
	if _, errb, code := runArgs(t, in, "run", sql, "--late-output", late); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	b, _ = os.ReadFile(late)
	for _, want := range []string{`"row": {"id": "c", "k": "x", "v": 3, "note": "late", "ts": "2026-07-18 10:00:02"}`,
		`"row": {"k": "x", "price": 4, "label": "old", "ts": "2026-07-18 09:00:00"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("late output %s\nwant it to hold %s", b, want)
		}
	}
}

// TestDuplicatesOneCount: the same input reports the same duplicates in a
// query over the stream and in a temporal join of it. A copy of an event
// that arrives after the join's watermark passed its time is a duplicate
// there too (the dedup runs first in a query without a join), not an event
// late at the join.
func TestDuplicatesOneCount(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(table, []byte(`{"k":"x","price":5,"ts":"2026-07-18 09:00:00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `CREATE SOURCE ev (id VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl', dedup_key = 'id', dedup_within = '1 hour');
CREATE TABLE t (k VARCHAR, price BIGINT, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR ts AS ts) WITH (format = 'jsonl', path = '` + table + `');
`
	// e1 is copied at once (a copy in time) and again after the watermark
	// passed it (a late copy); e3 is late and no copy.
	in := `{"id":"e1","k":"x","ts":"2026-07-18 10:00:01"}
{"id":"e1","k":"x","ts":"2026-07-18 10:00:01"}
{"id":"e2","k":"x","ts":"2026-07-18 10:00:30"}
{"id":"e1","k":"x","ts":"2026-07-18 10:00:01"}
{"id":"e3","k":"x","ts":"2026-07-18 10:00:02"}
`
	for _, q := range []string{
		`SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`,
		`SELECT e.k AS k, sum(t.price) AS p FROM ev e JOIN t FOR SYSTEM_TIME AS OF e.ts ON e.k = t.k GROUP BY e.k, TUMBLE(e.ts, INTERVAL '10' SECOND)`,
	} {
		stats := filepath.Join(dir, "stats.json")
		sql := writeFile(t, "q.sql", src+q)
		if _, errb, code := runArgs(t, in, "run", sql, "--stats-json", stats); code != 0 {
			t.Fatalf("exit %d: %s", code, errb)
		}
		var s struct {
			Duplicates int64 `json:"duplicates"`
			Late       int64 `json:"late"`
		}
		b, _ := os.ReadFile(stats)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.Duplicates != 2 || s.Late != 1 {
			t.Errorf("%s: %d duplicates, %d late; want 2 and 1\n%s", q, s.Duplicates, s.Late, b)
		}
	}
}
