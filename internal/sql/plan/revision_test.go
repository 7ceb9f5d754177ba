package plan

import "testing"

// TestSelectReadsRevision: the binder marks a query whose SELECT list reads
// REVISION(), wherever in a column's expression, and only such a query: a
// HAVING that reads it, a string that spells it and a column alias that
// names it leave the value without it.
func TestSelectReadsRevision(t *testing.T) {
	cases := []struct {
		sql  string
		want bool
	}{
		{`SELECT customer, count(*) AS n, revision() AS r FROM events GROUP BY customer`, true},
		{`SELECT customer, count(*) + REVISION() AS n FROM events GROUP BY customer`, true},
		{`SELECT customer, CASE WHEN revision() > 1 THEN 'again' ELSE 'first' END AS seen FROM events GROUP BY customer`, true},
		{`SELECT customer, count(*) AS n FROM events GROUP BY customer`, false},
		{`SELECT customer, count(*) AS n FROM events GROUP BY customer HAVING revision() < 10`, false},
		{`SELECT customer, 'revision()' AS note, count(*) AS n FROM events GROUP BY customer`, false},
		{`SELECT customer, count(*) AS "revision()" FROM events GROUP BY customer`, false},
		{`SELECT customer, is_final() AS f, count(*) AS n FROM events GROUP BY customer`, false},
	}
	for _, c := range cases {
		prog, err := Compile(c.sql, CompileOptions{Sources: testSources(), DefaultName: "q"})
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if got := prog.Queries[0].SelectReadsRevision; got != c.want {
			t.Errorf("%s: SelectReadsRevision %v, want %v", c.sql, got, c.want)
		}
	}
}
