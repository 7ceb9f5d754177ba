package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files this package checks with DuckDB's output")

// caseMapGolden is the main module's copy of DuckDB's case mappings, which
// ubik's upper and lower are tested against.
var caseMapGolden = filepath.Join("..", "..", "internal", "sql", "plan", "testdata", "casemap_duckdb.txt")

// TestCaseMapGolden: the golden file holds DuckDB's upper and lower of every
// code point (U+0000..U+10FFFF but the surrogates), as DuckDB computes them
// now. -update rewrites it.
func TestCaseMapGolden(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version string
	if err := db.QueryRow(`SELECT version()`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT i::INTEGER, upper(chr(i::INTEGER)), lower(chr(i::INTEGER)) FROM range(0, 1114112) t(i)
		WHERE i < 55296 OR i > 57343 ORDER BY i`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type delta struct{ du, dl int }
	byDelta := map[delta][]int{}
	n := 0
	for rows.Next() {
		var c int
		var u, l string
		if err := rows.Scan(&c, &u, &l); err != nil {
			t.Fatal(err)
		}
		n++
		ur, un := utf8.DecodeRuneInString(u)
		lr, ln := utf8.DecodeRuneInString(l)
		if un != len(u) || ln != len(l) {
			t.Fatalf("U+%04X: upper %q, lower %q: not one code point each (the golden format assumes it)", c, u, l)
		}
		if d := (delta{int(ur) - c, int(lr) - c}); d != (delta{}) {
			byDelta[d] = append(byDelta[d], c)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 0x110000-0x800 {
		t.Fatalf("DuckDB returned %d code points", n)
	}
	// Runs of code points first, first+step, ..., last that share deltas.
	type run struct{ first, last, step, du, dl int }
	var runs []run
	for d, cs := range byDelta {
		for i := 0; i < len(cs); {
			r := run{first: cs[i], last: cs[i], step: 1, du: d.du, dl: d.dl}
			j := i + 1
			if j < len(cs) {
				r.step = cs[j] - cs[i]
				for j < len(cs) && cs[j]-cs[j-1] == r.step {
					r.last = cs[j]
					j++
				}
			}
			if r.first == r.last {
				r.step = 1
			}
			runs = append(runs, r)
			i = j
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].first < runs[j].first })
	var b strings.Builder
	fmt.Fprintf(&b, "# DuckDB %s: upper and lower of every code point U+0000..U+10FFFF but the\n", version)
	b.WriteString("# surrogates, written by bench/duckref's TestCaseMapGolden (go test -run CaseMap -update).\n")
	b.WriteString("# A line \"first last step du dl\" (code points in hex, deltas in decimal) says: for\n")
	b.WriteString("# c = first, first+step, ..., last, upper(c) = c+du and lower(c) = c+dl. A code\n")
	b.WriteString("# point on no line is its own upper and lower case.\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "%X %X %d %d %d\n", r.first, r.last, r.step, r.du, r.dl)
	}
	if *update {
		if err := os.WriteFile(caseMapGolden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(caseMapGolden)
	if err != nil {
		t.Fatal(err)
	}
	if string(old) != b.String() {
		t.Fatalf("%s is not DuckDB's case mapping any more; rerun with -update and check ubik against it", caseMapGolden)
	}
}
