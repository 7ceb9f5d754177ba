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

// A window join of two views over two different sources, run from two
// files: the first source from --input, the second from its path.
const viewJoinRunSQL = `
CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'jsonl', path = '%s');
CREATE VIEW shown AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM impressions GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW clicked AS SELECT impression_id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS c
  FROM clicks GROUP BY impression_id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW both_seen AS SELECT s.id, TUMBLE_START(s.ws, INTERVAL '10' SECOND) AS ws, sum(s.n) AS n, sum(k.c) AS c
  FROM shown s JOIN clicked k ON s.id = k.impression_id AND s.ws = k.ws
  GROUP BY s.id, TUMBLE(s.ws, INTERVAL '10' SECOND) EMIT FINAL;`

// TestKill9ResumeViewJoinTwoSources kills `ubik run --state-dir` of the
// join at random points and reruns it: the changelog equals an
// uninterrupted run's byte for byte (both files' positions and every
// view's state are in the checkpoint).
func TestKill9ResumeViewJoinTwoSources(t *testing.T) {
	kill9ViewJoin(t, viewJoinRunSQL, "both_seen", 1000)
}

// kill9ViewJoin is TestKill9ResumeViewJoinTwoSources for query of script
// (viewJoinRunSQL and what follows it), whose uninterrupted run writes at
// least minLines records; it returns the uninterrupted run's changelog.
func kill9ViewJoin(t *testing.T, script, query string, minLines int) []byte {
	bin := buildUbik(t)
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 60_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, script, clicks), 0o644)
	// The interrupted runs take 2, 3 and 1 threads in turn: a checkpoint
	// of one restores into another.
	runs := 0
	args := func(out, state string) []string {
		a := []string{"run", sql, "--query", query, "--input", imps, "--output", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			runs++
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms", "--threads", fmt.Sprint(1+runs%3))
		}
		return a
	}
	ref := filepath.Join(dir, "ref.jsonl")
	out, err := exec.Command(bin, args(ref, "")...).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "events read (impressions 60000, clicks 120000)") {
		t.Fatalf("the run did not read the second file whole:\n%s", out)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
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
	if bytes.Count(refB, []byte("\n")) < minLines || !bytes.Equal(refB, gotB) {
		t.Fatalf("after %d kills the changelog of %s differs from the uninterrupted run (%d vs %d bytes)", kills, query, len(refB), len(gotB))
	}
	return refB
}

// TestViewJoinTwoSourcesExplain: explain's graph shows both branches of
// the join, one line per source.
func TestViewJoinTwoSourcesExplain(t *testing.T) {
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, filepath.Join(dir, "clicks.jsonl")), 0o644)
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errb)
	}
	want := "graph: impressions -> shown -> both_seen\ngraph: clicks -> clicked -> both_seen\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("explain lacks %q:\n%s", want, out)
	}
}

// TestRunViewJoinSummaryCountsEachSource runs the join of two views over
// two sources with a malformed and late events in each file: the summary
// (text and --stats-json) counts each source's events,
// malformed and late, and the totals are their sums; the late output has
// one line per late event counted. A chain of views over one source
// counts its views' late events too.
func TestRunViewJoinSummaryCountsEachSource(t *testing.T) {
	dir := t.TempDir()
	clicks := filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(clicks, []byte(`{"impression_id":1,"ts":"2026-07-18 10:00:03"}
{"impression_id":2,"ts":"2026-07-18 10:00:16"}
{"impression_id":2,"ts":"2026-07-18 10:00:17"}
nope
{"impression_id":1,"ts":"2026-07-18 10:00:30"}
{"impression_id":1,"ts":"2026-07-18 10:00:04"}
{"impression_id":1,"ts":"2026-07-18 10:00:05"}
`), 0o644)
	imps := filepath.Join(dir, "impressions.jsonl")
	os.WriteFile(imps, []byte(`{"id":1,"campaign":"a","ts":"2026-07-18 10:00:01"}
{"id":2,"campaign":"a","ts":"2026-07-18 10:00:15"}
{"id":1,"campaign":"a","ts":"2026-07-18 10:00:02"}
bad
{"id":2,"campaign":"a","ts":"2026-07-18 10:00:25"}
`), 0o644)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, clicks), 0o644)
	late, stats := filepath.Join(dir, "late"), filepath.Join(dir, "stats")
	env, out, errb := runTestEnv("")
	code := Main(context.Background(), env, []string{"run", sql, "--query", "both_seen", "--input", imps, "--late-output", late, "--stats-json", stats})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	want := `[1, "2026-07-18 10:00:00"]	{"id": 1, "ws": "2026-07-18 10:00:00", "n": 1, "c": 1}
[2, "2026-07-18 10:00:10"]	{"id": 2, "ws": "2026-07-18 10:00:10", "n": 1, "c": 2}
`
	if out.String() != want {
		t.Fatalf("changelog:\n%s\nwant:\n%s", out, want)
	}
	var s summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary %s: %v", b, err)
	}
	wantIn := []inputSummary{{"impressions", 5, 1, 1}, {"clicks", 7, 1, 2}}
	if s.EventsRead != 12 || s.Malformed != 2 || s.Late != 3 || !slices.Equal(s.Inputs, wantIn) {
		t.Fatalf("summary %+v, want inputs %+v", s, wantIn)
	}
	if l, _ := os.ReadFile(late); bytes.Count(l, []byte("\n")) != 3 {
		t.Fatalf("late output has %d lines, the summary counts 3:\n%s", bytes.Count(l, []byte("\n")), l)
	}
	if !strings.Contains(errb.String(), "ubik: both_seen: 12 events read (impressions 5, clicks 7), 2 malformed (impressions 1, clicks 1), 0 eval errors, 3 late (impressions 1, clicks 2), 2 records emitted") {
		t.Fatalf("summary line: %s", errb)
	}

	// A chain over one source: its view's late event is the run's.
	chain := filepath.Join(dir, "chain.sql")
	os.WriteFile(chain, []byte(`CREATE SOURCE ev (merchant VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE VIEW tens AS SELECT merchant, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM ev GROUP BY merchant, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW mins AS SELECT merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, sum(n) AS n
  FROM tens GROUP BY merchant, TUMBLE(ws, INTERVAL '1' MINUTE);`), 0o644)
	env, _, errb = runTestEnv(`{"merchant":"a","ts":"2026-07-18 10:00:01"}
{"merchant":"a","ts":"2026-07-18 10:00:15"}
{"merchant":"a","ts":"2026-07-18 10:00:02"}
{"merchant":"a","ts":"2026-07-18 10:01:15"}
`)
	if code := Main(context.Background(), env, []string{"run", chain, "--query", "mins", "--output", filepath.Join(dir, "mins.tsv")}); code != 0 {
		t.Fatalf("chain: exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "ubik: mins: 4 events read, 0 malformed, 0 eval errors, 1 late, ") {
		t.Fatalf("the chain's summary does not count its view's late event: %s", errb)
	}
}

