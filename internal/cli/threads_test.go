package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunThreads: the changelog of a file run is the same bytes on 1 and
// 3 threads (EMIT CHANGES, so every record is compared, not only the
// finals), and a run that cannot use threads says why.
func TestRunThreads(t *testing.T) {
	sql := writeFile(t, "q.sql", `CREATE SOURCE ev (k VARCHAR, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl');
SELECT k, count(*) AS n, sum(x) AS s FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT CHANGES`)
	var in strings.Builder
	keys := []string{`"a"`, `"b"`, `null`, `"\u00e9"`, "\"\xff\"", `"c"`, `"d"`}
	xs := []string{`1`, `-0.0`, `NaN`, `null`, `2.5`, `Infinity`}
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&in, `{"k":%s,"x":%s,"ts":"2026-07-18 10:%02d:%02d"}`+"\n", keys[i%len(keys)], xs[i%len(xs)], (i/60)%60, i%60)
	}
	input := writeFile(t, "in.jsonl", in.String())
	out := map[int]string{}
	for _, threads := range []int{1, 3} {
		env, stdout, errb := runTestEnv("")
		if code := Main(context.Background(), env, []string{"run", sql, "--input", input, "--format", "jsonl",
			"--no-progress", "--threads", fmt.Sprint(threads)}); code != 0 {
			t.Fatalf("threads %d: exit %d: %s", threads, code, errb)
		}
		out[threads] = stdout.String()
	}
	if out[1] != out[3] || strings.Count(out[1], "\n") < 5000 {
		t.Fatalf("the changelog on 3 threads differs from one thread's (%d and %d bytes)", len(out[1]), len(out[3]))
	}
	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", sql, "--input", input, "--output", filepath.Join(t.TempDir(), "o"),
		"--no-progress", "--threads", "3", "--late-output", filepath.Join(t.TempDir(), "late")}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "runs on one thread: a late-event hook") {
		t.Fatalf("no note of the fallback: %s", errb)
	}
}

// TestRunThreadsBadLines: on several threads, where the lines are decoded
// in blocks of 4,096 by the workers, malformed lines and lines over the
// length bound (one each side of the first block boundary, line 4,096 and
// 4,097, and one ending the input) are counted and reported with their
// line numbers exactly as on one thread: the dead letters, stderr and
// the summary are the same bytes, and so is the changelog; --max-bad stops
// at the same line with the same message.
func TestRunThreadsBadLines(t *testing.T) {
	sql := writeFile(t, "q.sql", `CREATE SOURCE ev (k VARCHAR, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl');
SELECT k, count(*) AS n, sum(x) AS s FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT CHANGES`)
	var in strings.Builder
	bad := map[int]string{7: `{"k":"a","x":`, 4095: `{"k":"a","x":1}`, 4096: strings.Repeat("y", maxLineBytes+1),
		4097: strings.Repeat("z", maxLineBytes+5), 4098: `{"k":"b","x":"q","ts":"2026-07-18 10:00:00"}`, 5500: `not json`}
	const lines = 6000
	for i := 1; i <= lines; i++ {
		switch {
		case bad[i] != "":
			in.WriteString(bad[i])
		case i == lines:
			in.WriteString(strings.Repeat("w", maxLineBytes+2)) // the last line, over the bound, no newline
			continue
		default:
			fmt.Fprintf(&in, `{"k":"k%d","x":%d,"ts":"2026-07-18 10:%02d:%02d"}`, i%13, i%7, (i/60)%60, i%60)
		}
		in.WriteString("\n")
	}
	input := writeFile(t, "in.jsonl", in.String())
	type result struct{ out, stderr, dead string }
	run := func(threads int, extra ...string) (result, int) {
		dead := filepath.Join(t.TempDir(), "dead")
		env, stdout, errb := runTestEnv("")
		args := append([]string{"run", sql, "--input", input, "--format", "jsonl", "--no-progress", "--threads", fmt.Sprint(threads)}, extra...)
		if len(extra) == 0 {
			args = append(args, "--dead-letter", dead)
		}
		code := Main(context.Background(), env, args)
		d, _ := os.ReadFile(dead)
		// The summary's timings differ from run to run.
		var keep []string
		for _, l := range strings.Split(errb.String(), "\n") {
			if !strings.Contains(l, "/s") && !strings.Contains(l, " in ") && !strings.Contains(l, "latency") {
				keep = append(keep, l)
			}
		}
		return result{stdout.String(), strings.Join(keep, "\n"), string(d)}, code
	}
	one, code := run(1)
	if code != 0 {
		t.Fatalf("one thread: exit %d: %s", code, one.stderr)
	}
	for _, l := range []string{`"line": 7,`, `"line": 4095,`, `"line": 4096, "error": "line longer than`, `"line": 4097, "error": "line longer than`, `"line": 4098,`, `"line": 5500,`, `"line": 6000, "error": "line longer than`} {
		if !strings.Contains(one.dead, l) {
			t.Fatalf("no dead letter with %s:\n%s", l, one.dead)
		}
	}
	if n := strings.Count(one.dead, "\n"); n != 7 {
		t.Fatalf("%d dead letters, want 7:\n%s", n, one.dead)
	}
	two, code := run(2)
	if code != 0 {
		t.Fatalf("two threads: exit %d: %s", code, two.stderr)
	}
	if two != one {
		t.Fatalf("two threads differ from one:\none: %s\n%.2000s\ntwo: %s\n%.2000s", one.dead, one.stderr, two.dead, two.stderr)
	}
	oneStop, c1 := run(1, "--max-bad", "4", "--output", filepath.Join(t.TempDir(), "o"))
	twoStop, c2 := run(2, "--max-bad", "4", "--output", filepath.Join(t.TempDir(), "o"))
	if c1 != 3 || c2 != 3 || oneStop.stderr != twoStop.stderr || !strings.Contains(oneStop.stderr, "in.jsonl:4098") {
		t.Fatalf("--max-bad 4: exit %d and %d\none: %s\ntwo: %s", c1, c2, oneStop.stderr, twoStop.stderr)
	}
}

