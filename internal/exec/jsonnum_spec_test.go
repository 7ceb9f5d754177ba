package exec

import (
	"bytes"
	"strings"
	"testing"
)

// The number check as first written, token by token (a run scanned, then
// checked against the grammar on its own): badNumber must find exactly
// what it finds, on any bytes.

// specIsJSONNumber reports whether b is exactly one JSON number or one
// non-finite word.
func specIsJSONNumber(b []byte) bool {
	if _, n := nonFinite(b); n > 0 {
		return n == len(b)
	}
	s := scanner{b: b}
	_, ok := s.number()
	return ok && s.i == len(b)
}

// specBadNumber is badNumber's definition.
func specBadNumber(line []byte) (tok []byte, off int) {
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
			if !specIsJSONNumber(line[i:j]) {
				return line[i:j], i
			}
			i = j - 1
		}
		valueStart = false
	}
	return nil, -1
}

func checkBadNumber(t *testing.T, line []byte) {
	t.Helper()
	tok, off := badNumber(line)
	wtok, woff := specBadNumber(line)
	if off != woff || !bytes.Equal(tok, wtok) {
		t.Fatalf("%q: badNumber found %q at %d, the definition %q at %d", line, tok, off, wtok, woff)
	}
}

var badNumberSeeds = []string{
	`{"a":1,"b":-2.5e+3,"c":[0,-0,1e5,007]}`, `{"s":"x\"1","n":+1}`, `{"s":"\\","n":.5}`, `{"s":"\\\"","n":01}`,
	`{"d":-Infinity,"e":+nan,"f":-inf,"g":-infinit}`, `{"d":1.e5}`, `{"d":5.}`, `[1,2,-]`, `{"a":"unterminated`,
	`{"a":1}`, `"\\\\\\"`, `{"a":{"b":[1,{"c":1E-3}]}}`, `{"a" : 12 , "b" :-.5}`, `01`, `-`, `+Infinity`, `{"a":"\\"}:01`,
}

// FuzzBadNumber: badNumber and its definition agree on any bytes.
func FuzzBadNumber(f *testing.F) {
	for _, s := range badNumberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkBadNumber(t, line) })
}

// TestBadNumberAgrees runs the property over the seeds and over every
// prefix of them on every run.
func TestBadNumberAgrees(t *testing.T) {
	for _, s := range badNumberSeeds {
		for n := 0; n <= len(s); n++ {
			checkBadNumber(t, []byte(s[:n]))
			checkBadNumber(t, []byte(s[n:]))
		}
	}
}

// BenchmarkBadNumber: the number check of the reference path over
// standard events, as it is and as first written (each token scanned,
// then checked on its own; strings a byte at a time).
func BenchmarkBadNumber(b *testing.B) {
	lines := benchLines(4096)
	for _, bc := range []struct {
		name string
		f    func([]byte) ([]byte, int)
	}{{"onepass", badNumber}, {"definition", specBadNumber}} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, off := bc.f(lines[i&4095]); off >= 0 {
					b.Fatal("a bad number in a standard event")
				}
			}
		})
	}
}
