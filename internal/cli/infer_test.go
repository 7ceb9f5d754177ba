package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
)

func TestInferStdin(t *testing.T) {
	in := "{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":2}\n"
	for _, args := range [][]string{{"infer"}, {"infer", "-"}, {"infer", "-", "--name", "ev"}} {
		out, errs, code := runCLI(t, in, args...)
		if code != 0 || !strings.Contains(out, "  id VARCHAR,\n  n BIGINT\n") || strings.Contains(out, "path =") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	out, errs, code := runCLI(t, "id,n\na,1\n", "infer", "--format", "csv")
	if code != 0 || !strings.Contains(out, "format = 'csv'") {
		t.Errorf("csv from stdin: exit %d\n%s%s", code, out, errs)
	}
}

// TestInferPrintsCompilingSQL: what `ubik infer` prints for an input with
// a BOM, nested values, an epoch column, a bad line and disorder compiles.
func TestInferPrintsCompilingSQL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.jsonl")
	in := "\xEF\xBB\xBF" + `{"id":"a","ts_ms":1784368800001,"at":"2026-07-18T10:00:05Z","meta":{"v":1}}
{"id":"b","ts_ms":1784368801000,"at":"2026-07-18T10:00:01Z","meta":[1]}
{broken
{"id":"c","ts_ms":1784368802000,"at":"2026-07-18T10:00:06Z","meta":null}
`
	if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCLI(t, "", "infer", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, w := range []string{"  id VARCHAR,", "  meta JSON,", "TO_TIMESTAMP_LTZ(ts_ms, 3)", "-- skipped 1 malformed lines (first at line 3", "WATERMARK FOR at AS at - INTERVAL '4' SECOND"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in\n%s", w, out)
		}
	}
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Compile(out+"SELECT count(*) FROM events", ""); err != nil {
		t.Fatalf("the suggestion does not compile: %v\n%s", err, out)
	}
}

// TestRunInferNestedJSON: a source inferred with a nested field reads
// every event (a VARCHAR column would reject each object).
func TestRunInferNestedJSON(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "e.jsonl")
	q := filepath.Join(dir, "q.sql")
	os.WriteFile(in, []byte("{\"id\":\"a\",\"meta\":{\"k\":\"x\"}}\n{\"id\":\"b\",\"meta\":{\"k\":\"x\"}}\n"), 0o644)
	os.WriteFile(q, []byte("SELECT meta->>'k' AS k, count(*) AS n FROM events GROUP BY meta->>'k';\n"), 0o644)
	out, errs, code := runCLI(t, "", "run", q, "--infer", "--input", in)
	if code != 0 || !strings.Contains(out, `"n": 2`) || !strings.Contains(errs, "meta JSON") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// TestRunInferStdin: run --infer reads the first records of stdin to infer
// the source, and then runs over all of them, those it read included.
func TestRunInferStdin(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q.sql")
	os.WriteFile(q, []byte("SELECT id, count(*) AS n FROM events GROUP BY id;\n"), 0o644)
	var in strings.Builder
	for i := 0; i < 1500; i++ { // more than the 1000 records inference reads
		fmt.Fprintf(&in, "{\"id\":\"a\",\"n\":%d}\n", i)
	}
	out, errs, code := runCLI(t, in.String(), "run", q, "--infer", "--input", "-")
	if code != 0 || !strings.Contains(errs, "1500 events read") || !strings.Contains(out, `"n": 1500`) {
		t.Fatalf("exit %d\nstderr:\n%s", code, errs)
	}
}
