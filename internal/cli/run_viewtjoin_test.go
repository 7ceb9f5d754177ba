package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
)

// A view whose body is a temporal join, read by another query: the run
// reads the table file first, then the stream, and the reader sums the
// view's final rows.
const viewTJoinRunSQL = `CREATE SOURCE usage (customer VARCHAR, plan VARCHAR, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl');
CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '1' SECOND)
  WITH (format = 'jsonl', path = '%s');
CREATE VIEW minute_charge AS
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(u.qty * p.price) AS charge, count(*) AS events
FROM usage u %s JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW hourly AS
SELECT customer, TUMBLE_START(m, INTERVAL '1' HOUR) AS h, sum(charge) AS charge, sum(events) AS events, count(*) AS minutes
FROM minute_charge GROUP BY customer, TUMBLE(m, INTERVAL '1' HOUR);`

func TestRunViewOverTemporalJoin(t *testing.T) {
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
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewTJoinRunSQL, prices, "LEFT"), 0o644)
	late, dead, stats, outDir := filepath.Join(dir, "late"), filepath.Join(dir, "dead"), filepath.Join(dir, "stats"), filepath.Join(dir, "out")
	env, _, errb := runTestEnv("")
	code := Main(context.Background(), env, []string{"run", sql, "--input", usage, "--output-dir", outDir,
		"--late-output", late, "--dead-letter", dead, "--stats-json", stats})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	minutes, _ := os.ReadFile(filepath.Join(outDir, "minute_charge.tsv"))
	wantMinutes := `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "m": "2026-07-18 10:00:00", "charge": 0.40000000, "events": 2}
["c2", "2026-07-18 10:00:00"]	{"customer": "c2", "m": "2026-07-18 10:00:00", "charge": 3.50000000, "events": 2}
["c1", "2026-07-18 10:01:00"]	{"customer": "c1", "m": "2026-07-18 10:01:00", "charge": 0.80000000, "events": 1}
`
	if string(minutes) != wantMinutes {
		t.Fatalf("minute_charge:\n%s\nwant:\n%s", minutes, wantMinutes)
	}
	hourly, _ := os.ReadFile(filepath.Join(outDir, "hourly.tsv"))
	wantHourly := `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "h": "2026-07-18 10:00:00", "charge": 1.20000000, "events": 3, "minutes": 2}
["c2", "2026-07-18 10:00:00"]	{"customer": "c2", "h": "2026-07-18 10:00:00", "charge": 3.50000000, "events": 2, "minutes": 1}
`
	if string(hourly) != wantHourly {
		t.Fatalf("hourly:\n%s\nwant:\n%s", hourly, wantHourly)
	}
	// The late table row is routed, the malformed one dead-lettered, with
	// the table file's name and line.
	l, _ := os.ReadFile(late)
	if !strings.Contains(string(l), `"reason": "table row behind the table watermark: not applied"`) || !strings.Contains(string(l), `"line": 4`) {
		t.Fatalf("late output: %s", l)
	}
	d, _ := os.ReadFile(dead)
	if !strings.Contains(string(d), `"line": 5`) || !strings.Contains(string(d), "prices.jsonl") {
		t.Fatalf("dead letters: %s", d)
	}
	var ss []summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &ss); err != nil || len(ss) != 2 {
		t.Fatalf("summary %s: %v", b, err)
	}
	s := ss[1]
	// The primary's summary counts both inputs.
	wantIn := []inputSummary{{"usage", 5, 0, 0}, {"prices", 5, 1, 1}}
	if s.Query != "hourly" || !slices.Equal(s.Inputs, wantIn) || s.Join == nil || s.Join.Joined != 4 || s.Join.Unmatched != 1 {
		t.Fatalf("summary %s, want inputs %+v", b, wantIn)
	}

	// --query hourly alone runs the view too, and reads the table.
	env2, out2, errb2 := runTestEnv("")
	if code := Main(context.Background(), env2, []string{"run", sql, "--input", usage, "--query", "hourly"}); code != 0 || out2.String() != wantHourly {
		t.Fatalf("--query hourly: exit %d, changelog:\n%s%s", code, out2, errb2)
	}
	// explain shows the join inside the graph.
	env3, out3, errb3 := runTestEnv("")
	if code := Main(context.Background(), env3, []string{"explain", sql}); code != 0 || !strings.Contains(out3.String(), "temporal join (left) prices AS p") {
		t.Fatalf("explain: exit %d:\n%s%s", code, out3, errb3)
	}
}

// TestKill9ResumeViewJoin kills `ubik run --state-dir` of a view with a
// temporal join and its reader at random points and reruns it: both
// changelogs must equal an uninterrupted run's byte for byte.
func TestKill9ResumeViewJoin(t *testing.T) {
	bin := buildUbik(t)
	dir := t.TempDir()
	prices, usage := joinCrashInputs(t, dir, 150_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewTJoinRunSQL, prices, ""), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", usage, "--output-dir", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref")
	if out, err := exec.Command(bin, args(ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// A run that ends before its kill starts over from scratch, so the
	// next one can be interrupted.
	const kills = 6
	crashtest.Loop(t, r, kills, 30*time.Millisecond, 430*time.Millisecond,
		func() *exec.Cmd { return exec.Command(bin, args(got, state)...) },
		func() { os.RemoveAll(state); os.RemoveAll(got) })
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for _, name := range []string{"minute_charge.jsonl", "hourly.jsonl"} {
		refB, _ := os.ReadFile(filepath.Join(ref, name))
		gotB, _ := os.ReadFile(filepath.Join(got, name))
		if len(refB) == 0 || !bytes.Equal(refB, gotB) {
			t.Fatalf("%s: after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", name, kills, len(refB), len(gotB))
		}
	}
}
