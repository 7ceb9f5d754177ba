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
// JSON lines (decoded in blocks on several threads) and CSV (decoded by
// the reader).
func TestRunHavingFailsOnThreads(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var jl, csv strings.Builder
	csv.WriteString("k,ts\n")
	for i := range 3000 {
		ts := base.Add(time.Duration(i) * 100 * time.Millisecond).Format(time.RFC3339Nano)
		n := 1
		if i%50 == 0 {
			n = 12 // the window's count overflows the HAVING
		}
		for range n {
			fmt.Fprintf(&jl, "{\"k\":\"k%d\",\"ts\":%q}\n", i%3, ts)
			fmt.Fprintf(&csv, "k%d,%s\n", i%3, ts)
		}
		if i%40 == 7 { // malformed, between the failing windows
			jl.WriteString("{\"k\": \"bad\"\n")
			csv.WriteString("bad\n")
		}
	}
	for _, f := range []struct{ format, input, text string }{
		{"'jsonl'", "in.jsonl", jl.String()},
		{"'csv', header = 'true'", "in.csv", csv.String()},
	} {
		sql, input := filepath.Join(dir, "q"+f.input+".sql"), filepath.Join(dir, f.input)
		os.WriteFile(input, []byte(f.text), 0o644)
		os.WriteFile(sql, []byte(`CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = `+f.format+`);
SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)
  HAVING 1000000000000000000 * count(*) > 0;
`), 0o644)
		timing := regexp.MustCompile(`, [0-9.]+[µm]?s, [0-9]+ events/s`)
		run := func(threads int, extra ...string) (code int, stderr, out, dead string) {
			o, d := filepath.Join(dir, "out.tsv"), filepath.Join(dir, "dead.jsonl")
			os.Remove(d)
			env, _, errb := runTestEnv("")
			code = Main(context.Background(), env, append([]string{"run", sql, "--input", input, "--output", o, "--dead-letter", d, "--threads", fmt.Sprint(threads)}, extra...))
			ob, _ := os.ReadFile(o)
			db, _ := os.ReadFile(d)
			return code, timing.ReplaceAllString(errb.String(), ""), string(ob), string(db)
		}
		for _, extra := range [][]string{nil, {"--max-bad", "10"}} {
			code1, err1, out1, dead1 := run(1, extra...)
			if want := map[bool]int{false: 0, true: ExitBadInput}[extra != nil]; code1 != want || strings.Count(dead1, "HAVING") < 5 || strings.Count(dead1, "\n") < 11 {
				t.Fatalf("%s %v on one thread: exit %d, want %d; dead letter:\n%.300s\n%s", f.input, extra, code1, want, dead1, err1)
			}
			for _, threads := range []int{2, 4} {
				code, stderr, out, dead := run(threads, extra...)
				if extra != nil {
					// Stopped: the summary and the changelog count what
					// the run read ahead on several threads (as for a
					// malformed event); the error is the same.
					stderr, out = lastLine(stderr), out1
					err1 = lastLine(err1)
				}
				if code != code1 || stderr != err1 || out != out1 || dead != dead1 {
					t.Fatalf("%s %v on %d threads: exit %d, stderr:\n%s\ndead letter:\n%.500s\none thread: exit %d, stderr:\n%s\ndead letter:\n%.500s", f.input, extra, threads, code, stderr, dead, code1, err1, dead1)
				}
			}
		}
	}
}
