package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run runs the CLI in process and returns stdout, stderr and the status.
func runArgs(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	env, out, errb := runTestEnv(stdin)
	code := Main(context.Background(), env, args)
	return out.String(), errb.String(), code
}

const evSQL = `CREATE SOURCE ev (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT k, count(*) AS n, sum(v) AS total FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`

// evalSQL fails to evaluate an event whose k is not a number.
const evalSQL = `CREATE SOURCE ev (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT count(*) AS n, sum(CAST(k AS BIGINT)) AS total FROM ev GROUP BY TUMBLE(ts, INTERVAL '10' SECOND)`

// TestRunUnknownWithOption: a typo in WITH (...) is an error with the
// position, a caret and the closest known option, never a silent default.
func TestRunUnknownWithOption(t *testing.T) {
	sql := writeFile(t, "q.sql", "CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (formt = 'csv');\nSELECT k, count(*) FROM ev GROUP BY k")
	_, errb, code := runArgs(t, "k,ts\na,2026-07-18 10:00:00\n", "run", sql)
	if code != ExitError || !strings.Contains(errb, `line 1:74: unknown source option "formt" (did you mean "format"?)`) ||
		!strings.Contains(errb, "\n"+strings.Repeat(" ", 73)+"^") {
		t.Fatalf("exit %d:\n%s", code, errb)
	}
	sql = writeFile(t, "q.sql", evSQL+";\nCREATE SINK out FROM q WITH (pth = 'x.tsv')")
	if _, errb, code := runArgs(t, "", "run", sql); code != ExitError || !strings.Contains(errb, `unknown sink option "pth" (did you mean "path"?)`) {
		t.Fatalf("exit %d:\n%s", code, errb)
	}
}

// TestRunSinkPath: CREATE SINK ... WITH (path = ...) is where a file run
// writes the changelog; --output naming another file is refused (a usage
// error naming both), naming the same file is fine.
func TestRunSinkPath(t *testing.T) {
	dir := t.TempDir()
	outPath := filepath.Join(dir, "totals.tsv")
	sql := writeFile(t, "q.sql", strings.Replace(evSQL, "SELECT", "CREATE VIEW totals AS SELECT", 1)+";\nCREATE SINK out FROM totals WITH (path = '"+outPath+"')")
	in := `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}` + "\n"
	stdout, errb, code := runArgs(t, in, "run", sql)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, stdout, errb)
	}
	b, err := os.ReadFile(outPath)
	if err != nil || !strings.Contains(string(b), `{"k": "a", "n": 1, "total": 1}`) {
		t.Fatalf("sink file: %q (%v)", b, err)
	}
	other := filepath.Join(dir, "other.tsv")
	_, errb, code = runArgs(t, in, "run", sql, "--output", other)
	if code != ExitUsage || !strings.Contains(errb, "sink out WITH (path = '"+outPath+"')") || !strings.Contains(errb, "--output names "+other) {
		t.Fatalf("--output over a sink's path: exit %d: %s", code, errb)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the refused run created %s (%v)", other, err)
	}
	if _, errb, code := runArgs(t, in, "run", sql, "--output", outPath); code != 0 {
		t.Fatalf("--output naming the sink's own path: exit %d: %s", code, errb)
	}
}

