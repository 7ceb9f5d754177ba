package changelog

import (
	"fmt"
	"unicode/utf8"
)

// SplitKey returns the raw bytes of each top-level cell of a key array, in
// order; the slices alias key. It accepts any JSON array of scalars (strings,
// numbers, true, false, null) with any JSON whitespace, not only the
// contract's own ", " spelling, and rejects everything else (nested arrays or
// objects, invalid escapes, raw control characters, invalid UTF-8 in a
// string, trailing bytes) with a *KeyError carrying the byte offset.
func SplitKey(key []byte) ([][]byte, error) {
	return AppendSplitKey(nil, key)
}

// AppendSplitKey is SplitKey appending to dst, so that a consumer can reuse
// one slice across records. On error it returns dst as it was.
func AppendSplitKey(dst [][]byte, key []byte) ([][]byte, error) {
	orig := dst
	err := scanKey(key, func(_ int, cell []byte) { dst = append(dst, cell) })
	if err != nil {
		return orig, err
	}
	return dst, nil
}

// GroupKey returns the key array with the cells at windowPositions removed,
// re-joined in the contract's spelling ("[" cell ", " cell "]"): the identity
// of a group across its windows, which a windowed-latest landing upserts by.
// ["acme", "2026-07-18 10:00:00"] with positions [1] gives ["acme"].
// Positions may repeat and come in any order; one outside the array is an
// error wrapping ErrWindowPosition.
func GroupKey(key []byte, windowPositions []int) ([]byte, error) {
	return AppendGroupKey(make([]byte, 0, len(key)), key, windowPositions)
}

// AppendGroupKey is GroupKey appending to dst. On error it returns dst as it
// was. It does not allocate beyond growing dst.
func AppendGroupKey(dst []byte, key []byte, windowPositions []int) ([]byte, error) {
	n0 := len(dst)
	dst = append(dst, '[')
	first := true
	count := 0
	err := scanKey(key, func(i int, cell []byte) {
		count = i + 1
		for _, p := range windowPositions {
			if p == i {
				return
			}
		}
		if !first {
			dst = append(dst, ',', ' ')
		}
		first = false
		dst = append(dst, cell...)
	})
	if err != nil {
		return dst[:n0], err
	}
	for _, p := range windowPositions {
		if p < 0 || p >= count {
			return dst[:n0], fmt.Errorf("%w: position %d in a key of %d cells", ErrWindowPosition, p, count)
		}
	}
	return append(dst, ']'), nil
}

// scanKey validates key as a JSON array of scalars and calls cell for each
// element with its index and raw bytes.
func scanKey(key []byte, cell func(i int, raw []byte)) error {
	i := skipSpace(key, 0)
	if i >= len(key) {
		return keyErr(i, "empty key, want a JSON array")
	}
	if key[i] != '[' {
		return keyErr(i, fmt.Sprintf("want '[', got %q", key[i]))
	}
	i = skipSpace(key, i+1)
	if i < len(key) && key[i] == ']' {
		return trailing(key, i+1)
	}
	for n := 0; ; n++ {
		end, err := scanScalar(key, i)
		if err != nil {
			return err
		}
		cell(n, key[i:end])
		i = skipSpace(key, end)
		if i >= len(key) {
			return keyErr(i, "unterminated array")
		}
		switch key[i] {
		case ',':
			i = skipSpace(key, i+1)
		case ']':
			return trailing(key, i+1)
		default:
			return keyErr(i, fmt.Sprintf("want ',' or ']' after a cell, got %q", key[i]))
		}
	}
}

func trailing(key []byte, i int) error {
	if i = skipSpace(key, i); i != len(key) {
		return keyErr(i, "trailing bytes after the array")
	}
	return nil
}

func keyErr(off int, msg string) error { return &KeyError{Offset: off, Msg: msg} }

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanScalar returns the end offset of the JSON scalar starting at key[i].
func scanScalar(key []byte, i int) (int, error) {
	if i >= len(key) {
		return i, keyErr(i, "unterminated array, want a cell")
	}
	switch c := key[i]; {
	case c == '"':
		return scanString(key, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(key, i)
	case c == 't':
		return scanLiteral(key, i, "true")
	case c == 'f':
		return scanLiteral(key, i, "false")
	case c == 'n':
		return scanLiteral(key, i, "null")
	case c == '[' || c == '{':
		return i, keyErr(i, "nested arrays and objects are not key cells")
	case c == ']':
		return i, keyErr(i, "missing cell before ']'")
	default:
		return i, keyErr(i, fmt.Sprintf("unexpected %q, want a cell", c))
	}
}

func scanLiteral(key []byte, i int, lit string) (int, error) {
	if len(key)-i < len(lit) || string(key[i:i+len(lit)]) != lit {
		return i, keyErr(i, "invalid literal, want "+lit)
	}
	return i + len(lit), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func scanString(key []byte, i int) (int, error) {
	start := i
	for i++; i < len(key); {
		c := key[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(key) {
				return i, keyErr(i, "unterminated escape")
			}
			switch key[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(key)-i < 6 || !isHex(key[i+2]) || !isHex(key[i+3]) || !isHex(key[i+4]) || !isHex(key[i+5]) {
					return i, keyErr(i, `invalid \u escape, want four hex digits`)
				}
				i += 6
			default:
				return i, keyErr(i, fmt.Sprintf("invalid escape %q", key[i+1]))
			}
		case c < 0x20:
			return i, keyErr(i, fmt.Sprintf("raw control character %#02x in a string", c))
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(key[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, keyErr(i, "invalid UTF-8 in a string")
			}
			i += size
		}
	}
	return start, keyErr(start, "unterminated string")
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(key []byte, i int) (int, error) {
	start := i
	if key[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(key) && key[i] >= '0' && key[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(key) && key[i] == '0':
		i++
	case digits() == 0:
		return start, keyErr(i, "invalid number, want a digit")
	}
	if i < len(key) && key[i] == '.' {
		i++
		if digits() == 0 {
			return start, keyErr(i, "invalid number, want a digit after '.'")
		}
	}
	if i < len(key) && (key[i] == 'e' || key[i] == 'E') {
		i++
		if i < len(key) && (key[i] == '+' || key[i] == '-') {
			i++
		}
		if digits() == 0 {
			return start, keyErr(i, "invalid number, want an exponent digit")
		}
	}
	return i, nil
}