// TestRunThreadsTwoInputs: a join of two views over two sources, read
// from two files, gives the same changelog bytes on 1, 2 and 3 threads,
// every run: the host reads the second file by the inputs' watermarks,
// which on several threads must be those of every record fed so far, as
// on one (not those of the blocks decoded so far, which vary from run to
// run).
func TestRunThreadsTwoInputs(t *testing.T) {
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 20_000)
	sql := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, clicks), 0o644); err != nil {
		t.Fatal(err)
	}
	var want string
	for i, threads := range []int{1, 2, 3, 2, 3} {
		env, stdout, errb := runTestEnv("")
		if code := Main(context.Background(), env, []string{"run", sql, "--query", "both_seen", "--input", imps, "--format", "jsonl",
			"--no-progress", "--threads", fmt.Sprint(threads)}); code != 0 {
			t.Fatalf("threads %d: exit %d: %s", threads, code, errb)
		}
		if i == 0 {
			want = stdout.String()
			if strings.Count(want, "\n") < 1000 {
				t.Fatalf("only %d records", strings.Count(want, "\n"))
			}
			continue
		}
		if got := stdout.String(); got != want {
			t.Fatalf("run %d on %d threads: the changelog differs from one thread's (%d and %d bytes)", i, threads, len(got), len(want))
		}
	}
}

// TestRunThreadsTwoInputsRough runs the join of two views over two files
// with a byte order mark, CRLF endings, blank and malformed lines: on 2
// and 3 threads the changelog and the dead letters equal one thread's
// byte for byte.
func TestRunThreadsTwoInputsRough(t *testing.T) {
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 20_000)
	for _, p := range []string{imps, clicks} {
		roughen(t, p)
	}
	sql := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, clicks), 0o644); err != nil {
		t.Fatal(err)
	}
	var want, wantBad string
	for i, threads := range []int{1, 2, 3} {
		dead := filepath.Join(dir, fmt.Sprintf("dead%d.jsonl", i))
		env, stdout, errb := runTestEnv("")
		if code := Main(context.Background(), env, []string{"run", sql, "--query", "both_seen", "--input", imps, "--format", "jsonl",
			"--no-progress", "--threads", fmt.Sprint(threads), "--dead-letter", dead}); code != 0 {
			t.Fatalf("threads %d: exit %d: %s", threads, code, errb)
		}
		bad, err := os.ReadFile(dead)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want, wantBad = stdout.String(), string(bad)
			if strings.Count(want, "\n") < 1000 || strings.Count(wantBad, "\n") < 40 {
				t.Fatalf("only %d records and %d dead letters", strings.Count(want, "\n"), strings.Count(wantBad, "\n"))
			}
			continue
		}
		if got := stdout.String(); got != want {
			t.Fatalf("%d threads: the changelog differs from one thread's (%d and %d bytes)", threads, len(got), len(want))
		}
		if string(bad) != wantBad {
			t.Fatalf("%d threads: the dead letters differ from one thread's:\n%s\none thread's:\n%s", threads, bad, wantBad)
		}
	}
}

// roughen rewrites a JSON lines file with a byte order mark, CRLF endings
// on every third line, and a blank line, a line of spaces and a malformed
// line every 400 lines.
func roughen(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), utf8BOM...)
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		out = append(out, line...)
		if i%3 == 0 {
			out = append(out, '\r')
		}
		out = append(out, '\n')
		if i%400 == 17 {
			out = append(out, "\n   \n{\"id\": 1, \"ts\": \"yesterday\"}\n"...)
		}
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
