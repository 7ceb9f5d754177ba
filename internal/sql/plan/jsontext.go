package plan

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ubiksql/ubik/changelog"
)

// AppendCanonicalJSON appends the canonical text of the JSON value text to
// dst: the form DuckDB's JSON functions print (json_extract, ->), so that
// the spellings of one value are one cell, and one group.
//
//   - no whitespace between tokens; object members in their order,
//     duplicates kept;
//   - a string is unescaped and written again with the escapes \" \\ \b \f
//     \n \r \t, \u00XX (uppercase hex) for the other bytes below 0x20, and
//     every other character as itself in UTF-8 ('/', DEL and non-ASCII are
//     not escaped); an invalid UTF-8 subpart becomes U+FFFD (the rule of
//     changelog.RepairUTF8);
//   - an integer that fits 64 bits (signed or unsigned) is written as its
//     digits, -0 as 0; a longer one as written;
//   - any other number is read as a double and written in the shortest
//     form that reads back: fixed notation with at least one fractional
//     digit when 1e-7 < |x| < 1e21 (100.0, 0.000001, -0.0), else d[.ddd]e±N
//     with no '+' and no padding (1e21, 1e-7, 1.5e300); a number beyond the
//     double range is written as it was;
//   - a non-finite number, in any of the spellings the decoder reads (an
//     optional sign, then nan, inf or infinity in any case), is written
//     NaN, Infinity or -Infinity (DuckDB keeps the producer's spelling).
//
// A lone surrogate escape, a raw control character in a string, or text
// that is not one JSON value, is an error.
func AppendCanonicalJSON(dst, text []byte) ([]byte, error) {
	if !utf8.Valid(text) {
		text = []byte(changelog.RepairUTF8(string(text)))
	}
	c := canonJSON{b: text}
	c.ws()
	out, err := c.value(dst, 0)
	if err != nil {
		return dst, err
	}
	c.ws()
	if c.i != len(c.b) {
		return dst, c.errf("unexpected %q after the value", c.b[c.i])
	}
	return out, nil
}

// maxJSONDepth bounds nesting (fastjson's own limit).
const maxJSONDepth = 300

type canonJSON struct {
	b []byte
	i int
}

func (c *canonJSON) errf(format string, args ...any) error {
	return fmt.Errorf("bad JSON at byte %d: %s", c.i, fmt.Sprintf(format, args...))
}

func (c *canonJSON) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonJSON) lit(w string) bool {
	if len(c.b)-c.i >= len(w) && string(c.b[c.i:c.i+len(w)]) == w {
		c.i += len(w)
		return true
	}
	return false
}

func (c *canonJSON) value(dst []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return dst, c.errf("nested deeper than %d", maxJSONDepth)
	}
	if c.i >= len(c.b) {
		return dst, c.errf("unexpected end")
	}
	switch c.b[c.i] {
	case '{':
		c.i++
		dst = append(dst, '{')
		c.ws()
		if c.i < len(c.b) && c.b[c.i] == '}' {
			c.i++
			return append(dst, '}'), nil
		}
		for {
			c.ws()
			if c.i >= len(c.b) || c.b[c.i] != '"' {
				return dst, c.errf("expected a member name")
			}
			var err error
			if dst, err = c.str(dst); err != nil {
				return dst, err
			}
			c.ws()
			if !c.lit(":") {
				return dst, c.errf("expected ':'")
			}
			dst = append(dst, ':')
			c.ws()
			if dst, err = c.value(dst, depth+1); err != nil {
				return dst, err
			}
			c.ws()
			switch {
			case c.lit(","):
				dst = append(dst, ',')
			case c.lit("}"):
				return append(dst, '}'), nil
			default:
				return dst, c.errf("expected ',' or '}'")
			}
		}
	case '[':
		c.i++
		dst = append(dst, '[')
		c.ws()
		if c.i < len(c.b) && c.b[c.i] == ']' {
			c.i++
			return append(dst, ']'), nil
		}
		for {
			c.ws()
			var err error
			if dst, err = c.value(dst, depth+1); err != nil {
				return dst, err
			}
			c.ws()
			switch {
			case c.lit(","):
				dst = append(dst, ',')
			case c.lit("]"):
				return append(dst, ']'), nil
			default:
				return dst, c.errf("expected ',' or ']'")
			}
		}
	case '"':
		return c.str(dst)
	case 't':
		if c.lit("true") {
			return append(dst, "true"...), nil
		}
	case 'f':
		if c.lit("false") {
			return append(dst, "false"...), nil
		}
	case 'n':
		if c.lit("null") {
			return append(dst, "null"...), nil
		}
	}
	if x, n := ReadNonFinite(c.b[c.i:]); n > 0 {
		c.i += n
		switch {
		case math.IsNaN(x):
			return append(dst, "NaN"...), nil
		case x < 0:
			return append(dst, "-Infinity"...), nil
		}
		return append(dst, "Infinity"...), nil
	}
	return c.number(dst)
}

