package parser

import (
	"errors"
	"testing"
)

// parseSeeds are realistic and hostile inputs; they run as ordinary tests
// (go test runs the seed corpus) and seed `go test -fuzz FuzzParse`.
var parseSeeds = []string{
	"SELECT customer, count(*) FROM events GROUP BY customer",
	"CREATE SOURCE events (customer VARCHAR, amount DECIMAL(10,2), ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl')",
	"SELECT window_start, sum(amount) FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start EMIT EARLY EVERY INTERVAL '1' SECOND ALLOWED LATENESS INTERVAL '30' SECOND",
	"CREATE VIEW v AS SELECT a, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) FROM t GROUP BY a, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE); CREATE SINK s FROM v WITH ('topic' = 'x')",
	"SELECT CASE x WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE NULL END, CAST(y AS BIGINT), z::DOUBLE FROM t GROUP BY 1",
	"SELECT a FROM t WHERE b NOT IN (1, 2, NULL) AND c IS NOT DISTINCT FROM d OR e BETWEEN 1 AND 2",
	"SELECT 'unterminated",
	"SELECT \"unterminated",
	"SELECT /* unterminated",
	"SELECT ((((((((((1",
	"SELECT -------1",
	"SELECT - - - 1 FROM t",
	"SELECT 1e FROM t",
	"SELECT .5e+, 1..2 FROM t",
	"SELECT \x00 FROM t",
	"SELECT \xff\xfe FROM t",
	"SELECT a.b.c FROM t",
	"SELECT t.* FROM t",
	"CREATE SOURCE s (WATERMARK FOR ts AS ts, WATERMARK FOR ts AS ts)",
	"CREATE SOURCE s (a DECIMAL(99999999999999999999))",
	";;;;",
	"",
	"SELECT 1 FROM t EMIT",
	"SELECT count(DISTINCT) FROM t",
	"SELECT extract(minute FROM ts), EXTRACT('epoch' FROM ts), substring(s FROM 2 FOR 3), substring(s FOR 2), substr(s FROM -1), trim(BOTH 'x' FROM s), trim(LEADING FROM s), trim(TRAILING s), trim(' ' FROM s), j->>'a'->'b' || 'c', j->0 FROM t",
	"SELECT extract(minute FROM) FROM t", "SELECT extract(FROM ts) FROM t", "SELECT trim(LEADING FROM) FROM t", "SELECT a->> FROM t",
	"SELECT substring(x FROM 1 FOR) FROM t", "SELECT substring(x FROM (1 FOR 2)) FROM t", "SELECT \"extract\"(minute FROM ts) FROM t", "SELECT a-->b FROM t",
	"SELECT f(,) FROM t",
	"SELECT count(*) FILTER (WHERE a > 1), sum(x) FILTER (WHERE b), count(*) filter FROM t",
	"SELECT CASE END FROM t",
	"SELECT INTERVAL '1' FORTNIGHT FROM t",
	"\tSELECT\n\ta\n\tFROM\n\t",
	"SELECT \"\" FROM t",
	"SELECT 'a''b', \"c\"\"d\" FROM t",
	"SELECT x FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS",
	"CREATE SOURCE c (ms BIGINT, at TIMESTAMP(3), ts AS TO_TIMESTAMP_LTZ(ms, 3), d AS CAST(at AS TIMESTAMP(0)) + INTERVAL '1' DAY, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'json')",
	"CREATE SOURCE c (ts AS, ms BIGINT)", "CREATE SOURCE c (ts TIMESTAMP AS ms)", "CREATE SOURCE c (ts AS AS ms)", "CREATE SOURCE c (a AS (b AS c))",
	"CREATE TABLE p (k VARCHAR, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
	"SELECT u.a, count(*) FROM s u LEFT JOIN p FOR SYSTEM_TIME AS OF u.ts AS q ON u.k = q.k AND q.j = lower(u.j) GROUP BY u.a",
	"SELECT count(*) FROM s JOIN p FOR SYSTEM_TIME AS OF ON", "CREATE TABLE p (PRIMARY KEY () NOT ENFORCED)",
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		s, err := Parse(sql)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) returned a non-positioned error %T: %v", sql, err, err)
			}
			if pe.Pos < 0 || pe.Pos > len(sql) {
				t.Fatalf("Parse(%q): error position %d outside [0,%d]", sql, pe.Pos, len(sql))
			}
			if l, c := LineCol(sql, pe.Pos); l != pe.Line || c != pe.Col {
				t.Fatalf("Parse(%q): line:col %d:%d, want %d:%d", sql, pe.Line, pe.Col, l, c)
			}
			_ = pe.Caret()
			return
		}
		for _, st := range s.Stmts {
			a, b := st.Span()
			if a < 0 || b > len(sql) || a > b {
				t.Fatalf("Parse(%q): statement span [%d,%d) outside text", sql, a, b)
			}
			var exprs []Expr
			if cs, ok := st.(*CreateSource); ok {
				// Computed columns and the watermark round-trip too.
				for _, c := range cs.Columns {
					if c.Expr != nil {
						exprs = append(exprs, c.Expr)
					}
				}
				if cs.Watermark != nil {
					exprs = append(exprs, cs.Watermark.Expr)
				}
			}
			sel, ok := st.(*Select)
			if cv, isView := st.(*CreateView); isView {
				sel, ok = cv.Query, true
			}
			if !ok {
				sel = &Select{}
			}
			for _, it := range sel.Items {
				if it.Expr != nil {
					exprs = append(exprs, it.Expr)
				}
			}
			exprs = append(exprs, sel.GroupBy...)
			if sel.Where != nil {
				exprs = append(exprs, sel.Where)
			}
			if sel.Having != nil {
				exprs = append(exprs, sel.Having)
			}
			for _, e := range exprs {
				if e.Pos() < 0 || e.Pos() > len(sql) {
					t.Fatalf("Parse(%q): node position %d outside text", sql, e.Pos())
				}
				// The printer's output must parse back to the same tree.
				text := Format(e)
				back, err := ParseExpr(text)
				if err != nil {
					if errors.Is(err, ErrSyntax) && len(text) > 0 {
						// Printing adds parentheses; a tree near the depth
						// limit may not re-parse. Anything else is a bug.
						var pe *Error
						errors.As(err, &pe)
						if pe != nil && containsNesting(pe.Msg) {
							continue
						}
					}
					t.Fatalf("Format(%q) = %q does not re-parse: %v", sql, text, err)
				}
				if Canonical(back) != Canonical(e) {
					t.Fatalf("round trip of %q changed the tree: %q vs %q", sql, Canonical(back), Canonical(e))
				}
			}
		}
	})
}

func containsNesting(s string) bool { return len(s) >= 25 && s[:25] == "expression nested too dee" }
