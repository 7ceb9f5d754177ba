package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/internal/crashtest"
)

const joinRunSQL = `CREATE SOURCE usage (customer VARCHAR, plan VARCHAR, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl');
CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '1' SECOND)
  WITH (format = 'jsonl', path = '%s');
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(u.qty * p.price) AS charge, count(*) AS events
FROM usage u %s JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' MINUTE)`

// TestRunTemporalJoin runs `ubik run` with a stream file and a table file:
// mid-minute price changes, a late table row (routed to --late-output), a
// malformed one (--dead-letter), an event with no price (dropped by JOIN,
// kept by LEFT JOIN).
func TestRunTemporalJoin(t *testing.T) {
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.jsonl")
	os.WriteFile(prices, []byte(`{"plan":"pro","price":"1.000000","valid_from":"2026-07-18 10:00:00"}
{"plan":"basic","price":"0.100000","valid_from":"2026-07-18 10:00:00"}
{"plan":"basic","price":"0.200000","valid_from":"2026-07-18 10:00:30"}
{"plan":"basic","price":"5.000000","valid_from":"2026-07-18 10:00:10"}
{"plan":"pro","price":"oops","valid_from":"2026-07-18 10:00:40"}
`), 0o644)
	usage := filepath.Join(dir, "usage.jsonl")
	os.WriteFile(usage, []byte(`{"customer":"c1","plan":"basic","qty":"2.00","ts":"2026-07-18 10:00:20"}
{"customer":"c1","plan":"basic","qty":"1.00","ts":"2026-07-18 10:00:40"}
{"customer":"c2","plan":"pro","qty":"3.50","ts":"2026-07-18 10:00:50"}
{"customer":"c2","plan":"free","qty":"9.00","ts":"2026-07-18 10:00:55"}
{"customer":"c1","plan":"basic","qty":"4.00","ts":"2026-07-18 10:01:30"}
`), 0o644)
	for _, tc := range []struct {
		kind string
		want string
	}{
		{"", `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "m": "2026-07-18 10:00:00", "charge": 0.40000000, "events": 2}
["c2", "2026-07-18 10:00:00"]	{"customer": "c2", "m": "2026-07-18 10:00:00", "charge": 3.50000000, "events": 1}
["c1", "2026-07-18 10:01:00"]	{"customer": "c1", "m": "2026-07-18 10:01:00", "charge": 0.80000000, "events": 1}
`},
		{"LEFT", `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "m": "2026-07-18 10:00:00", "charge": 0.40000000, "events": 2}
["c2", "2026-07-18 10:00:00"]	{"customer": "c2", "m": "2026-07-18 10:00:00", "charge": 3.50000000, "events": 2}
["c1", "2026-07-18 10:01:00"]	{"customer": "c1", "m": "2026-07-18 10:01:00", "charge": 0.80000000, "events": 1}
`},
	} {
		t.Run("join="+tc.kind, func(t *testing.T) {
			sql := filepath.Join(dir, "q"+tc.kind+".sql")
			os.WriteFile(sql, fmt.Appendf(nil, joinRunSQL, prices, tc.kind), 0o644)
			late, dead, stats := filepath.Join(dir, "late"+tc.kind), filepath.Join(dir, "dead"+tc.kind), filepath.Join(dir, "stats"+tc.kind)
			env, out, errb := runTestEnv("")
			// --threads does not apply to a join (it runs on one thread).
			code := Main(context.Background(), env, []string{"run", sql, "--input", usage, "--late-output", late, "--dead-letter", dead, "--stats-json", stats, "--threads", "3"})
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			if out.String() != tc.want {
				t.Fatalf("changelog:\n%s\nwant:\n%s", out, tc.want)
			}
			env2, out2, errb2 := runTestEnv("")
			if code := Main(context.Background(), env2, []string{"run", sql, "--input", usage, "--threads", "3"}); code != 0 || out2.String() != tc.want {
				t.Fatalf("--threads 3: exit %d, changelog:\n%s%s", code, out2, errb2)
			}
			l, _ := os.ReadFile(late)
			if !strings.Contains(string(l), `"reason": "table row behind the table watermark: not applied"`) || !strings.Contains(string(l), `"line": 4`) ||
				!strings.Contains(string(l), `5.000000`) {
				t.Fatalf("late output: %s", l)
			}
			d, _ := os.ReadFile(dead)
			if !strings.Contains(string(d), `"line": 5`) || !strings.Contains(string(d), "prices.jsonl") {
				t.Fatalf("dead letters: %s", d)
			}
			var s summary
			b, _ := os.ReadFile(stats)
			if err := json.Unmarshal(b, &s); err != nil || s.Join == nil {
				t.Fatalf("summary %s: %v", b, err)
			}
			// Both inputs are counted: the stream's events and the
			// table's rows, the totals their sums.
			wantIn := []inputSummary{{"usage", 5, 0, 0}, {"prices", 5, 1, 1}}
			if s.EventsRead != 10 || s.Malformed != 1 || s.Late != 1 || !slices.Equal(s.Inputs, wantIn) {
				t.Fatalf("summary %+v, want inputs %+v", s, wantIn)
			}
			if s.Join.TableRows != 5 || s.Join.TableLate != 1 || s.Join.TableMalformed != 1 || s.Join.Joined != 4 || s.Join.Unmatched != 1 {
				t.Fatalf("summary %+v %+v", s, *s.Join)
			}
			if !strings.Contains(errb.String(), "10 events read (usage 5, prices 5), 1 malformed (usage 0, prices 1), 0 eval errors, 1 late (usage 0, prices 1), ") ||
				!strings.Contains(errb.String(), "join: 4 events joined, 1 unmatched") {
				t.Fatalf("summary line: %s", errb)
			}
		})
	}
}

