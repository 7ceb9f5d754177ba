package parser

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSyntax is the sentinel every *Error unwraps to, so callers can tell a
// problem with the SQL text (syntax, binding, types) from other failures.
var ErrSyntax = errors.New("parser: invalid SQL")

// Error is a problem with the SQL text at a position. The parser and the
// binder (package plan) both report through it, with the position of the
// offending node.
type Error struct {
	Pos  int // byte offset into SQL
	Line int // 1-based
	Col  int // 1-based, in characters (a tab counts as one)
	Msg  string
	SQL  string // the whole script the position refers to
}

// NewError builds an Error at byte offset pos of sql, computing Line and
// Col. pos is clamped into [0, len(sql)].
func NewError(sql string, pos int, msg string) *Error {
	if pos < 0 {
		pos = 0
	}
	if pos > len(sql) {
		pos = len(sql)
	}
	line, col := LineCol(sql, pos)
	return &Error{Pos: pos, Line: line, Col: col, Msg: msg, SQL: sql}
}

// Errorf is NewError with a format.
func Errorf(sql string, pos int, format string, args ...any) *Error {
	return NewError(sql, pos, fmt.Sprintf(format, args...))
}

// LineCol converts a byte offset into a 1-based line and character column.
func LineCol(sql string, pos int) (line, col int) {
	if pos > len(sql) {
		pos = len(sql)
	}
	line = 1 + strings.Count(sql[:pos], "\n")
	start := strings.LastIndexByte(sql[:pos], '\n') + 1
	col = 1 + utf8.RuneCountInString(sql[start:pos])
	return line, col
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d:%d: %s", e.Line, e.Col, clipText(Redact(e.Msg), 300))
}

// clipText cuts a message longer than max bytes to its start and end (a
// message may quote a token, and generated SQL can hold huge ones).
func clipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max*2/3, max/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + " ... " + s[t:]
}

// Unwrap returns ErrSyntax.
func (e *Error) Unwrap() error { return ErrSyntax }

// A line of at most caretLine characters is shown whole; a longer one as
// caretContext characters on each side of the position.
const (
	caretLine    = 200
	caretContext = 70
)

// Caret renders the offending line and a caret under the error column:
//
//	SELECT amout FROM t
//	       ^
//
// Tabs before the column are reproduced so the caret lines up in a terminal.
// Secrets on the line are masked with '*' (see Mask).
// A line longer than caretLine characters (a generated statement on one
// line) is shown as an excerpt around the position, cut ends marked "...".
func (e *Error) Caret() string {
	pos := e.Pos
	if pos < 0 {
		pos = 0
	}
	if pos > len(e.SQL) {
		pos = len(e.SQL)
	}
	start := strings.LastIndexByte(e.SQL[:pos], '\n') + 1
	end := strings.IndexByte(e.SQL[pos:], '\n')
	if end < 0 {
		end = len(e.SQL)
	} else {
		end += pos
	}
	if end > start && e.SQL[end-1] == '\r' {
		end--
	}
	if end < pos {
		end = pos
	}
	from, to := start, end
	if end-start > caretLine && utf8.RuneCountInString(e.SQL[start:end]) > caretLine {
		from, to = e.excerpt(start, pos, end)
	}
	var b strings.Builder
	lead := ""
	if from > start {
		lead = "..."
	}
	b.WriteString(lead)
	// The line may hold a password (brokers='u:PW@host'): masked rune for
	// rune, so the caret below still points where it did.
	b.WriteString(maskSpan(e.SQL[start:end], from-start, to-start))
	if to < end {
		b.WriteString("...")
	}
	b.WriteByte('\n')
	b.WriteString(strings.Repeat(" ", len(lead)))
	for _, r := range e.SQL[from:pos] {
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteByte('^')
	return b.String()
}

// excerpt returns the byte range caretContext characters either side of
// pos within the line [start, end).
func (e *Error) excerpt(start, pos, end int) (from, to int) {
	from, to = pos, pos
	for n := 0; n < caretContext && from > start; n++ {
		_, size := utf8.DecodeLastRuneInString(e.SQL[start:from])
		from -= size
	}
	for n := 0; n < caretContext && to < end; n++ {
		_, size := utf8.DecodeRuneInString(e.SQL[to:end])
		to += size
	}
	return from, to
}
