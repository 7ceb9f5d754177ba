package exec

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStrASCIIMatchesByteScan: the word-at-a-time (then vector) string scan finds the
// same end (closing quote, or the first backslash handed to strEscaped)
// and the same ASCII verdict as a byte-by-byte scan, for every length
// around the word size, every position of the delimiter, and high bytes
// before, at and after it.
func TestStrASCIIMatchesByteScan(t *testing.T) {
	fills := []byte{'a', 0x00, 0x7f, 0x80, 0xc3, 0xff, '"' ^ 0x80, '\\' ^ 0x80, 0x21, 0x23, 0x5b, 0x5d}
	for n := 0; n <= 40; n++ { // past shortStr and a few words beyond
		for _, fill := range fills {
			for hi := -1; hi < n; hi++ { // position of one high byte in an ASCII body, -1: none
				body := bytes.Repeat([]byte{'a'}, n)
				if fill != 'a' {
					for i := range body {
						body[i] = fill
					}
				}
				if hi >= 0 {
					body[hi] = 0xe9
				}
				for _, tail := range []string{`"`, `\n"`, `\"x"`, `"` + "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9", ``} {
					in := append(append([]byte{'"'}, body...), tail...)
					checkStr(t, in)
				}
			}
		}
	}
}

func checkStr(t *testing.T, in []byte) {
	t.Helper()
	// The reference: the first '"' or '\' after the opening quote.
	end := -1
	for i := 1; i < len(in); i++ {
		if in[i] == '"' || in[i] == '\\' {
			end = i
			break
		}
	}
	var scratch []byte
	s := scanner{b: in}
	got, ascii, ok := s.strASCII(&scratch)
	if end < 0 {
		if ok {
			t.Fatalf("%q: ok without a closing quote", in)
		}
		return
	}
	if in[end] == '\\' {
		s2 := scanner{b: in, i: end}
		want, wok := s2.strEscaped(1, &scratch)
		if ok != wok || !bytes.Equal(got, want) || ascii {
			t.Fatalf("%q: escaped string: got %q %v ascii=%v, want %q %v", in, got, ok, ascii, want, wok)
		}
		return
	}
	wantASCII := true
	for _, c := range in[1:end] {
		if c >= utf8.RuneSelf {
			wantASCII = false
		}
	}
	if !ok || !bytes.Equal(got, in[1:end]) || ascii != wantASCII || s.i != end+1 {
		t.Fatalf("%q: got %q ok=%v ascii=%v at %d, want %q ascii=%v at %d", in, got, ok, ascii, s.i, in[1:end], wantASCII, end+1)
	}
}

// FuzzStrASCII: the same agreement on arbitrary bytes.
func FuzzStrASCII(f *testing.F) {
	f.Add([]byte(`"merchant_0042"`))
	f.Add([]byte(`"caf\u00e9 \"x\""`))
	f.Add([]byte("\"\xe9t\xe9 2026-07-18 10:00:00.000\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkStr(t, append([]byte{'"'}, b...))
	})
}

// TestSimpleNumberMatches: the one-pass number read gives what number
// then simpleFloat give, bit for bit, and leaves everything else (and
// the scanner) to them.
func TestSimpleNumberMatches(t *testing.T) {
	ins := []string{"0", "-0", "1", "-1", "123.45", "0.5", "-0.001", "01", "-01", "1.", "-", "", ".5", "1e5", "1E-2", "1.5e3",
		"123456789012345", "1234567890123456", "12345678901234.5", "1234567890123.45", "0.00000000000001", "0.000000000000001",
		"9007199254740993", "1x", "1.2.3", "-x", "2,", "3}", "4 ", "00", "0.0", "499.99", "1.5E", "7e"}
	for _, in := range ins {
		for _, suffix := range []string{"", ",", "}", " ", "e", "5"} {
			b := []byte(in + suffix)
			s := scanner{b: b}
			x, ok := s.simpleNumber()
			r := scanner{b: b}
			num, nok := r.number()
			wx, wok := simpleFloat(num)
			wantOK := nok && wok && (r.i == len(b) || (b[r.i] < '0' || b[r.i] > '9') && b[r.i]|0x20 != 'e')
			if ok != wantOK {
				t.Fatalf("%q: simpleNumber ok=%v, number+simpleFloat ok=%v", b, ok, wantOK)
			}
			if !ok {
				if s.i != 0 {
					t.Fatalf("%q: a refused number moved the scanner to %d", b, s.i)
				}
				continue
			}
			if math.Float64bits(x) != math.Float64bits(wx) || s.i != r.i {
				t.Fatalf("%q: simpleNumber = %v at %d, want %v at %d", b, x, s.i, wx, r.i)
			}
		}
	}
}

// TestSimpleIntMatches: the one-pass integer read gives what number then
// ParseInt give, and leaves everything else (and the scanner) to them.
func TestSimpleIntMatches(t *testing.T) {
	ins := []string{"0", "-0", "1", "-1", "42", "01", "-01", "1.0", "1e3", "1E3", "-", "", "x", "123456789012345678",
		"1234567890123456789", "-123456789012345678", "9223372036854775807", "-9223372036854775808", "2147483648", "00"}
	for _, in := range ins {
		for _, suffix := range []string{"", ",", "}", " ", "5", ".", "e"} {
			b := []byte(in + suffix)
			s := scanner{b: b}
			x, ok := s.simpleInt()
			r := scanner{b: b}
			num, nok := r.number()
			want, err := strconv.ParseInt(string(num), 10, 64)
			next := byte(0)
			if r.i < len(b) {
				next = b[r.i]
			}
			// simpleInt takes the integers of up to 18 digits that number
			// reads whole (no fraction or exponent) and ParseInt accepts.
			digits := len(strings.TrimPrefix(string(num), "-"))
			wantOK := nok && err == nil && digits <= 18 && !(next >= '0' && next <= '9')
			if ok != wantOK {
				t.Fatalf("%q: simpleInt ok=%v, want %v", b, ok, wantOK)
			}
			if !ok {
				if s.i != 0 {
					t.Fatalf("%q: a refused integer moved the scanner to %d", b, s.i)
				}
				continue
			}
			if x != want || s.i != r.i {
				t.Fatalf("%q: simpleInt = %d at %d, want %d at %d", b, x, s.i, want, r.i)
			}
		}
	}
}
