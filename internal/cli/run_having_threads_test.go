package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunHavingFailsOnThreads: a HAVING that fails as windows finalize
// makes the same run on 1, 2 and 4 threads: each failing window reported
// at the line that finalized it (stderr, --dead-letter), in input order
// among the malformed lines, counted toward --max-bad, which stops the
// run with exit status 3 at the same line with the same error; for
// JSON lines (decoded in blocks on several threads), CSV (decoded by
// the reader), a query behind a temporal join and one reading a view.
func TestRunHavingFailsOnThreads(t *testing.T) {
	dir := t.TempDir()
	jl, csv := havingLines()
	prices, clicks := filepath.Join(dir, "prices.jsonl"), filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(prices, []byte(`{"plan":"p","price":2,"valid_from":"2026-06-01 00:00:00"}`+"\n"), 0o644)
	os.WriteFile(clicks, []byte(havingClicks()), 0o644)
	const having = "HAVING 1000000000000000000 * count(*) > 0"
	for _, f := range []struct {
		name, format, input, text, sql string
		threads                        []int // compared with one thread
	}{
		{"jsonl", "'jsonl'", "in.jsonl", jl, `SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)
  ` + having + `;`, []int{2, 4}},
		{"csv", "'csv', header = 'true'", "in.csv", csv, `SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)
  ` + having + `;`, []int{2, 4}},
		{"temporal join", "'jsonl'", "in.jsonl", jl, `CREATE TABLE prices (plan VARCHAR, price BIGINT, valid_from TIMESTAMP, PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from) WITH (format = 'jsonl', path = '` + prices + `');
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '1' SECOND) AS w, sum(p.price) AS n FROM ev e LEFT JOIN prices FOR SYSTEM_TIME AS OF e.ts AS p ON e.p = p.plan
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '1' SECOND) ` + having + `;`, []int{2, 4}},
		{"interval join", "'jsonl'", "in.jsonl", jl, `CREATE SOURCE cl (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl', path = '` + clicks + `');
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev e JOIN cl c ON c.k = e.k AND c.ts BETWEEN e.ts AND e.ts + INTERVAL '1' SECOND
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '1' SECOND) ` + having + `;`,
			// The run interleaves the two files: a window that a row of
			// the second closes fails on one thread at that row's
			// line; on several threads its error comes back from a
			// later push of either file, or is counted only at the end.
			nil},
		{"view", "'jsonl'", "in.jsonl", jl, `CREATE VIEW per AS SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);
SELECT k, TUMBLE_START(w, INTERVAL '1' SECOND) AS w2, count(*) AS c, sum(n) AS n FROM per GROUP BY k, TUMBLE(w, INTERVAL '1' SECOND)
  HAVING 1000000000000000000 * max(n) > 0;`, []int{2, 4}},
	} {
		t.Run(f.name, func(t *testing.T) {
			sql, input := filepath.Join(dir, "q"+strings.ReplaceAll(f.name, " ", "")+".sql"), filepath.Join(dir, f.input)
			os.WriteFile(input, []byte(f.text), 0o644)
			os.WriteFile(sql, []byte(`CREATE SOURCE ev (k VARCHAR, p VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = `+f.format+`);
`+f.sql+"\n"), 0o644)
			havingRunsAgree(t, dir, sql, input, "q"+strings.ReplaceAll(f.name, " ", ""), f.threads)
		})
	}
}

// havingLines is the input of TestRunHavingFailsOnThreads, as JSON lines
// and as CSV: every fiftieth window of a key crowded past nine events
// (its count overflows the HAVING), malformed lines between them.
func havingLines() (jl, csv string) {
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var j, c strings.Builder
	c.WriteString("k,p,ts\n")
	for i := range 3000 {
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond).Format(time.RFC3339Nano)
		n := 1
		if i%50 == 0 {
			n = 12
		}
		for range n {
			fmt.Fprintf(&j, "{\"k\":\"k%d\",\"p\":\"p\",\"ts\":%q}\n", i%3, ts)
			fmt.Fprintf(&c, "k%d,p,%s\n", i%3, ts)
		}
		if i%40 == 7 { // malformed, between the failing windows
			j.WriteString("{\"k\": \"bad\"\n")
			c.WriteString("bad\n")
		}
	}
	return j.String(), c.String()
}

