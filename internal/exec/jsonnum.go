package exec

import (
	"fmt"
	"strings"
)

// fastjson takes any run of digits, '.', '+', '-', 'e' and 'E' for a
// number, and Go's number parsers then read 007, +1, -.5 and 5. as values.
// None of them is JSON, so the reference path checks every number token of
// an event (skipped fields and nested values included, as the scanner
// does) against JSON's grammar; the non-finite words the decoder reads on
// purpose (see nonFinite) are the one exception.

// isJSONNumber reports whether b is exactly one JSON number (RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) or one non-finite word.
func isJSONNumber(b []byte) bool {
	if _, n := nonFinite(b); n > 0 {
		return n == len(b)
	}
	s := scanner{b: b}
	_, ok := s.number()
	return ok && s.i == len(b)
}

// badNumber returns the first number token of line that is not JSON and
// its byte offset, or off -1. It reads only the text (asking fastjson's
// values their type would unescape the strings of a JSON column, which
// keeps the text as written): a token counts where a value can start
// (after ':', ',' or '[', or at the start), outside strings, as in
// rewriteNonFinite. line is one fastjson has parsed, so the structure is
// sound and only number tokens need the look.
func badNumber(line []byte) (tok []byte, off int) {
	inStr, valueStart := false, true
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr, valueStart = false, false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inStr = true
			continue
		case ':', ',', '[':
			valueStart = true
			continue
		}
		if valueStart && (isDigit(c) || strings.IndexByte("-+.eE", c) >= 0) {
			j := i
			if _, n := nonFinite(line[i:]); n > 0 {
				j += n
			} else {
				for j < len(line) && (isDigit(line[j]) || strings.IndexByte(".eE+-", line[j]) >= 0) {
					j++
				}
			}
			if !isJSONNumber(line[i:j]) {
				return line[i:j], i
			}
			i = j - 1
		}
		valueStart = false
	}
	return nil, -1
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
