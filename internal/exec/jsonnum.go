package exec

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// fastjson takes any run of digits, '.', '+', '-', 'e' and 'E' for a
// number, and Go's number parsers then read 007, +1, -.5 and 5. as values.
// None of them is JSON, so the reference path checks every number token of
// an event (skipped fields and nested values included, as the scanner
// does) against JSON's grammar; the non-finite words the decoder reads on
// purpose (see nonFinite) are the one exception.

// numChar marks the bytes fastjson takes into a number token (a
// read-only table).
var numChar = func() (t [256]bool) {
	for _, c := range []byte("0123456789.+-eE") {
		t[c] = true
	}
	return t
}()

// badNumber returns the first number token of line that is not JSON and
// its byte offset, or off -1. It reads only the text (asking fastjson's
// values their type would unescape the strings of a JSON column, which
// keeps the text as written): a token counts where a value can start
// (after ':', ',' or '[', or at the start), outside strings, as in
// rewriteNonFinite. line is one fastjson has parsed, so the structure is
// sound and only number tokens need the look. A token is checked as it
// is scanned.
func badNumber(line []byte) (tok []byte, off int) {
	valueStart := true
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			i = stringEnd(line, i+1)
			valueStart = false
			continue
		case ':', ',', '[':
			valueStart = true
			continue
		}
		if valueStart && numChar[c] {
			end, ok := numberToken(line, i)
			if !ok {
				return line[i:end], i
			}
			i = end - 1
		}
		valueStart = false
	}
	return nil, -1
}

// stringEnd returns the index of the quote that closes the string whose
// text starts at line[i], or len(line). An escape takes the byte after
// its backslash, whatever it is.
func stringEnd(line []byte, i int) int {
	for i < len(line) {
		i = nextDelim(line, i)
		if i >= len(line) || line[i] == '"' {
			return i
		}
		i += 2
	}
	return len(line)
}

// nextDelim returns the index of the first '"' or '\\' at or after i, or
// len(line). Most strings of an event are short: their first shortStr
// bytes are read eight at a time (delimIndex, without its ASCII note),
// and only a longer string takes the vector search.
func nextDelim(line []byte, i int) int {
	for n := 0; n < shortStr/8 && i+8 <= len(line); n++ {
		if m := delimMask(binary.LittleEndian.Uint64(line[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	if j, _ := delimIndex(line[i:]); j >= 0 {
		return i + j
	}
	return len(line)
}

// numberToken scans the number token at line[i] (a run of numChar bytes,
// or a signed non-finite word) and returns its end and whether it is
// exactly one JSON number (RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) or one non-finite word
// (see nonFinite), which the decoder reads on purpose.
func numberToken(line []byte, i int) (end int, ok bool) {
	if c := line[i]; c == '-' || c == '+' {
		if _, n := nonFinite(line[i:]); n > 0 {
			return i + n, true
		}
	}
	j := i
	if line[j] == '-' {
		j++
	}
	switch {
	case j < len(line) && line[j] == '0':
		j, ok = j+1, true
	case j < len(line) && line[j] >= '1' && line[j] <= '9':
		j, ok = digitsEnd(line, j+1), true
	}
	if ok && j < len(line) && line[j] == '.' {
		k := digitsEnd(line, j+1)
		j, ok = k, k > j+1
	}
	if ok && j < len(line) && line[j]|0x20 == 'e' {
		j++
		if j < len(line) && (line[j] == '+' || line[j] == '-') {
			j++
		}
		k := digitsEnd(line, j)
		j, ok = k, k > j
	}
	// The grammar reads only numChar bytes: the token goes on to the
	// first other byte, and is JSON when the grammar read all of it.
	end = j
	for end < len(line) && numChar[line[end]] {
		end++
	}
	return end, ok && end == j
}

// digitsEnd returns the end of the run of digits at line[i].
func digitsEnd(line []byte, i int) int {
	for i < len(line) && isDigit(line[i]) {
		i++
	}
	return i
}

// numberError words a number token that is not JSON.
func numberError(tok []byte, off int) *DecodeError {
	why := "not a JSON number"
	switch {
	case len(tok) > 0 && tok[0] == '+':
		why = "not a JSON number: a JSON number has no '+' sign"
	case isDigitAfterZero(tok):
		why = "not a JSON number: a JSON number has no leading zero before another digit"
	case hasBareDot(tok):
		why = "not a JSON number: a JSON number has digits on both sides of '.'"
	}
	return &DecodeError{Msg: fmt.Sprintf("bad JSON: %s at byte %d is %s", clipText(tok), off, why)}
}

// isDigitAfterZero reports whether tok, after an optional '-', is a 0
// followed by a digit.
func isDigitAfterZero(tok []byte) bool {
	if len(tok) > 0 && tok[0] == '-' {
		tok = tok[1:]
	}
	return len(tok) > 1 && tok[0] == '0' && isDigit(tok[1])
}

// hasBareDot reports whether a '.' in tok lacks a digit on either side.
func hasBareDot(tok []byte) bool {
	for i, c := range tok {
		if c == '.' && (i == 0 || !isDigit(tok[i-1]) || i+1 == len(tok) || !isDigit(tok[i+1])) {
			return true
		}
	}
	return false
}
