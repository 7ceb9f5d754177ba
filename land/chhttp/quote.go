package chhttp

import "strings"

// AppendQuote appends s as a ClickHouse single-quoted string literal, the
// one form in which the host side puts a string into SQL text: WHERE
// clauses, IN lists and the rows of INSERT ... FORMAT Values, which the
// server reads with the same literal parser.
//
// Inside a literal a backslash starts an escape and a single quote ends
// it, so both are escaped; every other byte below 0x20, and 0x7F, is
// written as \xHH, so the text stays on one line and no byte can be read
// as anything but data. Bytes >= 0x80 pass through unchanged: ClickHouse
// strings are byte strings (invalid UTF-8 included) and the literal keeps
// them verbatim. TestQuoteServer checks every byte against the server.
func AppendQuote(dst []byte, s string) []byte {
	dst = append(dst, '\'')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != 0x7f && c != '\\' && c != '\'' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '\\', '\'':
			dst = append(dst, '\\', c)
		default:
			const hex = "0123456789ABCDEF"
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '\'')
}

// Quote returns s as a string literal (AppendQuote).
func Quote(s string) string {
	return string(AppendQuote(make([]byte, 0, len(s)+2), s))
}

// ValidIdent reports whether name is a plain identifier (a letter or an
// underscore, then letters, digits and underscores), the only database and
// table names the host side accepts.
func ValidIdent(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// QuoteIdent returns name in backquotes, for a name ValidIdent accepted;
// the quotes keep one that happens to be a keyword usable.
func QuoteIdent(name string) string { return "`" + name + "`" }
