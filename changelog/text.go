package changelog

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// verbatim[b] is true for the bytes json.dumps(ensure_ascii=True) copies as
// they are: printable ASCII 0x20..0x7e except '"' and '\\'. DEL (0x7f) is
// escaped, as CPython's encoder does.
var verbatim = func() (t [256]bool) {
	for b := 0x20; b <= 0x7e; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string exactly as Python 3's json.dumps
// prints it with its default ensure_ascii=True: the two-character escapes
// \" \\ \n \r \t \b \f, every other byte below 0x20 and DEL as \u00XX, every
// non-ASCII character as \uXXXX (a surrogate pair above U+FFFF), lowercase
// hex, '/' unescaped. The output is pure ASCII.
//
// s need not be valid UTF-8: each maximal invalid subpart (a byte that cannot
// start a sequence, or the longest prefix of a sequence that cannot be
// completed) becomes one U+FFFD, the rule of Python's
// bytes.decode("utf-8", "replace") and of the WHATWG decoder.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if verbatim[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = appendU4(dst, rune(b))
			}
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			size = invalidSubpart(s[i:])
		}
		if r >= 0x10000 {
			// UTF-16 surrogate pair, as ensure_ascii writes it.
			r -= 0x10000
			dst = appendU4(dst, 0xd800+(r>>10)&0x3ff)
			dst = appendU4(dst, 0xdc00+r&0x3ff)
		} else {
			dst = appendU4(dst, r)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendU4 appends \uXXXX for a code unit below 0x10000.
func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// invalidSubpart returns the length of the maximal subpart of an ill-formed
// UTF-8 sequence at the start of s (s[0] >= 0x80 and utf8 rejected it): the
// lead byte plus the continuation bytes that a well-formed sequence with that
// lead could have, stopping at the first that could not. At least 1.
func invalidSubpart(s string) int {
	b0 := s[0]
	need := 0
	lo, hi := byte(0x80), byte(0xbf) // range of the second byte
	switch {
	case b0 >= 0xc2 && b0 <= 0xdf:
		need = 2
	case b0 == 0xe0:
		need, lo = 3, 0xa0
	case b0 == 0xed:
		need, hi = 3, 0x9f // no UTF-16 surrogates
	case b0 >= 0xe1 && b0 <= 0xef:
		need = 3
	case b0 == 0xf0:
		need, lo = 4, 0x90
	case b0 >= 0xf1 && b0 <= 0xf3:
		need = 4
	case b0 == 0xf4:
		need, hi = 4, 0x8f // nothing above U+10FFFF
	default:
		return 1 // 0x80..0xc1 and 0xf5..0xff never start a sequence
	}
	n := 1
	for n < need && n < len(s) {
		c := s[n]
		if n == 1 {
			if c < lo || c > hi {
				break
			}
		} else if c < 0x80 || c > 0xbf {
			break
		}
		n++
	}
	return n
}

// RepairUTF8 returns s with each maximal invalid UTF-8 subpart replaced by
// U+FFFD, the string AppendString encodes. It returns s itself when s is
// valid.
func RepairUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
			i += invalidSubpart(s[i:])
			continue
		}
		out = append(out, s[i:i+size]...)
		i += size
	}
	return string(out)
}
