package plan

import (
	"testing"
)

// BenchmarkEval measures compiled expression evaluation over one row;
// rows/s is reported per expression.
func BenchmarkEval(b *testing.B) {
	exprs := []struct{ name, sql string }{
		{"colref", "i"},
		{"int_add_cmp", "i + 1 > 5"},
		{"bigint_mul", "b * 3"},
		{"decimal_add", "d + 1.25"},
		{"decimal_mul", "d * d"},
		{"double_div", "f / 3"},
		{"and_or_3vl", "(i > 1 AND f < 10) OR n = 3"},
		{"ts_plus_interval", "t + INTERVAL '5' MINUTE"},
		{"ts_cmp_literal", "t >= '2026-07-18T09:00:00Z'"},
		{"in_list", "i IN (1, 3, 5, 7, 9)"},
		{"case", "CASE WHEN i > 5 THEN 'big' WHEN i > 2 THEN 'mid' ELSE 'small' END"},
		{"coalesce", "coalesce(n, i, 0)"},
		{"cast_double_int", "CAST(f AS INTEGER)"},
		{"cast_varchar_int", "CAST(s AS INTEGER)"},
		{"like", "s LIKE '%4%'"},
		{"cast_double_varchar", "CAST(f AS VARCHAR)"},
	}
	row := evalRow()
	for _, e := range exprs {
		x, err := CompileExpr(e.sql, evalSource)
		if err != nil {
			b.Fatalf("%s: %v", e.sql, err)
		}
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := x.Eval(row); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	sql := `CREATE SOURCE s (customer VARCHAR, amount DECIMAL(10,2), qty INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl');
CREATE VIEW v AS SELECT customer, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, sum(amount) AS total, count(*) AS n, sum(amount) / count(*) AS mean
FROM s WHERE amount > 0 AND customer <> '' GROUP BY customer, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING count(*) > 1 EMIT EARLY EVERY INTERVAL '1' SECOND;
CREATE SINK out FROM v WITH (topic = 'x')`
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Compile(sql, CompileOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFunctions measures the issue-6 scalar functions over funcRow.
func BenchmarkFunctions(b *testing.B) {
	exprs := []struct{ name, sql string }{
		{"json_path", "j->>'$.user.id'"},
		{"json_key_chain", "j->'user'->>'name'"},
		{"substring", "substring(u, 2, 3)"},
		{"trim", "trim(s)"},
		{"replace", "replace(s, 'l', 'L')"},
		{"date_part_minute", "date_part('minute', t)"},
		{"date_trunc_hour", "date_trunc('hour', t)"},
		{"time_bucket_5min", "time_bucket(INTERVAL '5 minutes', t)"},
		{"time_bucket_month", "time_bucket(INTERVAL '1 month', t)"},
		{"epoch_ms", "epoch_ms(t)"},
		{"to_timestamp", "to_timestamp(f)"},
	}
	row := funcRow()
	for _, e := range exprs {
		x, err := CompileExpr(e.sql, funcSource)
		if err != nil {
			b.Fatalf("%s: %v", e.sql, err)
		}
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := x.Eval(row); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
