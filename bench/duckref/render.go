package main

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// cellKind says how a column's DuckDB text becomes JSON in the contract.
type cellKind int

const (
	cellString cellKind = iota // VARCHAR, TIMESTAMP, DATE: a JSON string
	cellNumber                 // integers, DECIMAL, DOUBLE: the text as a JSON number
	cellBool                   // BOOLEAN: true or false
)

// kindOf maps a DuckDB type name to how its text is rendered.
func kindOf(duckType string) cellKind {
	t := strings.ToUpper(duckType)
	switch {
	case t == "BOOLEAN":
		return cellBool
	case t == "TINYINT", t == "SMALLINT", t == "INTEGER", t == "BIGINT", t == "HUGEINT",
		t == "UTINYINT", t == "USMALLINT", t == "UINTEGER", t == "UBIGINT", t == "UHUGEINT",
		t == "FLOAT", t == "DOUBLE", strings.HasPrefix(t, "DECIMAL"):
		return cellNumber
	}
	return cellString
}

// appendCell renders one cell from DuckDB's CAST(x AS VARCHAR) text, as the
// frozen contract does: strings quoted, numbers bare, NULL and non-finite
// doubles as null.
func appendCell(b []byte, kind cellKind, text string, valid bool) []byte {
	if !valid {
		return append(b, "null"...)
	}
	switch kind {
	case cellNumber:
		switch text {
		case "nan", "-nan", "inf", "-inf", "NaN", "Infinity", "-Infinity":
			return append(b, "null"...)
		}
		return append(b, text...)
	case cellBool:
		return append(b, text...)
	}
	return appendJSONString(b, text)
}

// appendJSONString quotes s as Python's json.dumps does by default
// (ensure_ascii): every non-ASCII rune as \uXXXX, astral runes as a UTF-16
// surrogate pair.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				if c < 0x20 || c == 0x7f {
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				} else {
					b = append(b, c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		units := []rune{r}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			units = []rune{r1, r2}
		}
		for _, u := range units {
			b = append(b, '\\', 'u', hex[u>>12&0xf], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf])
		}
	}
	return append(b, '"')
}

// appendRecord renders one result row as a changelog line
// {"key": [...], "value": {...}} with json.dumps's separators, the key
// cells being the key columns in GROUP BY order.
func appendRecord(b []byte, names []string, kinds []cellKind, texts []string, valid []bool, keyIdx []int) []byte {
	b = append(b, `{"key": [`...)
	for i, k := range keyIdx {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendCell(b, kinds[k], texts[k], valid[k])
	}
	b = append(b, `], "value": {`...)
	for i := range names {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendJSONString(b, names[i])
		b = append(b, ": "...)
		b = appendCell(b, kinds[i], texts[i], valid[i])
	}
	return append(b, "}}\n"...)
}
