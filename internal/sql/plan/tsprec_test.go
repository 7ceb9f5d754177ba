package plan

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// TestTimestampPrecisionPostgres holds CAST(x AS TIMESTAMP(p)) to
// PostgreSQL's timestamp(p) for every p from 0 to 6, halves included, for
// times from 2000 on (PostgreSQL rounds a half away from its 2000-01-01
// epoch; ubik rounds a half to the later instant at every time, which is
// the same from 2000 on). Before 2000 it checks the values that are not
// halves against PostgreSQL and the halves against the rule.
func TestTimestampPrecisionPostgres(t *testing.T) {
	dsn := testenv.RequirePostgres(t)
	// ubik's values first; PostgreSQL's come from one psql session.
	type check struct {
		ts string
		p  int
		v  types.Value
		q  int
	}
	var checks []check
	var sc testenv.PGScript
	post2000 := []string{"2026-07-18 10:00:00.1234", "2026-07-18 10:00:00.1235", "2026-07-18 10:00:00.5", "2026-07-18 10:00:59.999999",
		"2026-07-18 23:59:59.9995", "2000-01-01 00:00:00.000005", "2000-01-01 00:00:00.5", "2100-12-31 23:59:59.5", "2026-07-18 10:00:00.123456"}
	pre2000 := []string{"1999-12-31 23:59:59.4", "1969-12-31 23:59:59.9996", "1970-01-01 00:00:00.0004", "1900-02-28 12:34:56.789012", "0001-01-01 00:00:00.7"}
	halves := map[string][7]string{
		// p = 0 .. 6: rounded to the later instant.
		"1999-12-31 23:59:59.5":      {"2000-01-01 00:00:00", "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5", "1999-12-31 23:59:59.5"},
		"1969-12-31 23:59:59.999995": {"1970-01-01 00:00:00", "1970-01-01 00:00:00", "1970-01-01 00:00:00", "1970-01-01 00:00:00", "1970-01-01 00:00:00", "1970-01-01 00:00:00", "1969-12-31 23:59:59.999995"},
	}
	for p := 0; p <= 6; p++ {
		for _, list := range [][]string{post2000, pre2000} {
			for _, ts := range list {
				x, err := CompileExpr(fmt.Sprintf("CAST(TIMESTAMP '%s' AS TIMESTAMP(%d))", ts, p), nil)
				if err != nil {
					t.Fatal(err)
				}
				v, err := x.Eval(nil)
				if err != nil {
					t.Fatalf("%s to TIMESTAMP(%d): %v", ts, p, err)
				}
				q := sc.Query(fmt.Sprintf("SELECT (extract(epoch FROM '%s'::timestamp(%d)) * 1000000)::bigint", ts, p))
				checks = append(checks, check{ts, p, v, q})
			}
		}
		for ts, want := range halves {
			x, _ := CompileExpr(fmt.Sprintf("CAST(TIMESTAMP '%s' AS TIMESTAMP(%d))", ts, p), nil)
			if v, err := x.Eval(nil); err != nil || ValueText(v) != want[p] {
				t.Errorf("%s to TIMESTAMP(%d): %s %v, want %s", ts, p, ValueText(v), err, want[p])
			}
		}
	}
	res := sc.Run(t, dsn)
	for _, c := range checks {
		rows := res[c.q]
		if len(rows) != 1 || len(rows[0]) != 1 || rows[0][0] == nil {
			t.Fatalf("%s to timestamp(%d): PostgreSQL gave no single value", c.ts, c.p)
		}
		want, err := strconv.ParseInt(*rows[0][0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if c.v.I != want {
			t.Errorf("%s to TIMESTAMP(%d): ubik %s, PostgreSQL %s", c.ts, c.p, ValueText(c.v), ValueText(types.TS(want)))
		}
	}
	// At the top of the range, rounding up leaves it: an error, NULL for
	// TRY_CAST.
	x, _ := CompileExpr("CAST(TIMESTAMP '294247-01-10 04:00:54.775806' AS TIMESTAMP(0))", nil)
	if _, err := x.Eval(nil); err == nil {
		t.Error("rounding the largest TIMESTAMP up to a second: no error")
	}
	x, _ = CompileExpr("TRY_CAST(TIMESTAMP '294247-01-10 04:00:54.775806' AS TIMESTAMP(0))", nil)
	if v, err := x.Eval(nil); err != nil || !v.Null {
		t.Errorf("TRY_CAST at the top of the range: %v %v, want NULL", v, err)
	}
}

// TestToTimestampLTZ: TO_TIMESTAMP_LTZ(n, p) against the value it must give,
// at the ends of the range and past them.
func TestToTimestampLTZ(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"TO_TIMESTAMP_LTZ(1784368800123, 3)", "2026-07-18 10:00:00.123"},
		{"TO_TIMESTAMP_LTZ(1784368800, 0)", "2026-07-18 10:00:00"},
		{"TO_TIMESTAMP_LTZ(1784368800123456, 6)", "2026-07-18 10:00:00.123456"},
		{"TO_TIMESTAMP_LTZ(-1, 3)", "1969-12-31 23:59:59.999"},
		{"TO_TIMESTAMP_LTZ(CAST(NULL AS BIGINT), 3)", "NULL"},
		{"TO_TIMESTAMP_LTZ(1.0005, 3)", "1970-01-01 00:00:00.001"},    // 1000.5 µs: half to even
		{"TO_TIMESTAMP_LTZ(1.0015, 3)", "1970-01-01 00:00:00.001002"}, // 1001.5 µs (binary 1.0015 is just above)
		{"TO_TIMESTAMP_LTZ(CAST(2.5 AS DECIMAL(4,1)), 0)", "1970-01-01 00:00:02.5"},
		{"TO_TIMESTAMP_LTZ(9223372036854775, 3)", "294247-01-10 04:00:54.775"},
		{"TO_TIMESTAMP_LTZ(9223372036854776, 3)", "error"},
		{"TO_TIMESTAMP_LTZ(-9223372022400000, 3)", "290309-12-22 (BC) 00:00:00"},
		{"TO_TIMESTAMP_LTZ(-9223372022400001, 3)", "error"},
		{"TO_TIMESTAMP_LTZ(9223372036854775807, 6)", "error"},
		{"TO_TIMESTAMP_LTZ(9223372036855, 0)", "error"},
		{"TO_TIMESTAMP_LTZ(CAST('NaN' AS DOUBLE), 3)", "error"},
		{"TO_TIMESTAMP_LTZ(1e300, 0)", "error"},
	} {
		x, err := CompileExpr(c.expr, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		v, err := x.Eval(nil)
		got := "error"
		if err == nil {
			got = ValueText(v)
		}
		if got != c.want {
			t.Errorf("%s = %s (%v), want %s", c.expr, got, err, c.want)
		}
	}
}
