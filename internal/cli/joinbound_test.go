package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunIntervalJoinBound runs an interval join whose five-minute bound
// holds about 10,000 rows at once: with --join-buffer 8000 the run stops
// (status 1), past its first checkpoint, with an error that gives the
// count, the flag and the cost of a held row; the same command with a larger --join-buffer resumes
// from the state dir to the changelog of a run with the default bound.
// --join-buffer 0 is a usage error, and explain gives the cost per row.
func TestRunIntervalJoinBound(t *testing.T) {
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 120_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, ijoinRunSQL, clicks), 0o644)
	run := func(extra ...string) (int, string) {
		env, _, errb := runTestEnv("")
		args := append([]string{"run", sql, "--input", imps, "--format", "jsonl", "--no-progress"}, extra...)
		return Main(context.Background(), env, args), errb.String()
	}
	ref := filepath.Join(dir, "ref.jsonl")
	if code, errs := run("--output", ref); code != 0 {
		t.Fatalf("default bound: exit %d: %s", code, errs)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	code, errs := run("--output", got, "--state-dir", state, "--checkpoint-interval", "1ms", "--join-buffer", "8000")
	for _, want := range []string{"interval join state full: it holds 8000 rows", "--join-buffer (now 8000)", "bytes per held row of impressions",
		"with --state-dir the same command with a larger --join-buffer resumes"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Fatalf("--join-buffer 8000: exit %d, want 1 and %q in:\n%s", code, want, errs)
		}
	}
	t.Logf("crossing the bound:\n%s", errs)
	if code, errs := run("--output", got, "--state-dir", state, "--checkpoint-interval", "1ms", "--join-buffer", "20000"); code != 0 || !strings.Contains(errs, "resuming from line") {
		t.Fatalf("--join-buffer 20000 over the state dir: exit %d: %s", code, errs)
	}
	refB, _ := os.ReadFile(ref)
	gotB, _ := os.ReadFile(got)
	if len(refB) < 1000 || !bytes.Equal(refB, gotB) {
		t.Fatalf("the resumed changelog differs from the default bound's (%d vs %d bytes)", len(refB), len(gotB))
	}
	if code, errs := run("--output", got, "--join-buffer", "0"); code != 2 || !strings.Contains(errs, "--join-buffer must be at least 1") {
		t.Fatalf("--join-buffer 0: exit %d: %s", code, errs)
	}
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 ||
		!strings.Contains(out.String(), "interval join state: about 234 bytes per held row of impressions and 186 of clicks") {
		t.Fatalf("explain: exit %d: %s%s", code, out, errb)
	}
}