// TestKill9ResumeViewJoinOver: a query over the join of the two views
// (per minute, over the join's window start), killed and rerun as
// TestKill9ResumeViewJoinTwoSources; its uninterrupted run's finals equal
// the join's own finals (a run of both_seen) regrouped per minute.
func TestKill9ResumeViewJoinOver(t *testing.T) {
	script := viewJoinRunSQL + `
CREATE VIEW per_minute AS SELECT TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, count(*) AS ids, sum(c) AS c, max(id) AS hi
  FROM both_seen GROUP BY TUMBLE(ws, INTERVAL '1' MINUTE) EMIT FINAL;`
	ref := kill9ViewJoin(t, script, "per_minute", 50)
	// The join's finals, from a run of both_seen alone.
	bin := buildUbik(t)
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 60_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, script, clicks), 0o644)
	joined := filepath.Join(dir, "joined.jsonl")
	if out, err := exec.Command(bin, "run", sql, "--query", "both_seen", "--input", imps, "--output", joined, "--format", "jsonl", "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("both_seen: %v\n%s", err, out)
	}
	type agg struct{ ids, c, hi int64 }
	want := map[string]*agg{}
	jb, _ := os.ReadFile(joined)
	for _, line := range bytes.Split(bytes.TrimSpace(jb), []byte("\n")) {
		var rec struct {
			Value struct {
				ID int64  `json:"id"`
				WS string `json:"ws"`
				C  int64  `json:"c"`
			}
			Final bool
		}
		if err := json.Unmarshal(line, &rec); err != nil || !rec.Final {
			t.Fatalf("both_seen record %s: %v (final %v)", line, err, rec.Final)
		}
		r := rec.Value
		ts, err := time.Parse("2006-01-02 15:04:05", r.WS)
		if err != nil {
			t.Fatalf("both_seen record %s: %v", line, err)
		}
		m := ts.Truncate(time.Minute).Format("2006-01-02 15:04:05")
		a := want[m]
		if a == nil {
			a = &agg{hi: r.ID}
			want[m] = a
		}
		a.ids++
		a.c += r.C
		a.hi = max(a.hi, r.ID)
	}
	lines := bytes.Split(bytes.TrimSpace(ref), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("per_minute has %d finals, the regrouped join %d minutes", len(lines), len(want))
	}
	for _, line := range lines {
		var rec struct {
			Value struct {
				M          string `json:"m"`
				IDs, C, Hi int64
			}
			Final bool
		}
		if err := json.Unmarshal(line, &rec); err != nil || !rec.Final {
			t.Fatalf("per_minute record %s: %v (final %v)", line, err, rec.Final)
		}
		r := rec.Value
		if w := want[r.M]; w == nil || *w != (agg{r.IDs, r.C, r.Hi}) {
			t.Errorf("per_minute %s: %s, want %+v", r.M, line, w)
		}
	}
}