// joinCrashInputs writes a table of price versions (several per plan, in
// order within its delay) and n usage events (shuffled within 5s).
func joinCrashInputs(t *testing.T, dir string, n int) (string, string) {
	t.Helper()
	r := rand.New(rand.NewPCG(8, 9))
	prices := filepath.Join(dir, "prices.jsonl")
	var pb bytes.Buffer
	for s := 0; s < 4000; s += 1 + r.IntN(20) {
		fmt.Fprintf(&pb, `{"plan":"p%d","price":"%d.%06d","valid_from":"2026-07-18 10:%02d:%02d"}`+"\n", r.IntN(40), r.IntN(5), r.IntN(1_000_000), s/60%60, s%60)
	}
	os.WriteFile(prices, pb.Bytes(), 0o644)
	usage := filepath.Join(dir, "usage.jsonl")
	f, err := os.Create(usage)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 0; i < n; i++ {
		ms := int64(i)*3600_000/int64(n) - r.Int64N(4000)
		if ms < 0 {
			ms = 0
		}
		fmt.Fprintf(w, `{"customer":"c%d","plan":"p%d","qty":"%d.%02d","ts":"2026-07-18 10:%02d:%02d.%03d"}`+"\n",
			r.IntN(200), r.IntN(45), r.IntN(100), r.IntN(100), ms/60000%60, ms/1000%60, ms%1000)
	}
	w.Flush()
	f.Close()
	return prices, usage
}