// havingClicks is one click of each key of havingLines at the end of
// each second: an event joins the one at the end of its second.
func havingClicks() string {
	base := time.Date(2026, 7, 1, 0, 0, 0, 999000000, time.UTC)
	var c strings.Builder
	for s := range 301 {
		for k := range 3 {
			fmt.Fprintf(&c, "{\"k\":\"k%d\",\"ts\":%q}\n", k, base.Add(time.Duration(s)*time.Second).Format(time.RFC3339Nano))
		}
	}
	return c.String()
}

// havingRunsAgree runs sql over input on one thread and on threads,
// without and with --max-bad 10, and compares the exit status, stderr,
// the changelog and the dead letters.
func havingRunsAgree(t *testing.T, dir, sql, input, query string, threads []int) {
	timing := regexp.MustCompile(`, [0-9.]+[µm]?s, [0-9]+ events/s`)
	run := func(threads int, extra ...string) (code int, stderr, out, dead string) {
		o, d := filepath.Join(dir, "out.tsv"), filepath.Join(dir, "dead.jsonl")
		os.Remove(d)
		env, _, errb := runTestEnv("")
		code = Main(context.Background(), env, append([]string{"run", sql, "--input", input, "--output", o, "--dead-letter", d, "--threads", fmt.Sprint(threads), "--query", query}, extra...))
		ob, _ := os.ReadFile(o)
		db, _ := os.ReadFile(d)
		return code, timing.ReplaceAllString(errb.String(), ""), string(ob), string(db)
	}
	for _, extra := range [][]string{nil, {"--max-bad", "10"}} {
		code1, err1, out1, dead1 := run(1, extra...)
		if want := map[bool]int{false: 0, true: ExitBadInput}[extra != nil]; code1 != want || strings.Count(dead1, "HAVING") < 5 || strings.Count(dead1, "\n") < 11 {
			t.Fatalf("%v on one thread: exit %d, want %d; dead letter:\n%.300s\n%s", extra, code1, want, dead1, err1)
		}
		for _, threads := range threads {
			code, stderr, out, dead := run(threads, extra...)
			if extra != nil {
				// Stopped: the summary and the changelog count what
				// the run read ahead on several threads (as for a
				// malformed event); the error is the same.
				stderr, out = lastLine(stderr), out1
				err1 = lastLine(err1)
			}
			if code != code1 || stderr != err1 || out != out1 || dead != dead1 {
				t.Fatalf("%v on %d threads: exit %d, stderr:\n%s\ndead letter:\n%.500s\none thread: exit %d, stderr:\n%s\ndead letter:\n%.500s", extra, threads, code, stderr, dead, code1, err1, dead1)
			}
		}
	}
}

// TestRunHavingFailsAtEnd: a window whose HAVING fails as the input ends
// (no later event closes it) is a bad record like one a later event
// closes: reported at the last line and counted toward --max-bad, exit 0
// under the limit and 3 over it, on one thread and on two (it was an
// error of the run, exit 1).
func TestRunHavingFailsAtEnd(t *testing.T) {
	sql := writeFile(t, "hv.sql", `CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl');
SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) HAVING count(*) * 4611686018427387904 > 0;`)
	in := writeFile(t, "hv.jsonl", `{"k":"a","ts":"2026-07-18 10:00:01"}
{"k":"a","ts":"2026-07-18 10:00:02"}
{"k":"b","ts":"2026-07-18 10:00:03"}
`)
	for _, threads := range []string{"1", "2"} {
		out, errb, code := runArgs(t, "", "run", sql, "--input", in, "--threads", threads)
		if code != 0 || !strings.Contains(errb, "hv.jsonl:3: evaluation error: HAVING") || !strings.Contains(out, `["b", `) || strings.Contains(out, `["a", `) {
			t.Errorf("threads %s: exit %d\n%s\n%s", threads, code, out, errb)
		}
		_, errb, code = runArgs(t, "", "run", sql, "--input", in, "--threads", threads, "--max-bad", "0")
		if code != ExitBadInput || !strings.Contains(errb, "hv.jsonl:3: HAVING") {
			t.Errorf("threads %s, --max-bad 0: exit %d\n%s", threads, code, errb)
		}
	}
}
