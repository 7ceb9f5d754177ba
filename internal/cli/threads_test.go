package cli

import (
	"context"
	"fmt"
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
