package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// evalSource is the row schema eval tests use: i INTEGER, b BIGINT,
// d DECIMAL(10,2), f DOUBLE, s VARCHAR, t TIMESTAMP, ok BOOLEAN, n INTEGER
// (always NULL), dt DATE.
var evalSource = &Source{Name: "r", TimeCol: -1, Columns: []Column{
	{Name: "i", Type: types.Integer}, {Name: "b", Type: types.BigInt}, {Name: "d", Type: types.Decimal(10, 2)}, {Name: "f", Type: types.Double},
	{Name: "s", Type: types.Varchar}, {Name: "t", Type: types.Timestamp}, {Name: "ok", Type: types.Boolean}, {Name: "n", Type: types.Integer}, {Name: "dt", Type: types.Date},
}}

func evalRow() []types.Value {
	return []types.Value{
		types.Int(7), types.Big(9_000_000_000), types.Dec(types.I128(1250), 2), types.Float(2.5),
		types.Str(" 42 "), types.TS(1784368800000000), types.Bool(true), types.NullOf(types.Integer),
		types.DateDays(20652),
	}
}

// evalText compiles expr over evalSource, evaluates it on evalRow and
// renders the result: the DuckDB text, "NULL", or "error: <message>".
func evalText(t *testing.T, expr string) (string, types.Type) {
	t.Helper()
	x, err := CompileExpr(expr, evalSource)
	if err != nil {
		return "bind error: " + err.Error(), types.Type{}
	}
	v, err := x.Eval(evalRow())
	if err != nil {
		return "error: " + err.Error(), x.Type()
	}
	if v.Null {
		return "NULL", x.Type()
	}
	if v.Kind != x.Type().Kind && x.Type().Kind != types.KindNull {
		t.Errorf("%s: value kind %s differs from static type %s", expr, v.Kind, x.Type())
	}
	if v.Kind == types.KindDecimal && v.Scale != x.Type().Scale {
		t.Errorf("%s: value scale %d differs from static type %s", expr, v.Scale, x.Type())
	}
	return ValueText(v), x.Type()
}

