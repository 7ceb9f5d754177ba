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

func (e *Error) Error() string { return fmt.Sprintf("line %d:%d: %s", e.Line, e.Col, e.Msg) }

// Unwrap returns ErrSyntax.
func (e *Error) Unwrap() error { return ErrSyntax }

// Caret renders the offending line and a caret under the error column:
//
//	SELECT amout FROM t
//	       ^
//
// Tabs before the column are reproduced so the caret lines up in a terminal.
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
	line := strings.TrimRight(e.SQL[start:end], "\r")
	var b strings.Builder
	b.WriteString(line)
	b.WriteByte('\n')
	for _, r := range e.SQL[start:pos] {
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteByte('^')
	return b.String()
}
