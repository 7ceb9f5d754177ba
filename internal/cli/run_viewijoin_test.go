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

// A view whose body is an interval join of two streams, read by another
// query: the run reads both stream files (the first from --input, the
// second from its path), and the reader sums the view's final rows.
const viewIJoinRunSQL = `CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl', path = '%s');
CREATE VIEW clicks_10m AS SELECT i.campaign, TUMBLE_START(c.ts, INTERVAL '10' MINUTE) AS w, count(*) AS clicks
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
GROUP BY i.campaign, TUMBLE(c.ts, INTERVAL '10' MINUTE) EMIT FINAL;
CREATE VIEW hourly AS SELECT campaign, TUMBLE_START(w, INTERVAL '1' HOUR) AS hour, sum(clicks) AS clicks
FROM clicks_10m GROUP BY campaign, TUMBLE(w, INTERVAL '1' HOUR);`

// viewIJoinDirectSQL aggregates the joined rows into hours in one query:
// the batch answer the reader must give.
const viewIJoinDirectSQL = `CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl', path = '%s');
CREATE VIEW hourly AS SELECT i.campaign, TUMBLE_START(c.ts, INTERVAL '1' HOUR) AS hour, count(*) AS clicks
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
GROUP BY i.campaign, TUMBLE(c.ts, INTERVAL '1' HOUR);`

func TestRunViewOverIntervalJoin(t *testing.T) {
	dir := t.TempDir()
	clicks := filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(clicks, []byte(`{"impression_id":1,"ts":"2026-07-18 10:01:00"}
{"impression_id":1,"ts":"2026-07-18 10:04:59"}
{"impression_id":2,"ts":"2026-07-18 10:09:00"}
{"impression_id":1,"ts":"2026-07-18 10:00:30"}
{"impression_id":"x","ts":"2026-07-18 10:09:30"}
{"impression_id":3,"ts":"2026-07-18 10:12:00"}
{"impression_id":9,"ts":"2026-07-18 10:13:00"}
{"impression_id":2,"ts":"2026-07-18 10:20:00"}
`), 0o644)
	imps := filepath.Join(dir, "impressions.jsonl")
	os.WriteFile(imps, []byte(`{"id":1,"campaign":"spring","ts":"2026-07-18 10:00:00"}
{"id":2,"campaign":"spring","ts":"2026-07-18 10:05:00"}
{"id":3,"campaign":"autumn","ts":"2026-07-18 10:08:00"}
`), 0o644)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewIJoinRunSQL, clicks), 0o644)
	late, dead, stats, outDir := filepath.Join(dir, "late"), filepath.Join(dir, "dead"), filepath.Join(dir, "stats"), filepath.Join(dir, "out")
	env, _, errb := runTestEnv("")
	code := Main(context.Background(), env, []string{"run", sql, "--input", imps, "--output-dir", outDir,
		"--late-output", late, "--dead-letter", dead, "--stats-json", stats})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	tenMin, _ := os.ReadFile(filepath.Join(outDir, "clicks_10m.tsv"))
	wantTen := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "w": "2026-07-18 10:00:00", "clicks": 3}
["autumn", "2026-07-18 10:10:00"]	{"campaign": "autumn", "w": "2026-07-18 10:10:00", "clicks": 1}
`
	if string(tenMin) != wantTen {
		t.Fatalf("clicks_10m:\n%s\nwant:\n%s", tenMin, wantTen)
	}
	hourly, _ := os.ReadFile(filepath.Join(outDir, "hourly.tsv"))
	wantHourly := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "hour": "2026-07-18 10:00:00", "clicks": 3}
["autumn", "2026-07-18 10:00:00"]	{"campaign": "autumn", "hour": "2026-07-18 10:00:00", "clicks": 1}
`
	if string(hourly) != wantHourly {
		t.Fatalf("hourly:\n%s\nwant:\n%s", hourly, wantHourly)
	}
	// The late click is routed, the malformed one dead-lettered, with the
	// clicks file's name and line.
	l, _ := os.ReadFile(late)
	if !strings.Contains(string(l), `"line": 4`) || !strings.Contains(string(l), "behind the watermark of clicks") {
		t.Fatalf("late output: %s", l)
	}
	d, _ := os.ReadFile(dead)
	if !strings.Contains(string(d), `"line": 5`) || !strings.Contains(string(d), "clicks.jsonl") {
		t.Fatalf("dead letters: %s", d)
	}
	var ss []summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &ss); err != nil || len(ss) != 2 {
		t.Fatalf("summary %s: %v", b, err)
	}
	// The primary's summary counts both inputs.
	wantIn := []inputSummary{{"impressions", 3, 0, 0}, {"clicks", 8, 1, 1}}
	if s := ss[1]; s.Query != "hourly" || !slices.Equal(s.Inputs, wantIn) || s.Interval == nil || s.Interval.Matches != 4 || s.Interval.LateRight != 1 {
		t.Fatalf("summary %s, want inputs %+v", b, wantIn)
	}

	// --query hourly alone runs the view too, and reads both files.
	env2, out2, errb2 := runTestEnv("")
	if code := Main(context.Background(), env2, []string{"run", sql, "--input", imps, "--query", "hourly"}); code != 0 || out2.String() != wantHourly {
		t.Fatalf("--query hourly: exit %d, changelog:\n%s%s", code, out2, errb2)
	}
	// explain shows the graph from both streams, and the join inside it.
	env3, out3, errb3 := runTestEnv("")
	if code := Main(context.Background(), env3, []string{"explain", sql}); code != 0 ||
		!strings.Contains(out3.String(), "graph: impressions -> clicks_10m -> hourly\ngraph: clicks -> clicks_10m -> hourly\n") ||
		!strings.Contains(out3.String(), "interval join (inner) impressions AS i JOIN clicks AS c") {
		t.Fatalf("explain: exit %d:\n%s%s", code, out3, errb3)
	}
}