// TestKill9ResumeJoin kills `ubik run --state-dir` of a temporal join
// with SIGKILL at random points and reruns it: the changelog must equal
// an uninterrupted run's byte for byte (the versions and the waiting
// events are in the checkpoint; the table is not read again).
func TestKill9ResumeJoin(t *testing.T) {
	bin := buildUbik(t)
	dir := t.TempDir()
	prices, usage := joinCrashInputs(t, dir, 300_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, joinRunSQL, prices, "LEFT"), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", usage, "--output", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref.jsonl")
	if out, err := exec.Command(bin, args(ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// A run that ends before its kill starts over from scratch, so the
	// next one can be interrupted.
	const kills = 6
	crashtest.Loop(t, r, kills, 30*time.Millisecond, 430*time.Millisecond,
		func() *exec.Cmd { return exec.Command(bin, args(got, state)...) },
		func() { os.RemoveAll(state) })
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	refB, _ := os.ReadFile(ref)
	gotB, _ := os.ReadFile(got)
	if len(refB) == 0 || !bytes.Equal(refB, gotB) {
		t.Fatalf("after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", kills, len(refB), len(gotB))
	}
}

func TestJoinMetricsAndExplain(t *testing.T) {
	m := newQueryMetrics("q1")
	m.setInputs([]string{"usage", "prices"})
	stop, addr, err := serveMetrics(context.Background(), io.Discard, "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var st ubik.Stats
	st.Watermark = minInt64
	st.EventsIn, st.Malformed, st.Late, st.Table.Malformed = 20, 2, 4, 3
	st.Table.RowsIn, st.Table.Late, st.Join.Events, st.Join.Joined, st.Join.Unmatched, st.Join.Buffered, st.Join.Versions = 9, 1, 20, 15, 5, 3, 8
	st.Join.TableWM = time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	m.publish(st)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ubik_table_rows_read_total{query="q1"} 9`, `ubik_table_rows_late_total{query="q1"} 1`,
		// The totals are both inputs' sums, as in the run summary.
		`ubik_events_read_total{query="q1"} 29`, `ubik_events_malformed_total{query="q1"} 5`, `ubik_events_late_total{query="q1"} 5`,
		`ubik_input_events_read_total{input="usage",query="q1"} 20`, `ubik_input_events_read_total{input="prices",query="q1"} 9`,
		`ubik_input_events_malformed_total{input="prices",query="q1"} 3`, `ubik_input_events_late_total{input="usage",query="q1"} 4`,
		`ubik_join_events_joined_total{query="q1"} 15`, `ubik_join_events_unmatched_total{query="q1"} 5`,
		`ubik_join_buffered_events{query="q1"} 3`, `ubik_join_versions{query="q1"} 8`,
		`ubik_table_watermark_seconds{query="q1"} 1.7843688e+09`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, joinRunSQL, "p.jsonl", "LEFT"), 0o644)
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"table prices (", "primary key (plan)", "temporal join (left) prices AS p FOR SYSTEM_TIME AS OF u.ts",
		"events wait until the table watermark (valid_from - 00:00:01) passes their time, at most 1048576"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestRunTemporalJoinRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, sql := range map[string]string{
		"no path": `CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE TABLE t (k VARCHAR, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt);
SELECT s.k, count(*) FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k GROUP BY s.k`,
		"kafka table": `CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE TABLE t (k VARCHAR, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt) WITH (connector = 'kafka', topic = 'prices');
SELECT s.k, count(*) FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k GROUP BY s.k`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".sql")
		os.WriteFile(p, []byte(sql), 0o644)
		env, _, errb := runTestEnv(`{"k":"a","ts":"2026-07-18 10:00:00"}` + "\n")
		if code := Main(context.Background(), env, []string{"run", p}); code != 2 {
			t.Errorf("%s: exit %d, want 2 (usage): %s", name, code, errb)
		}
		want := map[string]string{"no path": "has no path option", "kafka table": "table t is a Kafka topic (connector = 'kafka'), which a Kafka run reads"}[name]
		if !strings.Contains(errb.String(), want) {
			t.Errorf("%s: %s", name, errb)
		}
	}
}

// TestRunTemporalJoinTableLineTooLong: a line of the table file longer
// than a record may be is malformed, with its line number, as on the
// stream, and the load goes on (it stopped the run).
func TestRunTemporalJoinTableLineTooLong(t *testing.T) {
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.jsonl")
	long := `{"plan":"basic","note":"` + strings.Repeat("z", maxLineBytes) + `","price":"9.000000","valid_from":"2026-07-18 10:00:05"}`
	os.WriteFile(prices, []byte(`{"plan":"pro","price":"1.000000","valid_from":"2026-07-18 10:00:00"}
`+long+`
{"plan":"basic","price":"0.100000","valid_from":"2026-07-18 10:00:00"}
`), 0o644)
	usage := filepath.Join(dir, "usage.jsonl")
	os.WriteFile(usage, []byte(`{"customer":"c1","plan":"basic","qty":"2.00","ts":"2026-07-18 10:00:20"}
{"customer":"c2","plan":"pro","qty":"3.50","ts":"2026-07-18 10:00:50"}
`), 0o644)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, joinRunSQL, prices, ""), 0o644)
	dead := filepath.Join(dir, "dead.jsonl")
	stdout, errb, code := runArgs(t, "", "run", sql, "--input", usage, "--dead-letter", dead)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	want := `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "m": "2026-07-18 10:00:00", "charge": 0.20000000, "events": 1}
["c2", "2026-07-18 10:00:00"]	{"customer": "c2", "m": "2026-07-18 10:00:00", "charge": 3.50000000, "events": 1}
`
	if stdout != want {
		t.Fatalf("changelog:\n%s\nwant:\n%s", stdout, want)
	}
	d, _ := os.ReadFile(dead)
	if !strings.Contains(string(d), `"line": 2`) || !strings.Contains(string(d), "prices.jsonl") || !strings.Contains(string(d), "longer than") {
		t.Fatalf("dead letters: %s", d)
	}
}
