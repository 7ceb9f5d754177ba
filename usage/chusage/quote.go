package chusage

import (
	"strconv"
	"strings"
)

// quoteString renders s as a ClickHouse single-quoted string literal.
//
// ClickHouse 18.16 has no query parameters, so every value that reaches SQL
// text goes through here. Inside a literal, backslash starts an escape and a
// single quote ends it, so both are escaped; every other byte below 0x20,
// and 0x7F, is written as \xHH so the text stays on one line and no byte
// can be read as anything but data. Bytes >= 0x80 pass through unchanged:
// ClickHouse strings are byte strings and the literal keeps them verbatim.
func quoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\'':
			b.WriteString(`\'`)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789ABCDEF"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// quoteInt renders an integer literal.
func quoteInt(n int64) string { return strconv.FormatInt(n, 10) }

// quoteIdent renders a validated identifier in backquotes. Identifiers are
// validated against identRE at Open, so no escaping is needed; the quotes
// keep a name that happens to be a keyword usable.
func quoteIdent(s string) string { return "`" + s + "`" }

// unquoteString parses a literal that quoteString produced, following
// ClickHouse's own escape rules (used by the fuzz test as an oracle of how
// the server reads the text back).
func unquoteString(lit string) (string, bool) {
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\'' {
			return "", false // an unescaped quote would end the literal early
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", false
		}
		switch body[i] {
		case 'x':
			if i+2 >= len(body) {
				return "", false
			}
			v, err := strconv.ParseUint(body[i+1:i+3], 16, 8)
			if err != nil {
				return "", false
			}
			b.WriteByte(byte(v))
			i += 2
		case '\\':
			b.WriteByte('\\')
		case '\'':
			b.WriteByte('\'')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		default:
			return "", false
		}
	}
	return b.String(), true
}