// TestKill9ResumeViewIntervalJoin kills `ubik run --state-dir` of a view
// with an interval join of two streams and its reader at random points
// and reruns it: both changelogs must equal an uninterrupted run's byte
// for byte, and the reader's finals the one query that counts the joined
// rows into hours directly.
func TestKill9ResumeViewIntervalJoin(t *testing.T) {
	bin := buildUbik(t)
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 60_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewIJoinRunSQL, clicks), 0o644)
	direct := filepath.Join(dir, "direct.sql")
	os.WriteFile(direct, fmt.Appendf(nil, viewIJoinDirectSQL, clicks), 0o644)
	args := func(sql, out, state string) []string {
		a := []string{"run", sql, "--input", imps, "--output-dir", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref")
	if out, err := exec.Command(bin, args(sql, ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	batch := filepath.Join(dir, "batch")
	if out, err := exec.Command(bin, args(direct, batch, "")...).CombinedOutput(); err != nil {
		t.Fatalf("direct run: %v\n%s", err, out)
	}
	sorted := func(b []byte) []string {
		l := strings.Split(strings.TrimSpace(string(b)), "\n")
		slices.Sort(l)
		return l
	}
	refH, _ := os.ReadFile(filepath.Join(ref, "hourly.jsonl"))
	batchH, _ := os.ReadFile(filepath.Join(batch, "hourly.jsonl"))
	if len(refH) < 500 || !slices.Equal(sorted(refH), sorted(batchH)) {
		t.Fatalf("the reader's finals differ from the direct query's:\n%s\nwant:\n%s", refH, batchH)
	}
	got := filepath.Join(dir, "got")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// A run that ends before its kill starts over from scratch, so the
	// next one can be interrupted.
	const kills = 6
	crashtest.Loop(t, r, kills, 30*time.Millisecond, 430*time.Millisecond,
		func() *exec.Cmd { return exec.Command(bin, args(sql, got, state)...) },
		func() { os.RemoveAll(state); os.RemoveAll(got) })
	if out, err := exec.Command(bin, args(sql, got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for _, name := range []string{"clicks_10m.jsonl", "hourly.jsonl"} {
		refB, _ := os.ReadFile(filepath.Join(ref, name))
		gotB, _ := os.ReadFile(filepath.Join(got, name))
		if len(refB) == 0 || !bytes.Equal(refB, gotB) {
			t.Fatalf("%s: after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", name, kills, len(refB), len(gotB))
		}
	}
}

// TestRunViewOverIntervalJoinBeside: a query over the first stream alone
// runs in the same graph, fed the same lines; one over the second
// stream is refused (a graph reads its two inputs one way each).
func TestRunViewOverIntervalJoinBeside(t *testing.T) {
	dir := t.TempDir()
	clicks := filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(clicks, []byte(`{"impression_id":1,"ts":"2026-07-18 10:01:00"}
{"impression_id":3,"ts":"2026-07-18 10:12:00"}
`), 0o644)
	imps := filepath.Join(dir, "impressions.jsonl")
	os.WriteFile(imps, []byte(`{"id":1,"campaign":"spring","ts":"2026-07-18 10:00:00"}
{"id":2,"campaign":"spring","ts":"2026-07-18 10:05:00"}
{"id":3,"campaign":"autumn","ts":"2026-07-18 10:08:00"}
`), 0o644)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewIJoinRunSQL+`
CREATE VIEW shown AS SELECT campaign, TUMBLE_START(ts, INTERVAL '1' HOUR) AS hour, count(*) AS impressions
FROM impressions GROUP BY campaign, TUMBLE(ts, INTERVAL '1' HOUR);`, clicks), 0o644)
	outDir := filepath.Join(dir, "out")
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--input", imps, "--output-dir", outDir}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	shown, _ := os.ReadFile(filepath.Join(outDir, "shown.tsv"))
	wantShown := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "hour": "2026-07-18 10:00:00", "impressions": 2}
["autumn", "2026-07-18 10:00:00"]	{"campaign": "autumn", "hour": "2026-07-18 10:00:00", "impressions": 1}
`
	hourly, _ := os.ReadFile(filepath.Join(outDir, "hourly.tsv"))
	wantHourly := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "hour": "2026-07-18 10:00:00", "clicks": 1}
["autumn", "2026-07-18 10:00:00"]	{"campaign": "autumn", "hour": "2026-07-18 10:00:00", "clicks": 1}
`
	if string(shown) != wantShown || string(hourly) != wantHourly {
		t.Fatalf("shown:\n%s\nhourly:\n%s\nwant:\n%s%s", shown, hourly, wantShown, wantHourly)
	}

	os.WriteFile(sql, fmt.Appendf(nil, viewIJoinRunSQL+`
CREATE VIEW clicked AS SELECT impression_id, count(*) AS n FROM clicks GROUP BY impression_id;`, clicks), 0o644)
	env2, _, errb2 := runTestEnv("")
	if code := Main(context.Background(), env2, []string{"run", sql, "--input", imps, "--output-dir", filepath.Join(dir, "out2")}); code == 0 ||
		!strings.Contains(errb2.String(), "query clicks_10m joins the streams impressions and clicks, and the graph also reads clicks as the source of another query") {
		t.Fatalf("a query over the second stream beside the graph: exit %d: %s", code, errb2)
	}
}
