package plan

import (
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// funcSource is the row the function table tests evaluate over.
var funcSource = &Source{Name: "r", TimeCol: -1, Columns: []Column{
	{Name: "s", Type: types.Varchar}, {Name: "u", Type: types.Varchar}, {Name: "t", Type: types.Timestamp},
	{Name: "t0", Type: types.Timestamp}, {Name: "dt", Type: types.Date}, {Name: "j", Type: types.Varchar, JSON: true},
	{Name: "n", Type: types.Varchar}, {Name: "nt", Type: types.Timestamp}, {Name: "f", Type: types.Double},
	{Name: "i", Type: types.BigInt}, {Name: "ni", Type: types.BigInt}, {Name: "bad", Type: types.Varchar},
}}

func funcRow() []types.Value {
	t, _ := ParseTimestamp("2024-02-29 13:45:30.123456")
	t0, _ := ParseTimestamp("1969-12-31 23:59:59.9995")
	dt, _ := ParseDate("2024-02-29")
	return []types.Value{
		types.Str("  Hello, Wörld!  "), types.Str("héllo"), types.TS(t), types.TS(t0), types.DateDays(dt),
		types.Str(`{"user":{"id":42,"name":"ann","tags":["a","b"],"a/b":1},"n":null,"s":"x\"y","f":1.50}`),
		types.NullOf(types.Varchar), types.NullOf(types.Timestamp), types.Float(1700000000.5), types.Big(1700000000123),
		types.NullOf(types.BigInt), types.Str(`{"a":`),
	}
}

func TestFunctions(t *testing.T) {
	cases := []struct{ expr, want, typ string }{
		// NULLIF, BETWEEN, LIKE/ILIKE, || (NULL in, NULL out)
		{"nullif(u, 'héllo')", "NULL", "VARCHAR"},
		{"nullif(n, 'x')", "NULL", "VARCHAR"},
		{"nullif(u, n)", "héllo", "VARCHAR"},
		{"u BETWEEN 'a' AND 'z'", "true", "BOOLEAN"},
		{"n BETWEEN 'a' AND 'z'", "NULL", "BOOLEAN"},
		{"u LIKE 'h_llo'", "true", "BOOLEAN"},
		{"u ILIKE 'H%O'", "true", "BOOLEAN"},
		{"u NOT LIKE '%l%'", "false", "BOOLEAN"},
		{"n LIKE '%'", "NULL", "BOOLEAN"},
		{"u LIKE n", "NULL", "BOOLEAN"},
		{"u || '!'", "héllo!", "VARCHAR"},
		{"u || n", "NULL", "VARCHAR"},
		// lower, upper, length
		{"upper(u)", "HÉLLO", "VARCHAR"},
		{"lower('ÀB')", "àb", "VARCHAR"},
		{"length(u)", "5", "BIGINT"},
		{"length(n)", "NULL", "BIGINT"},
		// substring (DuckDB offsets)
		{"substring(u, 2, 3)", "éll", "VARCHAR"},
		{"substring(u, 2)", "éllo", "VARCHAR"},
		{"substring(u, -3)", "llo", "VARCHAR"},
		{"substring(u, -3, 2)", "ll", "VARCHAR"},
		{"substring(u, 0, 2)", "h", "VARCHAR"},
		{"substring(u, 3, -2)", "hé", "VARCHAR"},
		{"substring(u, 9)", "", "VARCHAR"},
		{"substring(u, 1, 0)", "", "VARCHAR"},
		{"substr('abcdef', 2, 3)", "bcd", "VARCHAR"},
		{"substring(u FROM 2 FOR 2)", "él", "VARCHAR"},
		{"substring(u FROM 4)", "lo", "VARCHAR"},
		{"substring(u FOR 1)", "h", "VARCHAR"},
		{"substring(n, 1, 2)", "NULL", "VARCHAR"},
		{"substring(u, ni)", "NULL", "VARCHAR"},
		{"substring(u, 1, 5000000000)", "error: Out of Range Error: Substring length outside of supported range (> 4294967295)", "VARCHAR"},
		// trim
		{"trim(s)", "Hello, Wörld!", "VARCHAR"},
		{"ltrim(s)", "Hello, Wörld!  ", "VARCHAR"},
		{"rtrim(s)", "  Hello, Wörld!", "VARCHAR"},
		{"trim('xxaxbxx', 'x')", "axb", "VARCHAR"},
		{"trim(BOTH 'x' FROM 'xxaxx')", "a", "VARCHAR"},
		{"trim(LEADING 'x' FROM 'xxaxx')", "axx", "VARCHAR"},
		{"trim(TRAILING FROM '  a  ')", "  a", "VARCHAR"},
		{"trim(' a ')", "a", "VARCHAR"},
		{"trim(chr_tab())", "bind error: line 1:6: unknown function chr_tab", ""},
		{"trim(n)", "NULL", "VARCHAR"},
		{"trim(u, n)", "NULL", "VARCHAR"},
		// replace
		{"replace(u, 'l', 'L')", "héLLo", "VARCHAR"},
		{"replace(u, '', 'x')", "héllo", "VARCHAR"},
		{"replace('aaa', 'aa', 'b')", "ba", "VARCHAR"},
		{"replace(u, n, 'x')", "NULL", "VARCHAR"},
		// abs, round, floor, ceil
		{"abs(-f)", "1700000000.5", "DOUBLE"},
		{"round(f)", "1700000001.0", "DOUBLE"},
		{"floor(f)", "1700000000.0", "DOUBLE"},
		{"ceil(f)", "1700000001.0", "DOUBLE"},
		{"abs(ni)", "NULL", "BIGINT"},
		{"round(CAST(ni AS DOUBLE), 2)", "NULL", "DOUBLE"},
		// date_part / extract
		{"date_part('year', t)", "2024", "BIGINT"},
		{"date_part('month', t)", "2", "BIGINT"},
		{"date_part('day', t)", "29", "BIGINT"},
		{"date_part('hour', t)", "13", "BIGINT"},
		{"date_part('minute', t)", "45", "BIGINT"},
		{"extract(minute FROM t)", "45", "BIGINT"},
		{"EXTRACT(SECOND FROM t)", "30", "BIGINT"},
		{"date_part('millisecond', t)", "30123", "BIGINT"},
		{"date_part('microsecond', t)", "30123456", "BIGINT"},
		{"date_part('epoch', t)", "1709214330.123456", "DOUBLE"},
		{"date_part('dow', t)", "4", "BIGINT"},
		{"date_part('isodow', t)", "4", "BIGINT"},
		{"date_part('doy', t)", "60", "BIGINT"},
		{"date_part('week', t)", "9", "BIGINT"},
		{"date_part('week', DATE '2021-01-01')", "53", "BIGINT"},
		{"date_part('isoyear', DATE '2021-01-01')", "2020", "BIGINT"},
		{"date_part('yearweek', DATE '2021-01-01')", "202053", "BIGINT"},
		{"date_part('dow', DATE '2024-03-03')", "0", "BIGINT"},
		{"date_part('isodow', DATE '2024-03-03')", "7", "BIGINT"},
		{"date_part('quarter', t)", "1", "BIGINT"},
		{"date_part('decade', t)", "202", "BIGINT"},
		{"date_part('century', t)", "21", "BIGINT"},
		{"date_part('millennium', t)", "3", "BIGINT"},
		{"date_part('century', DATE '2000-12-31')", "20", "BIGINT"},
		{"date_part('MINUTES', t)", "45", "BIGINT"},
		{"date_part('second', t0)", "59", "BIGINT"},
		{"date_part('microsecond', t0)", "59999500", "BIGINT"},
		{"date_part('year', t0)", "1969", "BIGINT"},
		{"date_part('hour', dt)", "0", "BIGINT"},
		{"date_part('minute', nt)", "NULL", "BIGINT"},
		{"date_part('fortnight', t)", "bind error: line 1:1: unknown date part 'fortnight'", ""},
		// strftime (DuckDB's format specifiers)
		{"strftime(t, '%Y-%m-%d %H:%M:%S')", "2024-02-29 13:45:30", "VARCHAR"},
		{"strftime(t, '%d/%m/%y %I:%M %p')", "29/02/24 01:45 PM", "VARCHAR"},
		{"strftime(t, '%A %a %B %b %j %w %u')", "Thursday Thu February Feb 060 4 4", "VARCHAR"},
		{"strftime(t, '%f %g %%')", "123456 123 %", "VARCHAR"},
		{"strftime(t, '%-m/%-d %-H:%-M:%-S %-I %-j')", "2/29 13:45:30 1 60", "VARCHAR"},
		{"strftime(DATE '2024-03-03', '%Y-%m-%d %H %a')", "2024-03-03 00 Sun", "VARCHAR"},
		{"strftime(TIMESTAMP '2024-03-03 00:05:00', '%I %p')", "12 AM", "VARCHAR"},
		{"strftime(nt, '%Y')", "NULL", "VARCHAR"},
		{"strftime(t, '%Q')", "bind error: line 1:1: strftime: unsupported format specifier %Q (supported: %a %A %b %B %d %f %g %H %I %j %m %M %p %S %u %w %y %Y %%, and %-d %-m %-H %-I %-M %-S %-j without padding)", ""},
		{"strftime(t, u)", "bind error: line 1:1: strftime's format must be a constant string, as in strftime(ts, '%Y-%m-%d')", ""},
		{"epoch(u)", "bind error: line 1:1: epoch needs a TIMESTAMP (or DATE; epoch_ms also takes BIGINT milliseconds), got VARCHAR", ""},
		{"minute(t)", "45", "BIGINT"},
		{"year(dt)", "2024", "BIGINT"},
		{"dayofweek(t)", "4", "BIGINT"},
		{"hour(nt)", "NULL", "BIGINT"},
		// date_trunc
		{"date_trunc('minute', t)", "2024-02-29 13:45:00", "TIMESTAMP"},
		{"date_trunc('hour', t)", "2024-02-29 13:00:00", "TIMESTAMP"},
		{"date_trunc('second', t)", "2024-02-29 13:45:30", "TIMESTAMP"},
		{"date_trunc('millisecond', t)", "2024-02-29 13:45:30.123", "TIMESTAMP"},
		{"date_trunc('day', t)", "2024-02-29 00:00:00", "TIMESTAMP"},
		{"date_trunc('week', t)", "2024-02-26 00:00:00", "TIMESTAMP"},
		{"date_trunc('month', t)", "2024-02-01 00:00:00", "TIMESTAMP"},
		{"date_trunc('quarter', TIMESTAMP '2024-05-17 01:02:03')", "2024-04-01 00:00:00", "TIMESTAMP"},
		{"date_trunc('year', t)", "2024-01-01 00:00:00", "TIMESTAMP"},
		{"date_trunc('decade', t)", "2020-01-01 00:00:00", "TIMESTAMP"},
		{"date_trunc('second', t0)", "1969-12-31 23:59:59", "TIMESTAMP"},
		{"date_trunc('month', dt)", "2024-02-01", "DATE"},
		{"date_trunc('hour', dt)", "2024-02-29 00:00:00", "TIMESTAMP"},
		{"date_trunc('minute', nt)", "NULL", "TIMESTAMP"},
		{"date_trunc('dow', t)", "bind error: line 1:1: date_trunc does not support the part 'dow'", ""},
		// time_bucket: DuckDB's default origins
		{"time_bucket(INTERVAL '5 minutes', t)", "2024-02-29 13:45:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '7 minutes', t)", "2024-02-29 13:45:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '7 minutes', TIMESTAMP '2000-01-03 00:13:59')", "2000-01-03 00:07:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '2 days', t)", "2024-02-28 00:00:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '1 week', t)", "2024-02-26 00:00:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '1 month', t)", "2024-02-01 00:00:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '5 months', t)", "2023-10-01 00:00:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '5 months', TIMESTAMP '2000-05-31 23:00:00')", "2000-01-01 00:00:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '1 second', t0)", "1969-12-31 23:59:59", "TIMESTAMP"},
		{"time_bucket(INTERVAL '10 minutes', t, INTERVAL '3 minutes')", "2024-02-29 13:43:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '10 minutes', t, TIMESTAMP '2024-01-01 00:07:00')", "2024-02-29 13:37:00", "TIMESTAMP"},
		{"time_bucket(INTERVAL '2 days', dt)", "2024-02-28", "DATE"},
		{"time_bucket(INTERVAL '5 minutes', nt)", "NULL", "TIMESTAMP"},
		{"time_bucket(INTERVAL '1 month 1 day', t)", "bind error: line 1:1: time_bucket: month intervals cannot have a day or time component", ""},
		{"time_bucket(INTERVAL '0 seconds', t)", "bind error: line 1:1: time_bucket: the bucket width must be greater than 0", ""},
		// epoch_ms, to_timestamp
		{"epoch_ms(t)", "1709214330123", "BIGINT"},
		{"epoch_ms(t0)", "0", "BIGINT"},
		{"epoch_ms(i)", "2023-11-14 22:13:20.123", "TIMESTAMP"},
		{"epoch_ms(1)", "1970-01-01 00:00:00.001", "TIMESTAMP"},
		{"epoch_ms(nt)", "NULL", "BIGINT"},
		{"epoch_ms(ni)", "NULL", "TIMESTAMP"},
		{"epoch_us(t)", "1709214330123456", "BIGINT"},
		{"epoch(t)", "1709214330.123456", "DOUBLE"},
		{"to_timestamp(f)", "2023-11-14 22:13:20.5", "TIMESTAMP"},
		{"to_timestamp(0)", "1970-01-01 00:00:00", "TIMESTAMP"},
		{"to_timestamp(-1.5)", "1969-12-31 23:59:58.5", "TIMESTAMP"},
		{"to_timestamp(CAST(ni AS DOUBLE))", "NULL", "TIMESTAMP"},
		{"to_timestamp(1e300)", "error: Conversion Error: Could not convert epoch seconds to TIMESTAMP WITH TIME ZONE", "TIMESTAMP"},
		// JSON access
		{"j->>'$.user.id'", "42", "VARCHAR"},
		{"j->>'$.user.name'", "ann", "VARCHAR"},
		{"j->'$.user.name'", `"ann"`, "VARCHAR"},
		{"j->'user'->>'name'", "ann", "VARCHAR"},
		{"j->>'$.user.tags[1]'", "b", "VARCHAR"},
		{"j->'$.user'->'tags'->>0", "a", "VARCHAR"},
		{"j->'$.user.tags'", `["a","b"]`, "VARCHAR"},
		{"j->>'/user/tags/0'", "a", "VARCHAR"},
		{"j->>'/user/a~1b'", "1", "VARCHAR"},
		{`j->>'$.user."a/b"'`, "1", "VARCHAR"},
		{"j->>'s'", `x"y`, "VARCHAR"},
		{"j->>'f'", "1.5", "VARCHAR"}, // DuckDB prints the number's canonical text
		{"j->>'n'", "NULL", "VARCHAR"},
		{"j->'n'", "null", "VARCHAR"},
		{"j->>'missing'", "NULL", "VARCHAR"},
		{"j->>'$.user.id.deeper'", "NULL", "VARCHAR"},
		{"j->>'$.user.tags[5]'", "NULL", "VARCHAR"},
		{"CAST(j->>'$.user.id' AS INTEGER) + 1", "43", "INTEGER"},
		{"json_extract_string(j, '$.user.name')", "ann", "VARCHAR"},
		{"json_extract(j, '$.user.id')", "42", "VARCHAR"},
		{"n->>'a'", "NULL", "VARCHAR"},
		{"j->>n", "bind error: line 1:2: ->> needs a constant path on the right, as in payload->>'$.user.id'", ""},
		{"bad->>'a'", "error: Conversion Error: Malformed JSON: cannot parse JSON: cannot parse object: cannot parse object value: cannot parse empty string; unparsed tail: \"\"", "VARCHAR"},
		{"j->>'$.*'", "bind error: line 1:2: wildcards are not supported in JSON paths: \"$.*\"", ""},
		{"i->>'a'", "bind error: line 1:2: ->> needs a JSON or VARCHAR operand on the left, got BIGINT", ""},
		{"j->>'a' = 'x' OR u LIKE 'h%'", "true", "BOOLEAN"},
	}
	row := funcRow()
	for _, c := range cases {
		got, typ := funcText(t, c.expr, row)
		if got != c.want || c.typ != "" && typ.String() != c.typ {
			t.Errorf("%s\n  got  %s %s\n  want %s %s", c.expr, got, typ, c.want, c.typ)
		}
	}
}

func funcText(t *testing.T, expr string, row []types.Value) (string, types.Type) {
	t.Helper()
	x, err := CompileExpr(expr, funcSource)
	if err != nil {
		return "bind error: " + err.Error(), types.Type{}
	}
	v, err := x.Eval(row)
	if err != nil {
		return "error: " + err.Error(), x.Type()
	}
	if v.Null {
		return "NULL", x.Type()
	}
	if v.Kind != x.Type().Kind {
		t.Errorf("%s: value kind %s differs from static type %s", expr, v.Kind, x.Type())
	}
	return ValueText(v), x.Type()
}

// TestFunctionsNullEverywhere: every scalar function with any one argument
// NULL (the others valid) is NULL, except those documented otherwise
// (concat skips NULLs, coalesce/ifnull pick the other argument).
func TestFunctionsNullEverywhere(t *testing.T) {
	calls := []string{
		"lower(?)", "upper(?)", "length(?)", "substring(?, 2)", "substring('abc', ?)", "substring('abc', 1, ?)",
		"trim(?)", "trim('xax', ?)", "ltrim(?)", "rtrim(?)", "replace(?, 'a', 'b')", "replace('a', ?, 'b')", "replace('a', 'a', ?)",
		"abs(?)", "round(?)", "floor(?)", "ceil(?)", "date_part('minute', ?)", "date_trunc('hour', ?)",
		"time_bucket(INTERVAL '5 minutes', ?)", "time_bucket(INTERVAL '5 minutes', t, ?)", "epoch_ms(?)", "to_timestamp(?)",
		"?->>'a'", "? || 'x'", "'x' || ?", "? LIKE 'a'", "'a' LIKE ?", "nullif(?, 'a')", "? BETWEEN 'a' AND 'b'",
		"minute(?)", "epoch(?)", "epoch_us(?)", "json_extract(?, '$.a')",
	}
	row := funcRow()
	for _, c := range calls {
		expr := ""
		for _, r := range c {
			if r == '?' {
				expr += "NULL"
			} else {
				expr += string(r)
			}
		}
		got, _ := funcText(t, expr, row)
		if got != "NULL" {
			t.Errorf("%s = %s, want NULL", expr, got)
		}
	}
}