// ReadNonFinite reads a non-finite number at the start of b: an optional
// sign, then nan, infinity or inf in any case (the spellings Python's
// json.dumps, Java's Gson and Jackson, C and Go formatters write). It
// returns the value (the sign of a NaN dropped) and the length read, 0 when
// b does not start with one. The decoder and the canonical JSON text share
// it, so they accept the same words.
func ReadNonFinite(b []byte) (float64, int) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	switch {
	case hasFold(b[i:], "nan"):
		return math.NaN(), i + 3
	case hasFold(b[i:], "infinity"):
		i += 8
	case hasFold(b[i:], "inf"):
		i += 3
	default:
		return 0, 0
	}
	if neg {
		return math.Inf(-1), i
	}
	return math.Inf(1), i
}

// hasFold reports whether b starts with the lowercase ASCII word w, in any
// case.
func hasFold(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if b[j]|0x20 != w[j] {
			return false
		}
	}
	return true
}

// Hex4 reads the four hex digits of a \u escape at the start of b.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, ch := range b[:4] {
		r <<= 4
		switch {
		case ch >= '0' && ch <= '9':
			r |= rune(ch - '0')
		case ch >= 'a' && ch <= 'f':
			r |= rune(ch-'a') + 10
		case ch >= 'A' && ch <= 'F':
			r |= rune(ch-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

func (c *canonJSON) number(dst []byte) ([]byte, error) {
	start := c.i
	c.lit("-")
	switch {
	case c.lit("0"):
	case c.i < len(c.b) && c.b[c.i] >= '1' && c.b[c.i] <= '9':
		c.digits()
	default:
		return dst, c.errf("unexpected %q", c.b[start:min(start+1, len(c.b))])
	}
	integer := true
	if c.lit(".") {
		integer = false
		if !c.digits() {
			return dst, c.errf("expected a digit after '.'")
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		integer = false
		c.i++
		if !c.lit("+") {
			c.lit("-")
		}
		if !c.digits() {
			return dst, c.errf("expected a digit in the exponent")
		}
	}
	num := string(c.b[start:c.i])
	if integer {
		if num == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, num...), nil // as written: a 64-bit integer or a longer one
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(x, 0) {
		return append(dst, num...), nil // beyond the double range: as written
	}
	return appendJSONDouble(dst, x), nil
}

// appendJSONDouble writes a finite double as DuckDB's JSON writer does.
func appendJSONDouble(dst []byte, x float64) []byte {
	if x == 0 {
		if math.Signbit(x) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if a := math.Abs(x); a > 1e-7 && a < 1e21 {
		n := len(dst)
		dst = strconv.AppendFloat(dst, x, 'f', -1, 64)
		for _, ch := range dst[n:] {
			if ch == '.' {
				return dst
			}
		}
		return append(dst, '.', '0')
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, x, 'e', -1, 64)
	// Go writes e+21 and e-07: drop the '+' and the exponent's leading zeros.
	e := n + bytes.IndexByte(dst[n:], 'e')
	exp := dst[e+1:]
	neg := exp[0] == '-'
	digits := strings.TrimLeft(string(exp[1:]), "0")
	dst = dst[:e+1]
	if neg {
		dst = append(dst, '-')
	}
	return append(dst, digits...)
}

func (c *canonJSON) digits() bool {
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	return c.i > start
}

const upperHex = "0123456789ABCDEF"

// str reads a string at c.i (its opening quote) and writes it canonically.
func (c *canonJSON) str(dst []byte) ([]byte, error) {
	c.i++ // the quote
	dst = append(dst, '"')
	for {
		if c.i >= len(c.b) {
			return dst, c.errf("unterminated string")
		}
		ch := c.b[c.i]
		switch {
		case ch == '"':
			c.i++
			return append(dst, '"'), nil
		case ch == '\\':
			r, err := c.escape()
			if err != nil {
				return dst, err
			}
			dst = appendJSONRune(dst, r)
		case ch < 0x20:
			return dst, c.errf("raw control character 0x%02x in a string (write it as an escape)", ch)
		case ch < utf8.RuneSelf:
			dst = appendJSONRune(dst, rune(ch))
			c.i++
		default:
			_, size := utf8.DecodeRune(c.b[c.i:]) // valid: AppendCanonicalJSON repaired it
			dst = append(dst, c.b[c.i:c.i+size]...)
			c.i += size
		}
	}
}

// escape reads one escape at c.i (its backslash) and returns its
// character; a surrogate pair is one character.
func (c *canonJSON) escape() (rune, error) {
	at := c.i
	if c.i+1 >= len(c.b) {
		return 0, c.errf("unterminated escape")
	}
	e := c.b[c.i+1]
	c.i += 2
	switch e {
	case '"', '\\', '/':
		return rune(e), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := c.hex4()
		if !ok {
			return 0, c.errf("bad \\u escape")
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if r < 0xdc00 && c.lit(`\u`) {
			if r2, ok := c.hex4(); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, nil
				}
			}
		}
		c.i = at
		return 0, c.errf("lone surrogate escape %s", c.b[at:at+6])
	}
	c.i = at
	return 0, c.errf("bad escape \\%c", e)
}

func (c *canonJSON) hex4() (rune, bool) {
	r, ok := Hex4(c.b[c.i:])
	if ok {
		c.i += 4
	}
	return r, ok
}

// appendJSONRune writes one character of a canonical JSON string.
func appendJSONRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', upperHex[r>>4], upperHex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}
