package usage

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSONText refuses JSON text that encoding/json would silently repair:
// bytes that are not UTF-8 and \u escapes of unpaired surrogates, both of
// which it turns into U+FFFD, so two different keys ("u\xff", "u\xfe")
// would become one. The API refuses invalid UTF-8; JSON input must not
// reach it already repaired.
func checkJSONText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("not valid UTF-8 (byte %d is 0x%02x)", i+1, b[i])
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		i++ // the escaped character; a backslash is only ever inside a string
		if b[i] != 'u' {
			continue
		}
		r1, ok := hex4(b, i+1)
		if !ok || !utf16.IsSurrogate(r1) {
			continue
		}
		if r1 < 0xdc00 && i+10 < len(b) && b[i+5] == '\\' && b[i+6] == 'u' {
			if r2, ok := hex4(b, i+7); ok && utf16.DecodeRune(r1, r2) != utf8.RuneError {
				i += 10 // a valid pair
				continue
			}
		}
		return fmt.Errorf(`\u%s at byte %d is an unpaired surrogate, not a character`, b[i+1:i+5], i)
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape starting at b[i].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
