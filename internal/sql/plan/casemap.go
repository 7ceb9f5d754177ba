package plan

import (
	"strings"
	"unicode"
)

// DuckDB maps case one code point at a time with utf8proc's simple case
// mappings. Go's unicode.ToUpper and unicode.ToLower agree with it on every
// code point but one: DuckDB 1.5 upper-cases ß (U+00DF) to ẞ (U+1E9E),
// where Go keeps ß. testdata/casemap_duckdb.txt holds DuckDB's mappings of
// every code point; casemap_test.go holds ubik to it.

// duckUpper is DuckDB's upper.
func duckUpper(s string) string {
	if !strings.Contains(s, "ß") {
		return strings.ToUpper(s)
	}
	return strings.Map(func(r rune) rune {
		if r == 'ß' {
			return 'ẞ'
		}
		return unicode.ToUpper(r)
	}, s)
}

// duckLower is DuckDB's lower: Go's simple lower-case mapping is the same
// on every code point.
func duckLower(s string) string { return strings.ToLower(s) }