func TestEval(t *testing.T) {
	cases := []struct{ expr, want, typ string }{
		// three-valued logic
		{"NULL AND FALSE", "false", "BOOLEAN"},
		{"NULL AND TRUE", "NULL", "BOOLEAN"},
		{"NULL OR TRUE", "true", "BOOLEAN"},
		{"NULL OR FALSE", "NULL", "BOOLEAN"},
		{"NOT (n = 1)", "NULL", "BOOLEAN"},
		{"n = NULL", "NULL", "BOOLEAN"},
		{"n IS NULL", "true", "BOOLEAN"},
		{"i IS NOT NULL", "true", "BOOLEAN"},
		{"n IS NOT DISTINCT FROM NULL", "true", "BOOLEAN"},
		{"i IS DISTINCT FROM n", "true", "BOOLEAN"},
		{"(n = 1) IS NOT TRUE", "true", "BOOLEAN"},
		{"i IN (1, 7)", "true", "BOOLEAN"},
		{"i IN (1, NULL)", "NULL", "BOOLEAN"},
		{"i NOT IN (1, NULL)", "NULL", "BOOLEAN"},
		{"i NOT IN (1, 2)", "true", "BOOLEAN"},
		{"i IN (7, NULL)", "true", "BOOLEAN"},
		{"n IN (1, 2)", "NULL", "BOOLEAN"},
		{"coalesce(n, i, 0)", "7", "INTEGER"},
		{"coalesce(n, NULL)", "NULL", "INTEGER"},
		{"nullif(i, 7)", "NULL", "INTEGER"},
		{"nullif(i, 8)", "7", "INTEGER"},
		{"CASE WHEN n = 1 THEN 'a' WHEN i = 7 THEN 'b' END", "b", "VARCHAR"},
		{"CASE n WHEN 1 THEN 'a' ELSE 'z' END", "z", "VARCHAR"},
		{"CASE WHEN FALSE THEN 1 END", "NULL", "INTEGER"},
		{"i BETWEEN 7 AND 8", "true", "BOOLEAN"},
		{"i NOT BETWEEN 1 AND 6", "true", "BOOLEAN"},
		{"n BETWEEN 1 AND 2", "NULL", "BOOLEAN"},
		// arithmetic and overflow
		{"i + 1", "8", "INTEGER"},
		{"2147483647 + i", "error: Out of Range Error: Overflow in addition of INT32 (2147483647 + 7)!", "INTEGER"},
		{"-2147483648 - i", "error: Out of Range Error: Overflow in subtraction of INT32 (-2147483648 - 7)!", "INTEGER"},
		{"i * 400000000", "error: Out of Range Error: Overflow in multiplication of INT32 (7 * 400000000)!", "INTEGER"},
		{"b * b", "error: Out of Range Error: Overflow in multiplication of INT64 (9000000000 * 9000000000)!", "BIGINT"},
		{"b * 1000000000", "9000000000000000000", "BIGINT"},
		{"-9223372036854775808 * -1", "error: Out of Range Error: Overflow in multiplication of INT64 (-9223372036854775808 * -1)!", "BIGINT"},
		{"-9223372036854775807 - 1", "-9223372036854775808", "BIGINT"},
		{"CAST(b AS HUGEINT) * b * b", "729000000000000000000000000000", "HUGEINT"},
		{"CAST(b AS HUGEINT) * b * b * b", "error: Out of Range Error: Overflow in multiplication of INT128 (729000000000000000000000000000 * 9000000000)!", "HUGEINT"},
		{"-(-2147483647 - 1)", "error: Out of Range Error: Overflow in negation of INT32 (-(-2147483648))!", "INTEGER"},
		{"-(i - 2147483647 - 9)", "error: Out of Range Error: Overflow in subtraction of INT32 (-2147483640 - 9)!", "INTEGER"},
		{"i / 2", "3.5", "DOUBLE"},
		{"i / 0", "NULL", "DOUBLE"},
		{"i // 2", "3", "INTEGER"},
		{"-i // 2", "-3", "INTEGER"},
		{"i // 0", "NULL", "INTEGER"},
		{"-i % 3", "-1", "INTEGER"},
		{"i % 0", "NULL", "INTEGER"},
		{"f % 1", "0.5", "DOUBLE"},
		{"d + 1", "13.50", "DECIMAL(13,2)"},
		{"d * d", "156.2500", "DECIMAL(20,4)"},
		{"d - 0.005", "12.495", "DECIMAL(12,3)"},
		{"d + f", "15.0", "DOUBLE"},
		{"1.5 + 2.25", "3.75", "DECIMAL(4,2)"},
		{"0.1 + 0.2", "0.3", "DECIMAL(2,1)"},
		{"0.1::DOUBLE + 0.2", "0.30000000000000004", "DOUBLE"},
		{"CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0)) + 1", "error: Out of Range Error: Overflow in addition of DECIMAL(38,0) (99999999999999999999999999999999999999 + 1)!", "DECIMAL(38,0)"},
		{"-d", "-12.50", "DECIMAL(10,2)"},
		{"abs(-d)", "12.50", "DECIMAL(10,2)"},
		{"round(d, 1)", "12.5", "DECIMAL(10,1)"},
		{"round(2.45, 1)", "2.5", "DECIMAL(3,1)"},
		{"round(-2.5)", "-3", "DECIMAL(2,0)"},
		{"round(f)", "3.0", "DOUBLE"},
		{"floor(-d)", "-13", "DECIMAL(10,0)"},
		{"ceil(d)", "13", "DECIMAL(10,0)"},
		{"floor(-f)", "-3.0", "DOUBLE"},
		// casts
		{"CAST(s AS INTEGER)", "42", "INTEGER"},
		{"CAST(s AS BIGINT) + 1", "43", "BIGINT"},
		{"CAST('abc' || s AS INTEGER)", "error: Conversion Error: Could not convert string 'abc 42 ' to INT32", "INTEGER"},
		{"TRY_CAST('abc' || s AS INTEGER)", "NULL", "INTEGER"},
		{"CAST(s || '.5' AS DOUBLE)", "error: Conversion Error: Could not convert string ' 42 .5' to DOUBLE", "DOUBLE"},
		{"CAST(trim_me AS INTEGER)", "bind error: line 1:6: unknown column \"trim_me\" in source r", ""},
		{"CAST('2.5' AS INTEGER)", "3", "INTEGER"},
		{"CAST(2.5 AS INTEGER)", "3", "INTEGER"},
		{"CAST(-2.5 AS INTEGER)", "-3", "INTEGER"},
		{"CAST(f AS INTEGER)", "2", "INTEGER"},
		{"CAST(f + 1 AS INTEGER)", "4", "INTEGER"},
		{"CAST(-f AS BIGINT)", "-2", "BIGINT"},
		{"CAST(f * 1e10 AS INTEGER)", "error: Conversion Error: Type DOUBLE with value 25000000000.0 can't be cast because the value is out of range for the destination type INT32", "INTEGER"},
		{"CAST(b AS INTEGER)", "error: Conversion Error: Type INT64 with value 9000000000 can't be cast because the value is out of range for the destination type INT32", "INTEGER"},
		{"CAST(f AS VARCHAR)", "2.5", "VARCHAR"},
		{"CAST(f * 1e20 AS VARCHAR)", "2.5e+20", "VARCHAR"},
		{"CAST(d AS VARCHAR)", "12.50", "VARCHAR"},
		{"CAST(d AS DECIMAL(2,1))", "error: Conversion Error: Could not cast value 12.50 to DECIMAL(2,1)", "DECIMAL(2,1)"},
		{"CAST(d AS DECIMAL(4,1))", "12.5", "DECIMAL(4,1)"},
		{"CAST(d AS DECIMAL(10,0))", "13", "DECIMAL(10,0)"},
		{"CAST(f AS DECIMAL(10,3))", "2.500", "DECIMAL(10,3)"},
		{"CAST(' 12.345 ' AS DECIMAL(10,2))", "12.35", "DECIMAL(10,2)"},
		{"CAST('1e3' AS DECIMAL(10,2))", "1000.00", "DECIMAL(10,2)"},
		{"CAST(ok AS INTEGER)", "1", "INTEGER"},
		{"CAST(' TRUE ' AS BOOLEAN)", "true", "BOOLEAN"},
		{"CAST(ok AS VARCHAR)", "true", "VARCHAR"},
		{"CAST(t AS VARCHAR)", "2026-07-18 10:00:00", "VARCHAR"},
		{"CAST(t AS DATE)", "2026-07-18", "DATE"},
		{"CAST(dt AS TIMESTAMP)", "2026-07-18 00:00:00", "TIMESTAMP"},
		{"i::VARCHAR || '!'", "7!", "VARCHAR"},
		{"i || '!'", "7!", "VARCHAR"},
		{"CAST(i AS DOUBLE) / 3", "2.3333333333333335", "DOUBLE"},
		{"CAST('1 hour 30 minutes' AS INTERVAL)", "01:30:00", "INTERVAL"},
		// timestamps
		{"t = '2026-07-18 10:00:00'", "true", "BOOLEAN"},
		{"t = '2026-07-18T10:00:00Z'", "true", "BOOLEAN"},
		{"t = '2026-07-18T12:00:00+02:00'", "true", "BOOLEAN"},
		{"t = '2026-07-18T05:30:00-04:30'", "true", "BOOLEAN"},
		{"t > '2026-07-18'", "true", "BOOLEAN"},
		{"CAST('2026-07-18 10:00:00.123456' AS TIMESTAMP)", "2026-07-18 10:00:00.123456", "TIMESTAMP"},
		{"CAST('2026-07-18 10:00:00.5' AS TIMESTAMP)", "2026-07-18 10:00:00.5", "TIMESTAMP"},
		{"CAST('2026-07-18T10:00:00.123456789Z' AS TIMESTAMP)", "2026-07-18 10:00:00.123456", "TIMESTAMP"},
		{"CAST(s AS TIMESTAMP)", "error: Conversion Error: invalid timestamp field format: \" 42 \", expected format is (YYYY-MM-DD HH:MM:SS[.US][±HH:MM| ZONE])", "TIMESTAMP"},
		{"CAST('2026-02-30' AS DATE)", "error: Conversion Error: invalid date field format: \"2026-02-30\", expected format is (YYYY-MM-DD)", "DATE"},
		{"CASE WHEN i > 0 THEN 1 ELSE CAST('x' AS INTEGER) END", "1", "INTEGER"},
		{"t + INTERVAL '1' HOUR", "2026-07-18 11:00:00", "TIMESTAMP"},
		{"t - INTERVAL '10' SECOND", "2026-07-18 09:59:50", "TIMESTAMP"},
		{"t + INTERVAL '1.5 seconds'", "2026-07-18 10:00:01.5", "TIMESTAMP"},
		{"TIMESTAMP '2024-01-31 10:00:00' + INTERVAL '1' MONTH", "2024-02-29 10:00:00", "TIMESTAMP"},
		{"TIMESTAMP '2024-03-31 00:00:00' - INTERVAL '1 month'", "2024-02-29 00:00:00", "TIMESTAMP"},
		{"t - TIMESTAMP '2026-07-17 09:00:00'", "1 day 01:00:00", "INTERVAL"},
		{"TIMESTAMP '2026-07-17 09:00:00' - t", "-1 day -01:00:00", "INTERVAL"},
		{"dt + 1", "2026-07-19", "DATE"},
		{"dt - DATE '2026-07-01'", "17", "BIGINT"},
		{"dt + INTERVAL '2' HOURS", "2026-07-18 02:00:00", "TIMESTAMP"},
		{"t - '5 minutes'", "2026-07-18 09:55:00", "TIMESTAMP"},
		{"INTERVAL '1.5 days'", "1 day 12:00:00", "INTERVAL"},
		{"INTERVAL '1.5 months'", "1 month 15 days", "INTERVAL"},
		{"INTERVAL '1.5 years'", "1 year 6 months", "INTERVAL"},
		{"INTERVAL '2 weeks'", "14 days", "INTERVAL"},
		{"INTERVAL '1 hour 30 minutes'", "01:30:00", "INTERVAL"},
		{"INTERVAL '90' MINUTES", "01:30:00", "INTERVAL"},
		{"INTERVAL '250' MILLISECONDS", "00:00:00.25", "INTERVAL"},
		{"INTERVAL '3' MICROSECONDS", "00:00:00.000003", "INTERVAL"},
		{"INTERVAL '1 day' > INTERVAL '23 hours'", "true", "BOOLEAN"},
		{"INTERVAL '30 days' = INTERVAL '1 month'", "true", "BOOLEAN"},
		// strings
		{"upper(s) || lower('AbC')", " 42 abc", "VARCHAR"},
		{"length('héllo')", "5", "BIGINT"},
		{"'abc' LIKE 'a%'", "true", "BOOLEAN"},
		{"'abc' LIKE '_b_'", "true", "BOOLEAN"},
		{"'abc' LIKE 'b%'", "false", "BOOLEAN"},
		{"'abc' NOT LIKE '%c'", "false", "BOOLEAN"},
		{"'ABC' ILIKE 'a%c'", "true", "BOOLEAN"},
		{"'a%c' LIKE 'a%%c'", "true", "BOOLEAN"},
		{"'' LIKE '%'", "true", "BOOLEAN"},
		{"s LIKE n::VARCHAR", "NULL", "BOOLEAN"},
		{"concat('a', NULL, 'b', i)", "ab7", "VARCHAR"},
		{"'a' || NULL", "NULL", "VARCHAR"},
		{"'b' > 'a' AND 'B' < 'a'", "true", "BOOLEAN"},
		// doubles: NaN orders above everything and equals itself (DuckDB)
		{"CAST('nan' AS DOUBLE) > 1e308", "true", "BOOLEAN"},
		{"CAST('nan' AS DOUBLE) = CAST('nan' AS DOUBLE)", "true", "BOOLEAN"},
		{"CAST('-inf' AS DOUBLE) < -1e308", "true", "BOOLEAN"},
		{"CAST('inf' AS DOUBLE)::VARCHAR", "inf", "VARCHAR"},
	}
	for _, c := range cases {
		got, typ := evalText(t, c.expr)
		if got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
		if c.typ != "" && typ.String() != c.typ {
			t.Errorf("%s: type %s, want %s", c.expr, typ, c.typ)
		}
	}
}

func TestEvalErrorsUnwrap(t *testing.T) {
	for expr, want := range map[string]error{
		"i + 2147483647":        ErrOutOfRange,
		"CAST(s || 'x' AS INT)": ErrConversion,
		"CAST(b AS INTEGER)":    ErrConversion,
		"CAST(s AS TIMESTAMP)":  ErrConversion,
		"-(i - 2147483647 - 9)": ErrOutOfRange,
	} {
		x, err := CompileExpr(expr, evalSource)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		_, err = x.Eval(evalRow())
		if !errors.Is(err, want) {
			t.Errorf("%s: error %v does not unwrap to %v", expr, err, want)
		}
		var ee *EvalError
		if !errors.As(err, &ee) || !strings.Contains(ee.Error(), "Error: ") {
			t.Errorf("%s: error %v is not an *EvalError with DuckDB wording", expr, err)
		}
	}
}