// TestRunMaxBad: a run whose every event is bad fails; --max-bad sets a
// count or a rate; the summary and the error name the limit crossed.
func TestRunMaxBad(t *testing.T) {
	sql := writeFile(t, "q.sql", evSQL)
	evalQuery := writeFile(t, "e.sql", evalSQL)
	good := `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}` + "\n"
	bad := `{"k":1,"v":1,"ts":"2026-07-18 10:00:01"}` + "\n"
	num := `{"k":"7","v":1,"ts":"2026-07-18 10:00:01"}` + "\n"
	allBad := bad + bad + bad
	for _, c := range []struct {
		name, input string
		args        []string
		code        int
		want        string
	}{
		{"every event malformed", allBad, nil, ExitBadInput, "3 of 3 events were malformed or failed to evaluate (every event was bad)"},
		{"one good event", bad + good + bad, nil, 0, "2 malformed"},
		{"count crossed", good + bad + bad + good, []string{"--max-bad", "1"}, ExitBadInput, "more than 1 events were malformed or failed to evaluate (--max-bad 1)"},
		{"count not crossed", good + bad + good, []string{"--max-bad", "1"}, 0, ""},
		{"rate crossed", good + bad + good + good, []string{"--max-bad", "20%"}, ExitBadInput, "1 of 4 events were malformed or failed to evaluate (--max-bad 20%)"},
		{"rate not crossed", good + bad + good + good, []string{"--max-bad", "25%"}, 0, ""},
		{"all bad allowed", allBad, []string{"--max-bad", "100%"}, 0, ""},
		{"eval errors count", num + good + num, []string{"--max-bad", "0"}, ExitBadInput, "Could not convert"},
		{"every event fails to evaluate", good + good, nil, ExitBadInput, "2 of 2 events"},
		{"bad flag", good, []string{"--max-bad", "ten"}, ExitUsage, `--max-bad "ten"`},
		{"bad percentage", good, []string{"--max-bad", "101%"}, ExitUsage, "0% to 100%"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stats := filepath.Join(t.TempDir(), "s.json")
			q := sql
			if strings.Contains(c.name, "evaluate") || strings.Contains(c.name, "eval errors") {
				q = evalQuery
			}
			_, errb, code := runArgs(t, c.input, append([]string{"run", q, "--stats-json", stats}, c.args...)...)
			if code != c.code || !strings.Contains(errb, c.want) {
				t.Fatalf("exit %d (want %d), stderr lacks %q:\n%s", code, c.code, c.want, errb)
			}
			if c.code == ExitBadInput {
				var s summary
				b, _ := os.ReadFile(stats)
				if err := json.Unmarshal(b, &s); err != nil || s.BadInputLimit == "" || !strings.Contains(errb, "; failed: "+s.BadInputLimit) {
					t.Fatalf("stats %s (%v), stderr %s", b, err, errb)
				}
			}
		})
	}
}

// TestRunSideOutputWriteErrors: a dead-letter or late-output file that
// cannot be written fails the run, as the changelog's own output does.
func TestRunSideOutputWriteErrors(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatal("this test needs /dev/full")
	}
	sql := writeFile(t, "q.sql", evSQL)
	in := `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}
{"k":"a","v":"x","ts":"2026-07-18 10:00:01"}
{"k":"a","v":1,"ts":"2026-07-18 10:00:12"}
{"k":"a","v":1,"ts":"2026-07-18 10:00:02"}
`
	for _, flag := range []string{"--output", "--dead-letter", "--late-output"} {
		_, errb, code := runArgs(t, in, "run", sql, flag, "/dev/full")
		if code != ExitError || !strings.Contains(errb, "no space left on device") {
			t.Errorf("%s /dev/full: exit %d: %s", flag, code, errb)
		}
	}
}

// TestRunInputEdges: a UTF-8 byte order mark starts a file without
// hiding its first field or line, and blank lines are skipped like empty
// ones, in JSON lines and CSV; a CSV header without a declared column
// stops the run at line 1.
func TestRunInputEdges(t *testing.T) {
	bom := "\xef\xbb\xbf"
	sql := writeFile(t, "q.sql", evSQL)
	in := writeFile(t, "ev.jsonl", bom+`{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}`+"\n  \t\n\n"+`{"k":"a","v":2,"ts":"2026-07-18 10:00:02"}`+"\r\n \r\n")
	out, errb, code := runArgs(t, "", "run", sql, "--input", in)
	if code != 0 || !strings.Contains(errb, "2 events read, 0 malformed") || !strings.Contains(out, `"n": 2, "total": 3`) {
		t.Fatalf("jsonl: exit %d, %s\n%s", code, out, errb)
	}
	csvSQL := writeFile(t, "c.sql", strings.Replace(evSQL, "'jsonl'", "'csv'", 1))
	in = writeFile(t, "ev.csv", bom+"k,v,ts\r\na,1,2026-07-18 10:00:01\r\n   \r\na,2,2026-07-18 10:00:02\r\n")
	out, errb, code = runArgs(t, "", "run", csvSQL, "--input", in)
	if code != 0 || !strings.Contains(errb, "2 events read, 0 malformed") || !strings.Contains(out, `"n": 2, "total": 3`) {
		t.Fatalf("csv: exit %d, %s\n%s", code, out, errb)
	}
	in = writeFile(t, "ev.csv", "k,value,ts\na,1,2026-07-18 10:00:01\n")
	_, errb, code = runArgs(t, "", "run", csvSQL, "--input", in)
	if code != ExitError || !strings.Contains(errb, `ev.csv:1: the CSV header has no column "v"`) {
		t.Fatalf("csv header: exit %d, %s", code, errb)
	}
}

