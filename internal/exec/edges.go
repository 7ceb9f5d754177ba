package exec

import (
	"bytes"
	"math"
	"unicode/utf8"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// The input edges both JSON decoding paths share (the scanner and the
// fastjson reference path must agree on every line):
//
//   - a string cell that is not valid UTF-8 is repaired (each maximal
//     invalid subpart becomes U+FFFD), so cells that render alike are equal;
//   - a \u escape of a UTF-16 surrogate that is not part of a high-low pair
//     makes the line malformed, as in DuckDB;
//   - a DOUBLE reads the non-finite numbers producers write: an optional
//     sign, then nan, inf or infinity in any case (Python's json.dumps
//     writes NaN, Infinity and -Infinity; so do Java's Gson and Jackson
//     when they write them unquoted). The sign of a NaN is dropped.

// repairUTF8 returns b, or a repaired copy when b is not valid UTF-8.
func repairUTF8(b []byte) []byte {
	if isASCII(bytesString(b)) || utf8.Valid(b) {
		return b
	}
	return []byte(changelog.RepairUTF8(string(b)))
}

// repairString is repairUTF8 for a string.
func repairString(s string) string {
	if isASCII(s) {
		return s
	}
	return changelog.RepairUTF8(s)
}

// loneSurrogate returns the offset of the first \u escape in line that
// encodes a UTF-16 surrogate outside a high-low pair, or -1. Backslashes
// only occur inside strings in valid JSON, so the walk needs no string
// state; an escaped backslash is skipped as a unit.
func loneSurrogate(line []byte) int {
	i := bytes.IndexByte(line, '\\')
	if i < 0 {
		return -1
	}
	for ; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		if i+1 >= len(line) {
			return -1
		}
		if line[i+1] != 'u' {
			i++ // \\ \" \n ...: the escaped byte is not a backslash
			continue
		}
		r, ok := hexAt(line, i+2)
		if !ok || r < 0xd800 || r > 0xdfff {
			i++
			continue
		}
		if r >= 0xdc00 {
			return i // a low surrogate with no high one before it
		}
		if i+7 < len(line) && line[i+6] == '\\' && line[i+7] == 'u' {
			if r2, ok := hexAt(line, i+8); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
				i += 11 // the pair
				continue
			}
		}
		return i
	}
	return -1
}

// hexAt reads four hex digits at b[i:].
func hexAt(b []byte, i int) (rune, bool) { return plan.Hex4(b[i:]) }

// nonFinite is plan.ReadNonFinite: the non-finite spellings a DOUBLE reads.
func nonFinite(b []byte) (float64, int) { return plan.ReadNonFinite(b) }

// rewriteNonFinite appends line to dst with every non-finite number token
// outside strings (see nonFinite) respelled as fastjson reads it: nan, inf
// or -inf. It reports whether it changed anything. A token counts only
// where a value can start (after ':', ',' or '[', or at the start) and
// when a delimiter follows it, so nothing else is touched.
func rewriteNonFinite(dst, line []byte) ([]byte, bool) {
	changed := false
	inStr := false
	valueStart := true // the previous significant byte can precede a value
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inStr {
			dst = append(dst, c)
			switch c {
			case '\\':
				if i+1 < len(line) {
					i++
					dst = append(dst, line[i])
				}
			case '"':
				inStr = false
				valueStart = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, c)
			continue
		case '"':
			inStr = true
			dst = append(dst, c)
			continue
		case ':', ',', '[', '{':
			valueStart = c != '{'
			dst = append(dst, c)
			continue
		}
		if valueStart {
			if x, n := nonFinite(line[i:]); n > 0 && (i+n == len(line) || isDelim(line[i+n])) {
				switch {
				case math.IsNaN(x):
					dst = append(dst, "nan"...)
				case x > 0:
					dst = append(dst, "inf"...)
				default:
					dst = append(dst, "-inf"...)
				}
				changed = true
				i += n - 1
				valueStart = false
				continue
			}
		}
		valueStart = false
		dst = append(dst, c)
	}
	return dst, changed
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ']', '}':
		return true
	}
	return false
}
