package plan

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCaseMapMatchesDuckDB: upper and lower of every code point are
// DuckDB's (testdata/casemap_duckdb.txt, produced by DuckDB through
// bench/duckref), alone and inside a string.
func TestCaseMapMatchesDuckDB(t *testing.T) {
	f, err := os.Open("testdata/casemap_duckdb.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	upper, lower := map[rune]rune{}, map[rune]rune{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var v [5]int64
		fs := strings.Fields(line)
		if len(fs) != 5 {
			t.Fatalf("bad line %q", line)
		}
		for i, s := range fs {
			base := 10
			if i < 2 {
				base = 16
			}
			if v[i], err = strconv.ParseInt(s, base, 32); err != nil {
				t.Fatalf("bad line %q: %v", line, err)
			}
		}
		for c := v[0]; c <= v[1]; c += v[2] {
			upper[rune(c)], lower[rune(c)] = rune(c+v[3]), rune(c+v[4])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if upper['ß'] != 'ẞ' || len(upper) < 2000 {
		t.Fatalf("golden file holds %d mappings, upper(ß) = %q", len(upper), upper['ß'])
	}
	bad := 0
	for c := rune(0); c <= 0x10FFFF && bad < 10; c++ {
		if c >= 0xD800 && c <= 0xDFFF {
			continue
		}
		wu, ok := upper[c]
		if !ok {
			wu = c
		}
		wl, ok := lower[c]
		if !ok {
			wl = c
		}
		s := string(c)
		if got := duckUpper(s); got != string(wu) {
			t.Errorf("upper(U+%04X %q) = %q, DuckDB %q", c, s, got, string(wu))
			bad++
		}
		if got := duckLower(s); got != string(wl) {
			t.Errorf("lower(U+%04X %q) = %q, DuckDB %q", c, s, got, string(wl))
			bad++
		}
	}
	if got := duckUpper("straße Ǆǅǆ"); got != "STRAẞE ǄǄǄ" {
		t.Errorf("upper(straße Ǆǅǆ) = %q", got)
	}
	if got := duckLower("STRAẞE ǄǅǆΣ"); got != "straße ǆǆǆσ" {
		t.Errorf("lower(STRAẞE ǄǅǆΣ) = %q", got)
	}
}
