package exec

import (
	"fmt"

	"github.com/valyala/fastjson"
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

// badNumber returns the first number token in v that is not JSON; bad is
// false when there is none. scratch receives the token's text.
func badNumber(v *fastjson.Value, scratch *[]byte) (tok []byte, bad bool) {
	switch v.Type() {
	case fastjson.TypeNumber:
		*scratch = v.MarshalTo((*scratch)[:0])
		if !isJSONNumber(*scratch) {
			return *scratch, true
		}
	case fastjson.TypeArray:
		a, _ := v.Array()
		for _, e := range a {
			if tok, bad = badNumber(e, scratch); bad {
				return tok, bad
			}
		}
	case fastjson.TypeObject:
		o, _ := v.Object()
		o.Visit(func(_ []byte, e *fastjson.Value) {
			if !bad {
				tok, bad = badNumber(e, scratch)
			}
		})
	}
	return tok, bad
}

// numberError words a number token that is not JSON.
func numberError(tok []byte, field string) *DecodeError {
	why := "not a JSON number"
	switch {
	case len(tok) > 0 && tok[0] == '+':
		why = "not a JSON number: a JSON number has no '+' sign"
	case isDigitAfterZero(tok):
		why = "not a JSON number: a JSON number has no leading zero before another digit"
	case hasBareDot(tok):
		why = "not a JSON number: a JSON number has digits on both sides of '.'"
	}
	return &DecodeError{Msg: fmt.Sprintf("bad JSON: field %q: %s is %s", field, clipText(tok), why)}
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
