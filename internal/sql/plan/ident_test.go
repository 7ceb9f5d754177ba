package plan

import (
	"strconv"
	"strings"
	"testing"
)

// Two expressions are one slot exactly when they have the same shape and
// every column reference binds to the same column: s.v and t.v of a join
// are different columns, v and s.v of one source the same one, and a
// column named "(a + b)" is not the expression a + b.
func TestExprIdentityBinding(t *testing.T) {
	const joinSrc = `
CREATE SOURCE s (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE TABLE t (k VARCHAR, v BIGINT, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE SOURCE r (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE SOURCE one (a BIGINT, b BIGINT, "(a + b)" BIGINT, ts TIMESTAMP);
`
	const tj = ` FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k`
	const ij = ` FROM s JOIN r ON s.k = r.k AND r.ts BETWEEN s.ts AND s.ts + INTERVAL '1' MINUTE`
	cases := []struct {
		sel   string
		aggs  int    // distinct aggregate slots
		slots string // each SELECT item's slot, or the error
	}{
		{"SELECT s.k, sum(s.v) AS a, sum(t.v) AS b" + tj + " GROUP BY s.k", 2, "0 1 2"},
		{"SELECT s.k, sum(s.v), sum(v)" + tj + " GROUP BY s.k", 0, "column \"v\" is ambiguous"},
		{"SELECT s.k, max(s.v) AS a, max(r.v) AS b, max(s.v) AS again" + ij + " GROUP BY s.k", 2, "0 1 2 1"},
		{"SELECT s.k, count(*) FILTER (WHERE s.v = 1) AS a, count(*) FILTER (WHERE r.v = 1) AS b" + ij + " GROUP BY s.k", 2, "0 1 2"},
		{"SELECT s.k, count(*) FILTER (WHERE s.v = 1) AS a, count(*) FILTER (WHERE t.v = 1) AS b" + tj + " GROUP BY s.k", 2, "0 1 2"},
		{"SELECT t.k AS tk, s.k, count(*)" + tj + " GROUP BY s.k, t.k", 1, "1 0 2"},
		{"SELECT r.k, count(*)" + ij + " GROUP BY s.k", 0, "column \"k\" must appear in the GROUP BY"},
		{"SELECT s.k, sum(s.v)" + tj + " GROUP BY s.k HAVING sum(t.v) > 1", 2, "0 1"},
		{"SELECT s.k, sum(s.v) AS a, sum(s.v + t.v) AS b, sum(t.v + s.v) AS c, sum(s.v + s.v) AS d" + tj + " GROUP BY s.k", 4, "0 1 2 3 4"},
		{"SELECT one.a, sum(a) AS x, sum(one.a) AS y FROM one GROUP BY a", 1, "0 1 1"},
		{"SELECT a + b AS x, count(*) FROM one GROUP BY \"(a + b)\"", 0, "column \"a\" must appear in the GROUP BY"},
		{"SELECT \"(a + b)\" AS x, count(*) FROM one GROUP BY \"(a + b)\"", 1, "0 1"},
	}
	for _, c := range cases {
		prog, err := Compile(joinSrc+c.sel+";", CompileOptions{DefaultName: "q"})
		if err != nil {
			if !strings.Contains(err.Error(), c.slots) {
				t.Errorf("%s\n error %v, want %q", c.sel, err, c.slots)
			}
			continue
		}
		q := prog.Queries[len(prog.Queries)-1]
		var got []string
		for _, o := range q.Select {
			r, ok := o.Expr.(*ColRef)
			if !ok {
				t.Fatalf("%s: item %s is not a slot", c.sel, o.Name)
			}
			got = append(got, strconv.Itoa(r.Index))
		}
		if s := strings.Join(got, " "); s != c.slots || len(q.Aggs) != c.aggs {
			t.Errorf("%s\n slots %s with %d aggregates, want %s with %d", c.sel, s, len(q.Aggs), c.slots, c.aggs)
		}
	}
}
