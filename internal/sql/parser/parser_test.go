package parser

import (
	"errors"
	"strings"
	"testing"
)

func parseOutput(sql string) string {
	s, err := Parse(sql)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			return "non-positioned error: " + err.Error()
		}
		return "error: " + pe.Error() + "\n" + pe.Caret()
	}
	var b strings.Builder
	for _, st := range s.Stmts {
		b.WriteString(Dump(st))
		b.WriteString("\n")
	}
	return b.String()
}

// TestParseGolden runs testdata/parse.txt (valid scripts, AST dumps) and
// testdata/errors.txt (invalid scripts, errors with carets). Run with
// -update to rewrite the expected output after a deliberate change.
func TestParseGolden(t *testing.T) {
	runGolden(t, "testdata/parse.txt", parseOutput)
	runGolden(t, "testdata/errors.txt", parseOutput)
}

// TestPrecedence checks operator binding through the parenthesizing printer.
func TestPrecedence(t *testing.T) {
	cases := []struct{ in, want string }{
		{"1 + 2 * 3", "(1 + (2 * 3))"},
		{"1 * 2 + 3", "((1 * 2) + 3)"},
		{"1 - 2 - 3", "((1 - 2) - 3)"},
		{"a OR b AND c", "(a OR (b AND c))"},
		{"NOT a = b", "(NOT (a = b))"},
		{"NOT a AND b", "((NOT a) AND b)"},
		{"a = 1 OR b <> 2 AND c != 3", "((a = 1) OR ((b <> 2) AND (c <> 3)))"},
		{"-a * b", "(-a * b)"},
		{"-a::int", "-CAST(a AS INT)"},
		{"a || b || 'c'", "((a || b) || 'c')"},
		{"a + 1 || b", "((a + 1) || b)"},
		{"x BETWEEN 1 AND 2 AND y", "((x BETWEEN 1 AND 2) AND y)"},
		{"x NOT BETWEEN a + 1 AND b * 2", "(x NOT BETWEEN (a + 1) AND (b * 2))"},
		{"x NOT IN (1, 2) OR x IN (3)", "((x NOT IN (1, 2)) OR (x IN (3)))"},
		{"a IS NULL AND b IS NOT NULL", "((a IS NULL) AND (b IS NOT NULL))"},
		{"a = b IS NULL", "((a = b) IS NULL)"},
		{"a IS NOT DISTINCT FROM b + 1", "(a IS NOT DISTINCT FROM (b + 1))"},
		{"name NOT LIKE 'a%' AND name ILIKE '%B'", "((name NOT LIKE 'a%') AND (name ILIKE '%B'))"},
		{"count(*) > 10", "(count_star() > 10)"},
		{"count(DISTINCT x)", "count(DISTINCT x)"},
		{"SUM(t.amount) / COUNT(*)", "(sum(amount) / count_star())"},
		{"CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END", "CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END"},
		{"CASE x WHEN 1 THEN 'a' END", "CASE x WHEN 1 THEN 'a' END"},
		{"CAST(x AS DECIMAL(10, 2))", "CAST(x AS DECIMAL(10,2))"},
		{"TRY_CAST(x AS double precision)", "TRY_CAST(x AS DOUBLE PRECISION)"},
		{"ts - INTERVAL '5' SECOND", "(ts - INTERVAL '5' SECOND)"},
		{"ts >= TIMESTAMP '2026-07-18 10:00:00'", "(ts >= TIMESTAMP '2026-07-18 10:00:00')"},
		{"7 // 2 % 3", "((7 // 2) % 3)"},
		{`"Weird Name" = 'it''s'`, `("Weird Name" = 'it''s')`},
		{"a /* inline */ + -- to end\n b", "(a + b)"},
		{"is_final()", "is_final()"},
		{"x IS TRUE OR y IS NOT FALSE", "((x IS TRUE) OR (y IS NOT FALSE))"},
		{"INTERVAL 5 MINUTES", "INTERVAL '5' MINUTES"},
	}
	for _, c := range cases {
		e, err := ParseExpr(c.in)
		if err != nil {
			t.Errorf("ParseExpr(%q): %v", c.in, err)
			continue
		}
		if got := Format(e); got != c.want {
			t.Errorf("ParseExpr(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	a, _ := ParseExpr("T.Customer")
	b, _ := ParseExpr("(customer)")
	if Canonical(a) != Canonical(b) {
		t.Errorf("Canonical(%s) = %q != Canonical(%s) = %q", Format(a), Canonical(a), Format(b), Canonical(b))
	}
	c, _ := ParseExpr("Customer || 'x'")
	d, _ := ParseExpr("customer || 'X'")
	if Canonical(c) == Canonical(d) {
		t.Errorf("string literal case must matter: %q", Canonical(c))
	}
}

func TestErrorPositions(t *testing.T) {
	cases := []struct {
		sql       string
		line, col int
		msg       string
	}{
		{"SELECT FROM t", 1, 8, "expected an expression, found keyword FROM"},
		{"SELECT a\nFROM t\nWHERE a = = 1", 3, 11, "expected an expression"},
		{"SELECT a FROM t;\n\tSELECT b FROM", 2, 15, "expected source name, found end of input"},
		{"SELECT 'abc", 1, 8, "unterminated string literal"},
		{"SELECT a FROM t /* x", 1, 17, "unterminated /* comment"},
		{"SELECT é€ FROM t", 1, 9, "unexpected character"},
		{"SELECT ä FROM t WHERE @", 1, 23, "unexpected character '@'"},
	}
	for _, c := range cases {
		_, err := Parse(c.sql)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v, want *Error", c.sql, err)
			continue
		}
		if pe.Line != c.line || pe.Col != c.col || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("Parse(%q) = %d:%d %q, want %d:%d containing %q", c.sql, pe.Line, pe.Col, pe.Msg, c.line, c.col, c.msg)
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error does not unwrap to ErrSyntax", c.sql)
		}
	}
}

func TestCaretTabsAndLines(t *testing.T) {
	sql := "SELECT a\n\tFROM t\n\tWHERE\tb ==="
	_, err := Parse(sql)
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("want *Error, got %v", err)
	}
	want := "\tWHERE\tb ===\n\t     \t   ^"
	if got := pe.Caret(); got != want {
		t.Errorf("Caret() =\n%s\nwant\n%s", got, want)
	}
	if pe.Line != 3 || pe.Col != 11 {
		t.Errorf("position %d:%d, want 3:10", pe.Line, pe.Col)
	}
}

func TestDeepNesting(t *testing.T) {
	sql := "SELECT " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " FROM t"
	_, err := Parse(sql)
	if err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Fatalf("want nesting error, got %v", err)
	}
	sql = "SELECT " + strings.Repeat("-", 100000) + "1 FROM t"
	if _, err := Parse(sql); err == nil {
		t.Fatal("want nesting error for many unary minus")
	}
	// Long flat chains are fine: they are iterative, not recursive.
	sql = "SELECT " + strings.Repeat("1 + ", 20000) + "1 FROM t"
	if _, err := Parse(sql); err != nil {
		t.Fatalf("long flat chain: %v", err)
	}
}
