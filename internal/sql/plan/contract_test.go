package plan

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestDuckDBCastText compiles every input expression of the reference file
// (produced by DuckDB 1.5.6) with ubik's own binder, casts it to VARCHAR and
// compares with DuckDB's text: doubles (Python repr), timestamps, dates,
// decimals, integers and booleans.
func TestDuckDBCastText(t *testing.T) {
	f, err := os.Open("../../../testdata/contract/duckdb_cast_text.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, bad := 0, 0
	for sc.Scan() {
		var c struct{ Type, Input, Duckdb_text string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		x, err := CompileExpr("CAST("+c.Input+" AS VARCHAR)", nil)
		if err != nil {
			t.Errorf("%s: %v", c.Input, err)
			bad++
			continue
		}
		v, err := x.Eval(nil)
		if err != nil || v.Null || v.S != c.Duckdb_text {
			t.Errorf("%s (%s): got %q (err %v), DuckDB says %q", c.Input, c.Type, v.S, err, c.Duckdb_text)
			bad++
		}
		if bad > 20 {
			t.Fatal("too many mismatches")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 8000 {
		t.Fatalf("read only %d vectors", n)
	}
}
