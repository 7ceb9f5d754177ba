package parser

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQIdent // "quoted identifier"
	tNumber
	tString
	tOp
)

func (k tokKind) String() string {
	switch k {
	case tEOF:
		return "end of input"
	case tIdent, tQIdent:
		return "identifier"
	case tNumber:
		return "number"
	case tString:
		return "string"
	}
	return "operator"
}

type token struct {
	kind tokKind
	pos  int // byte offset of the first character
	end  int // byte offset after the last character
	text string
}

// lex splits sql into tokens, dropping whitespace and comments. The last
// token is always tEOF.
func lex(sql string) ([]token, *Error) {
	var toks []token
	i := 0
	for {
		// skip whitespace and comments
		for i < len(sql) {
			c := sql[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
				i++
				continue
			}
			if c == '-' && i+1 < len(sql) && sql[i+1] == '-' {
				j := strings.IndexByte(sql[i:], '\n')
				if j < 0 {
					i = len(sql)
				} else {
					i += j + 1
				}
				continue
			}
			if c == '/' && i+1 < len(sql) && sql[i+1] == '*' {
				j := strings.Index(sql[i+2:], "*/")
				if j < 0 {
					return nil, NewError(sql, i, "unterminated /* comment")
				}
				i += 2 + j + 2
				continue
			}
			break
		}
		if i >= len(sql) {
			toks = append(toks, token{kind: tEOF, pos: len(sql), end: len(sql)})
			return toks, nil
		}
		start := i
		c := sql[i]
		switch {
		case c == '\'':
			s, n, ok := quoted(sql[i:], '\'')
			if !ok {
				return nil, NewError(sql, start, "unterminated string literal")
			}
			i += n
			toks = append(toks, token{kind: tString, pos: start, end: i, text: s})
		case c == '"':
			s, n, ok := quoted(sql[i:], '"')
			if !ok {
				return nil, NewError(sql, start, "unterminated quoted identifier")
			}
			if s == "" {
				return nil, NewError(sql, start, "zero-length quoted identifier")
			}
			i += n
			toks = append(toks, token{kind: tQIdent, pos: start, end: i, text: s})
		case isDigit(c) || (c == '.' && i+1 < len(sql) && isDigit(sql[i+1])):
			i = lexNumber(sql, i)
			toks = append(toks, token{kind: tNumber, pos: start, end: i, text: sql[start:i]})
		case c == '_' || c < utf8.RuneSelf && isASCIILetter(c) || c >= utf8.RuneSelf:
			// An identifier: a letter (any Unicode letter) or '_', then
			// letters, digits, '_' or '$'; "aɔ" is one identifier.
			if c >= utf8.RuneSelf {
				r, _ := utf8.DecodeRuneInString(sql[i:])
				if r == utf8.RuneError || !unicode.IsLetter(r) {
					return nil, Errorf(sql, start, "unexpected character %q", r)
				}
			}
			for i < len(sql) {
				if isIdentByte(sql[i]) {
					i++
					continue
				}
				r, size := utf8.DecodeRuneInString(sql[i:])
				if sql[i] >= utf8.RuneSelf && r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
					i += size
					continue
				}
				break
			}
			toks = append(toks, token{kind: tIdent, pos: start, end: i, text: sql[start:i]})
		default:
			op := lexOp(sql[i:])
			if op == "" {
				r, _ := utf8.DecodeRuneInString(sql[i:])
				return nil, Errorf(sql, start, "unexpected character %q", r)
			}
			i += len(op)
			toks = append(toks, token{kind: tOp, pos: start, end: i, text: op})
		}
	}
}

// quoted reads a q-quoted token at the start of s (doubling q escapes it);
// it returns the unescaped content and the byte length consumed.
func quoted(s string, q byte) (string, int, bool) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		if c == q {
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i += 2
				continue
			}
			return b.String(), i + 1, true
		}
		b.WriteByte(c)
		i++
	}
	return "", 0, false
}

func lexNumber(sql string, i int) int {
	for i < len(sql) && isDigit(sql[i]) {
		i++
	}
	if i < len(sql) && sql[i] == '.' {
		i++
		for i < len(sql) && isDigit(sql[i]) {
			i++
		}
	}
	if i < len(sql) && (sql[i] == 'e' || sql[i] == 'E') {
		j := i + 1
		if j < len(sql) && (sql[j] == '+' || sql[j] == '-') {
			j++
		}
		if j < len(sql) && isDigit(sql[j]) {
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

var ops = []string{"->>", "->", "::", "<=", ">=", "<>", "!=", "||", "//", "(", ")", ",", ";", ".", "*", "+", "-", "/", "%", "=", "<", ">"}

func lexOp(s string) string {
	for _, op := range ops {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	return ""
}

func isDigit(c byte) bool       { return '0' <= c && c <= '9' }
func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentByte(c byte) bool   { return isASCIILetter(c) || isDigit(c) || c == '_' || c == '$' }
