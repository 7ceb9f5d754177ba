package parser

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCaretExcerpt: the caret of an error on a long line (a generated
// statement on one line) is an excerpt around the position, and the caret
// still points at the offending character.
func TestCaretExcerpt(t *testing.T) {
	sql := "SELECT " + strings.Repeat("a + ", 50_000) + "é ) + " + strings.Repeat("b + ", 50_000) + "c FROM t"
	_, err := Parse(sql)
	pe, ok := err.(*Error)
	if !ok {
		t.Fatalf("Parse: %v", err)
	}
	c := pe.Caret()
	if len(c) > 300 {
		t.Fatalf("caret of %d bytes for a %d-byte line", len(c), len(sql))
	}
	lines := strings.Split(c, "\n")
	if len(lines) != 2 {
		t.Fatalf("caret %q", c)
	}
	col := utf8.RuneCountInString(lines[1]) - 1
	at := []rune(lines[0])
	if lines[1][len(lines[1])-1] != '^' || col >= len(at) || at[col] != ')' {
		t.Fatalf("caret does not point at the ')':\n%s", c)
	}
	if !strings.HasPrefix(lines[0], "...") || !strings.HasSuffix(lines[0], "...") {
		t.Errorf("excerpt not marked as cut:\n%s", c)
	}
	if len(pe.Error()) > 400 {
		t.Errorf("message of %d bytes", len(pe.Error()))
	}
	// A short line is shown whole, tabs kept.
	_, err = Parse("SELECT\ta, ) FROM t")
	if got, want := err.(*Error).Caret(), "SELECT\ta, ) FROM t\n      \t   ^"; got != want {
		t.Errorf("short caret %q, want %q", got, want)
	}
	// Near the start or end of a long line, only one side is cut.
	long := "SELECT a, ) FROM t WHERE " + strings.Repeat("x = 1 AND ", 100) + "true"
	_, err = Parse(long)
	c = err.(*Error).Caret()
	if strings.HasPrefix(c, "...") || !strings.Contains(c, "...\n") || !strings.HasSuffix(c, "\n          ^") {
		t.Errorf("caret near the start:\n%s", c)
	}
	// A long identifier in the message is cut too.
	_, err = Parse("SELECT " + strings.Repeat("x", 100_000) + " y z FROM t")
	if len(err.Error()) > 400 {
		t.Errorf("message of %d bytes", len(err.Error()))
	}
}