// TestRunSummaryVocabulary: the text summary, --stats-json and the
// messages use one vocabulary: malformed and eval errors apart, the
// watermark as plain text, no 0.000s, no Go package prefixes.
func TestRunSummaryVocabulary(t *testing.T) {
	sql := writeFile(t, "q.sql", evalSQL)
	stats := filepath.Join(t.TempDir(), "s.json")
	in := `{"k":"x","v":1,"ts":"2026-07-18 10:00:01"}
{"k":"1","v":1,"ts":"2026-07-18 10:00:02"}
{"k":"1","v":1,"ts":"yesterday"}
{"k":"2","v":1,"ts":"2026-07-18 10:00:12"}
`
	_, errb, code := runArgs(t, in, "run", sql, "--stats-json", stats)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var s map[string]any
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["watermark"] != "2026-07-18 10:00:12" || s["malformed"] != 1.0 || s["eval_errors"] != 1.0 || s["events_read"] != 4.0 {
		t.Fatalf("stats %s", b)
	}
	if !strings.Contains(errb, "4 events read, 1 malformed, 1 eval errors, 0 late, 2 records emitted, 2 windows finalized, ") {
		t.Fatalf("summary: %s", errb)
	}
	for _, bad := range []string{"0.000s", "types:", "exec:", "ubik: ubik:"} {
		if strings.Contains(errb, bad) {
			t.Errorf("stderr has %q:\n%s", bad, errb)
		}
	}
	// A message that starts with the package name is not doubled.
	if _, errb, _ := runArgs(t, "", "run", writeFile(t, "e.sql", "CREATE SOURCE ev (k VARCHAR);")); strings.Contains(errb, "ubik: ubik:") || !strings.Contains(errb, "ubik: the script has no query") {
		t.Errorf("no-query error: %s", errb)
	}
}

