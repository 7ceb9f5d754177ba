package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const scriptPathSQL = `CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl', path = 'data/ev.jsonl');
CREATE TABLE p (k VARCHAR, v BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf) WITH (format = 'jsonl', path = 'data/p.jsonl');
CREATE VIEW j AS SELECT e.k, sum(p.v) AS total FROM ev e JOIN p FOR SYSTEM_TIME AS OF e.ts ON e.k = p.k
GROUP BY e.k, TUMBLE(e.ts, INTERVAL '10' SECOND);
CREATE SINK out FROM j WITH (path = 'j.tsv');`

// TestScriptPathsRelativeToScript: a relative WITH (path = ...) of a
// source, a table or a sink is relative to the script's folder, whatever
// the working directory; --input and --output stay relative to the
// working directory.
func TestScriptPathsRelativeToScript(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "proj")
	if err := os.MkdirAll(filepath.Join(proj, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(filepath.Join(proj, "q.sql"), scriptPathSQL)
	put(filepath.Join(proj, "data", "p.jsonl"), `{"k":"a","v":5,"vf":"2026-07-18 10:00:00"}`+"\n")
	put(filepath.Join(proj, "data", "ev.jsonl"), `{"k":"a","ts":"2026-07-18 10:00:01"}`+"\n")
	put(filepath.Join(dir, "cwd.jsonl"), `{"k":"a","ts":"2026-07-18 10:00:01"}`+"\n"+`{"k":"a","ts":"2026-07-18 10:00:02"}`+"\n")
	t.Chdir(dir)

	env, _, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", "proj/q.sql", "--no-progress"}); code != 0 {
		t.Fatalf("run from another folder: exit %d: %s", code, errb)
	}
	b, err := os.ReadFile(filepath.Join(proj, "j.tsv"))
	if err != nil || !strings.Contains(string(b), `"total": 5`) {
		t.Fatalf("the sink's path is not the script's folder's: %s (%v)", b, err)
	}

	// Flags are the working directory's: --input cwd.jsonl is dir's, and
	// --output proj/j.tsv names the sink's own file (not another).
	env, _, errb = runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", "proj/q.sql", "--no-progress", "--input", "cwd.jsonl", "--output", "proj/j.tsv"}); code != 0 {
		t.Fatalf("run with flags: exit %d: %s", code, errb)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "j.tsv")); err != nil || !strings.Contains(string(b), `"total": 10`) {
		t.Fatalf("--input/--output not the working directory's: %s (%v)", b, err)
	}

	// explain shows the files a run reads.
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", "proj/q.sql"}); code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errb)
	}
	for _, want := range []string{filepath.Join("proj", "data", "ev.jsonl"), filepath.Join("proj", "data", "p.jsonl")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain does not show %s:\n%s", want, out)
		}
	}
}
