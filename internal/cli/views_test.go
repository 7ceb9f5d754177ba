package cli

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
)

// A graph of views in one script: per-ten-second totals (EMIT FINAL, with
// allowed lateness), per-minute totals over them, and a continuous view
// over the minutes.
const viewsSQL = `CREATE SOURCE ev (merchant VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl');
CREATE VIEW tens AS SELECT merchant, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, sum(amount) AS total
  FROM ev GROUP BY merchant, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL ALLOWED LATENESS INTERVAL '2' SECOND;
CREATE VIEW mins AS SELECT merchant, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total,
  max(total) AS hi, count(*) AS tens
  FROM tens GROUP BY merchant, TUMBLE(ws, INTERVAL '1' MINUTE);
CREATE VIEW per_merchant AS SELECT merchant, sum(n) AS n, count(*) AS minutes FROM mins GROUP BY merchant;`

// TestRunViews runs the graph in process with --output-dir: each view
// writes its own changelog, keyed by its own GROUP BY; the minute totals
// add up the ten-second totals; explain shows the graph.
func TestRunViews(t *testing.T) {
	sql := writeFile(t, "views.sql", viewsSQL)
	in := writeFile(t, "ev.jsonl", `{"merchant":"a","amount":1.5,"ts":"2026-01-01 10:00:01"}
{"merchant":"a","amount":2.5,"ts":"2026-01-01 10:00:11"}
{"merchant":"b","amount":-0.0,"ts":"2026-01-01 10:00:12"}
{"merchant":"a","amount":1,"ts":"2026-01-01 10:01:30"}
{"merchant":"a","amount":1,"ts":"2026-01-01 09:00:00"}
{"merchant":"a","amount":"x","ts":"2026-01-01 10:01:31"}
`)
	dir := t.TempDir()
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--input", in, "--output-dir", dir, "--late-output", filepath.Join(dir, "late.jsonl")}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := map[string]string{
		"tens.tsv": `["a", "2026-01-01 10:00:00"]	{"merchant": "a", "ws": "2026-01-01 10:00:00", "n": 1, "total": 1.5}
["a", "2026-01-01 10:00:10"]	{"merchant": "a", "ws": "2026-01-01 10:00:10", "n": 1, "total": 2.5}
["b", "2026-01-01 10:00:10"]	{"merchant": "b", "ws": "2026-01-01 10:00:10", "n": 1, "total": 0.0}
["a", "2026-01-01 10:01:30"]	{"merchant": "a", "ws": "2026-01-01 10:01:30", "n": 1, "total": 1.0}
`,
		"mins.tsv": `["a", "2026-01-01 10:00:00"]	{"merchant": "a", "m": "2026-01-01 10:00:00", "n": 2, "total": 4.0, "hi": 2.5, "tens": 2}
["b", "2026-01-01 10:00:00"]	{"merchant": "b", "m": "2026-01-01 10:00:00", "n": 1, "total": 0.0, "hi": 0.0, "tens": 1}
["a", "2026-01-01 10:01:00"]	{"merchant": "a", "m": "2026-01-01 10:01:00", "n": 1, "total": 1.0, "hi": 1.0, "tens": 1}
`,
		"per_merchant.tsv": `["a"]	{"merchant": "a", "n": 2, "minutes": 1}
["b"]	{"merchant": "b", "n": 1, "minutes": 1}
["a"]	{"merchant": "a", "n": 3, "minutes": 2}
`,
	}
	for name, w := range want {
		if got := read(name); got != w {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, w)
		}
	}
	if late := read("late.jsonl"); strings.Count(late, "\n") != 1 || !strings.Contains(late, `09:00:00`) || !strings.HasPrefix(late, `{"query": "tens"`) {
		t.Errorf("late output: %s", late)
	}
	for _, s := range []string{"tens: 6 events read, 1 malformed", "mins: 4 events read", "per_merchant: 6 events read, 1 malformed"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, errb)
		}
	}

	// --query mins runs tens too, and writes only mins.
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--input", in, "--query", "mins", "--quiet"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if out.String() != want["mins.tsv"] {
		t.Errorf("--query mins:\n%s", out)
	}

	env, out, errb = runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errb)
	}
	for _, s := range []string{
		"graph: ev -> tens -> mins -> per_merchant",
		"query mins -> (default) from tens\n  input: the final rows of view tens (merchant VARCHAR, ws TIMESTAMP, n BIGINT, total DOUBLE), append-only; event time ws; watermark = the first multiple of 00:00:10 above (tens watermark - 00:00:10 - 00:00:02)",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("explain lacks %q:\n%s", s, out)
		}
	}
}

// TestRunViewsRefused: an updating view in FROM is refused with its
// position. (Over Kafka, a reader that groups by less than the view's
// partitioning runs over a view repartition: run_kafka_viewrepart_test.go.)
func TestRunViewsRefused(t *testing.T) {
	sql := writeFile(t, "bad.sql", `CREATE SOURCE ev (merchant VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE VIEW early AS SELECT merchant, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n
  FROM ev GROUP BY merchant, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND;
CREATE VIEW hourly AS SELECT merchant, sum(n) AS n FROM early GROUP BY merchant;`)
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--output-dir", t.TempDir()}); code == 0 ||
		!strings.Contains(errb.String(), "bad.sql: line 4:57: view early emits early (EMIT EARLY)") ||
		!strings.Contains(errb.String(), "declare early with EMIT FINAL") || !strings.Contains(errb.String(), "^") {
		t.Errorf("exit %d: %s", code, errb)
	}
}

// TestViewsKill9Resume kills `ubik run --output-dir --state-dir` over the
// graph at random points, reruns it each time, and requires every view's
// changelog (and the dead-letter and late outputs) to equal an
// uninterrupted run's byte for byte.
func TestViewsKill9Resume(t *testing.T) {
	bin := buildUbik(t)
	input := crashInput(t, 300_000)
	dir := t.TempDir()
	sql := filepath.Join(dir, "views.sql")
	os.WriteFile(sql, []byte(viewsSQL), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", input, "--output-dir", out, "--format", "jsonl", "--no-progress",
			"--dead-letter", out + ".dead", "--late-output", out + ".late"}
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
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 7))
	// A run that ends before its kill starts over from scratch, so the
	// next one can be interrupted.
	const kills = 6
	crashtest.Loop(t, r, kills, 30*time.Millisecond, 430*time.Millisecond,
		func() *exec.Cmd { return exec.Command(bin, args(got, state)...) },
		func() { os.RemoveAll(state) })
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for _, name := range []string{"ref/tens.jsonl", "ref/mins.jsonl", "ref/per_merchant.jsonl", "ref.dead", "ref.late"} {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, _ := os.ReadFile(filepath.Join(dir, strings.Replace(name, "ref", "got", 1)))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("seed %d: %s differs after %d kills (%d vs %d bytes)", seed, name, kills, len(a), len(b))
		}
	}
}