// TestRunLateOutputWholeEvent: a late event's record carries the input
// line as read (every column, the ones the query does not read included)
// and its line number, so it can be replayed.
func TestRunLateOutputWholeEvent(t *testing.T) {
	sql := writeFile(t, "q.sql", `CREATE SOURCE ev (k VARCHAR, note VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT k, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)`)
	late := filepath.Join(t.TempDir(), "late.jsonl")
	lateLine := `{"k":"a","note":"replay me","ts":"2026-07-18 10:00:02"}`
	in := `{"k":"a","note":"x","ts":"2026-07-18 10:00:01"}
{"k":"a","note":"y","ts":"2026-07-18 10:00:12"}
` + lateLine + "\n"
	if _, errb, code := runArgs(t, in, "run", sql, "--late-output", late); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	b, _ := os.ReadFile(late)
	var rec struct {
		Line  int    `json:"line"`
		Event string `json:"event"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Line != 3 || rec.Event != lateLine {
		t.Fatalf("late output %s (%v)", b, err)
	}
}

// TestRunSeveralViews: a script with several views runs them all with
// --output-dir, each to its own file (a CREATE SINK path wins), without
// sinks; explain shows them all; without --output-dir or --query the
// error says how to choose.
func TestRunSeveralViews(t *testing.T) {
	dir := t.TempDir()
	sinkPath := filepath.Join(dir, "by_minute_here.tsv")
	sql := writeFile(t, "views.sql", `CREATE SOURCE ev (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE VIEW per_key AS SELECT k, count(*) AS n FROM ev GROUP BY k;
CREATE VIEW per_10s AS SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, sum(v) AS total FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW per_minute AS SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE SINK m FROM per_minute WITH (path = '`+sinkPath+`')`)
	in := `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}
{"k":"b","v":2,"ts":"2026-07-18 10:00:02"}
{"k":"a","v":3,"ts":"2026-07-18 10:00:12"}
`
	outDir := filepath.Join(dir, "out")
	stats := filepath.Join(dir, "stats.json")
	_, errb, code := runArgs(t, in, "run", sql, "--output-dir", outDir, "--stats-json", stats)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for path, want := range map[string]string{
		filepath.Join(outDir, "per_key.tsv"): `["a"]	{"k": "a", "n": 2}`,
		filepath.Join(outDir, "per_10s.tsv"): `["a", "2026-07-18 10:00:10"]	{"k": "a", "ws": "2026-07-18 10:00:10", "total": 3}`,
		sinkPath:                             `["2026-07-18 10:00:00"]	{"ws": "2026-07-18 10:00:00", "n": 3}`,
	} {
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %q (%v), want %q", path, b, err, want)
		}
	}
	var sums []summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &sums); err != nil || len(sums) != 3 || sums[0].EventsRead != 3 {
		t.Fatalf("stats %s (%v)", b, err)
	}
	if _, errb, code := runArgs(t, in, "run", sql); code != ExitUsage || !strings.Contains(errb, "--output-dir DIR") {
		t.Fatalf("without --output-dir: exit %d: %s", code, errb)
	}
	out, errb, code := runArgs(t, "", "explain", sql)
	if code != 0 || strings.Count(out, "\nquery ") != 3 {
		t.Fatalf("explain: exit %d:\n%s%s", code, out, errb)
	}
}

// TestRunRefusesSharedOutputs: two outputs of a run that are one file
// (two sinks with one path, --output and --dead-letter, a view's output
// and --late-output) would truncate each other's records, and an output
// that is an input would overwrite it before it is read: each is a usage
// error naming both, and nothing is written. A device takes any number of
// outputs.
func TestRunRefusesSharedOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	events := `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}` + "\n" + `{"k":"b","v":"bad","ts":"2026-07-18 10:00:02"}` + "\n"
	if err := os.WriteFile(in, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(dir, "same.tsv")
	twoSinks := writeFile(t, "q.sql", strings.Replace(evSQL, "SELECT", "CREATE VIEW a AS SELECT", 1)+";\n"+
		strings.Replace(strings.SplitN(evSQL, ";\n", 2)[1], "SELECT", "CREATE VIEW b AS SELECT", 1)+";\n"+
		"CREATE SINK sa FROM a WITH (path = '"+same+"');\nCREATE SINK sb FROM b WITH (path = '"+same+"')")
	one := writeFile(t, "one.sql", evSQL)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"two sinks with one path", []string{"run", twoSinks, "--input", in}, "the output of query a and the output of query b are both " + same},
		{"--output and --dead-letter", []string{"run", one, "--input", in, "--output", same, "--dead-letter", same}, "the output of query one and --dead-letter are both " + same},
		{"--late-output and --output", []string{"run", one, "--input", in, "--output", same, "--late-output", same}, "are both " + same},
		{"--output over the input", []string{"run", one, "--input", in, "--output", in}, "the output of query one is " + in + ", which the run reads"},
		{"--dead-letter over the input", []string{"run", one, "--input", filepath.Join(dir, ".", "in.jsonl"), "--dead-letter", in}, "--dead-letter is"},
	} {
		_, errb, code := runArgs(t, "", c.args...)
		if code != ExitUsage || !strings.Contains(errb, c.want) {
			t.Errorf("%s: exit %d, want %d and %q: %s", c.name, code, ExitUsage, c.want, errb)
		}
		if _, err := os.Stat(same); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused run created %s (%v)", c.name, same, err)
		}
		if b, _ := os.ReadFile(in); string(b) != events {
			t.Fatalf("%s: the input was changed: %q", c.name, b)
		}
	}
	if _, errb, code := runArgs(t, "", "run", one, "--input", in, "--output", os.DevNull, "--dead-letter", os.DevNull, "--late-output", os.DevNull); code != 0 {
		t.Fatalf("every output to %s: exit %d: %s", os.DevNull, code, errb)
	}
}
