package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

var compileSeeds = []string{
	"CREATE SOURCE u (k VARCHAR, q DECIMAL(10,2), ts TIMESTAMP, WATERMARK FOR ts AS ts); CREATE TABLE p (k VARCHAR, price DECIMAL(12,6), vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt); SELECT u.k, sum(u.q * p.price) FROM u LEFT JOIN p FOR SYSTEM_TIME AS OF u.ts ON u.k = p.k GROUP BY u.k, TUMBLE(u.ts, INTERVAL '1' MINUTE)",
	"CREATE SOURCE u (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts); CREATE TABLE p (k VARCHAR, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR ts AS ts); SELECT k, count(*) FROM u JOIN p FOR SYSTEM_TIME AS OF ts ON k = k GROUP BY k",
	"SELECT customer, count(*) FROM events GROUP BY customer",
	"SELECT customer, TUMBLE_START(ts, INTERVAL '1' MINUTE), sum(amount) / count(*) FROM events WHERE amount > 0 GROUP BY customer, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING count(*) > 1 EMIT EARLY EVERY INTERVAL '1' SECOND ALLOWED LATENESS INTERVAL '30' SECOND",
	"SELECT window_start, window_end, customer, max(price), is_final(), revision() FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)) GROUP BY window_start, window_end, customer",
	"SELECT window_start, count(DISTINCT qty) FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY window_start",
	"CREATE SOURCE s (a INT, b VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '5' SECOND) WITH (format='jsonl'); CREATE VIEW v AS SELECT b, sum(a) FROM s GROUP BY b; CREATE SINK k FROM v",
	"SELECT CASE WHEN qty > 1 THEN 'a' ELSE NULL END, coalesce(customer, 'x'), count(*) FROM events GROUP BY 1, 2",
	"SELECT qty // 0, qty % 0, price / 0, CAST(customer AS INT), TRY_CAST(customer AS DATE), count(*) FROM events GROUP BY qty, price, customer",
	"SELECT sum(huge * huge * huge), avg(amount * amount * amount), min(span), max(d - 1) FROM events",
	"SELECT count(*) FROM events WHERE ts > '2026-07-18T10:00:00+02:00' AND customer LIKE '%a_b%' AND qty NOT IN (1, NULL)",
	"SELECT lower(upper(customer)) || '!', length(customer), abs(qty), round(amount, -1), floor(price), count(*) FROM events GROUP BY customer, qty, amount, price",
	"SELECT -(-2147483648), 9223372036854775807 + 1, 1e400, 0.00000000000000000000000000000000000000001, count(*) FROM events",
	"SELECT count(*) FROM events GROUP BY TUMBLE(ts, INTERVAL '0' SECOND)",
	"SELECT count(*) FROM events GROUP BY TUMBLE(ts, INTERVAL '99999999999999999999' DAYS)",
	"SELECT count(*) FROM events GROUP BY HOP(ts, INTERVAL '1 microsecond', INTERVAL '1 day')",
	"SELECT sum(count(*)) FROM events",
	"SELECT * FROM events",
	"SELECT a FROM nope",
	"SELECT count(*) FROM events; SELECT count(*) FROM events",
	"CREATE SINK x FROM y",
	"SELECT CAST(NULL AS DECIMAL(38,38)) * CAST(NULL AS DECIMAL(38,38)), count(*) FROM events",
	"SELECT CAST(amount AS DECIMAL(38,38)), CAST(price AS DECIMAL(1,0)), count(*) FROM events GROUP BY amount, price",
	"SELECT ts - ts, d - d, ts + span, span - span, -span, count(*) FROM events GROUP BY ts, d, span",
	"SELECT TUMBLE_END(ts, INTERVAL '1' HOUR), count(*) FROM events GROUP BY TUMBLE(ts, INTERVAL '60' MINUTES)",
	"SELECT NULL = NULL, NULL + NULL, NULL || NULL, -NULL, NOT NULL, CASE NULL WHEN NULL THEN 1 END, count(*) FROM events",
	// functions
	"SELECT substring(customer, 2, 3), substring(customer FROM -2 FOR 5), substr(customer, 0), trim(customer), trim(LEADING 'x' FROM customer), rtrim(customer, 'ab'), replace(customer, 'a', ''), count(*) FROM events GROUP BY customer",
	"SELECT date_part('minute', ts), extract(epoch FROM ts), EXTRACT(isodow FROM d), minute(ts), year(d), date_trunc('week', ts), date_trunc('month', d), count(*) FROM events GROUP BY ts, d",
	"SELECT time_bucket(INTERVAL '5 minutes', ts), time_bucket(INTERVAL '1 month', ts, INTERVAL '2 days'), time_bucket(INTERVAL '7 days', d, TIMESTAMP '2024-01-01'), count(*) FROM events GROUP BY ts, d",
	"SELECT epoch_ms(ts), epoch_ms(big), epoch_us(ts), epoch(ts), to_timestamp(price), to_timestamp(qty), count(*) FROM events GROUP BY ts, big, price, qty",
	"SELECT payload->>'$.user.id', payload->'user'->>'name', payload->>0, payload->>'/a/0', json_extract_string(payload, '$.x[2]'), count(*) FROM events GROUP BY payload",
	"SELECT customer->>'$.*', payload->>qty, count(*) FROM events GROUP BY customer, payload, qty",
	"SELECT date_part('fortnight', ts), time_bucket(INTERVAL '1 month 1 day', ts), date_trunc('dow', ts), count(*) FROM events GROUP BY ts",
	"SELECT nullif(customer, 'x') ILIKE '%A_', qty BETWEEN 1 AND NULL, abs(big), round(amount, 1), floor(price), ceil(amount), count(*) FROM events GROUP BY 1, 2, big, amount, price",
	// aggregates
	"SELECT customer, count(DISTINCT qty), sum(DISTINCT amount), avg(DISTINCT price), min_by(qty, price), arg_max(customer, ts), first(amount), last(customer), arbitrary(qty) FROM events GROUP BY customer",
	"SELECT var_samp(price), variance(qty), stddev(amount), stddev_samp(big), var_pop(huge), stddev_pop(price), bool_and(flag), bool_or(qty > 1), count(*) FROM events",
	"SELECT approx_count_distinct(customer), approx_count_distinct(DISTINCT ts), approx_quantile(price, 0.5), approx_quantile(qty, 0), approx_quantile(amount, 1) FROM events",
	"SELECT approx_quantile(price, 2), approx_quantile(price, qty), approx_quantile(ts, 0.5), min_by(DISTINCT qty, price), count(DISTINCT *) FROM events",
	"SELECT first(v), last(v) FROM nowm",
	// computed columns, TO_TIMESTAMP_LTZ, TIMESTAMP(p)
	"CREATE SOURCE c (k VARCHAR, ms BIGINT, at TIMESTAMP(3), ts AS TO_TIMESTAMP_LTZ(ms, 3), sec AS TO_TIMESTAMP_LTZ(ms / 1000.0, 0), d AS CAST(at AS TIMESTAMP(0)), u AS upper(k) || '!', WATERMARK FOR ts AS ts - INTERVAL '5' SECOND); SELECT u, window_start, count(*), max(d), min(sec) FROM TABLE(TUMBLE(TABLE c, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE ts > at GROUP BY u, window_start",
	"CREATE SOURCE c (ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 6), WATERMARK FOR ts AS ts); SELECT count(*) FROM c GROUP BY TUMBLE(ts, INTERVAL '1' SECOND)",
	"CREATE SOURCE c (ms BIGINT, a AS b, b AS a); SELECT count(*) FROM c",
	"CREATE SOURCE c (ms BIGINT, a AS TO_TIMESTAMP_LTZ(ms, ms), b AS TO_TIMESTAMP_LTZ(NULL, 3), e AS count(ms)); SELECT count(*) FROM c",
	"SELECT TO_TIMESTAMP_LTZ(big, 0), TO_TIMESTAMP_LTZ(price, 3), TO_TIMESTAMP_LTZ(amount, 6), CAST(ts AS TIMESTAMP(2)), TRY_CAST(customer AS TIMESTAMP(5)), count(*) FROM events GROUP BY big, price, amount, ts, customer",
}

// FuzzCompile checks that Compile never panics, that every error is a
// positioned *parser.Error inside the text, and that every compiled
// expression evaluates without panicking over rows of NULLs and of edge
// values.
func FuzzCompile(f *testing.F) {
	for _, s := range compileSeeds {
		f.Add(s)
	}
	for _, s := range parseSeedsForPlan() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		prog, err := Compile(sql, CompileOptions{Sources: testSources(), DefaultName: "q"})
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("Compile(%q) panicked: %v", sql, err)
			}
			var pe *parser.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Compile(%q): non-positioned error %T %v", sql, err, err)
			}
			if pe.Pos < 0 || pe.Pos > len(sql) {
				t.Fatalf("Compile(%q): position %d outside the text", sql, pe.Pos)
			}
			_ = pe.Caret()
			return
		}
		for _, src := range prog.Sources {
			// A compiled source is a valid registered one (Engine.Exec
			// hands its sources back to later compiles).
			if err := validateSource(src); err != nil {
				t.Fatalf("Compile(%q): its source does not validate: %v", sql, err)
			}
		}
		for _, q := range prog.Queries {
			exerciseQuery(t, sql, q)
		}
	})
}

func parseSeedsForPlan() []string {
	return []string{"SELECT ((((((1", "SELECT 'x", ";;", "", "\x00", "SELECT count(*) FROM events EMIT FINAL"}
}

// edgeValue is a non-NULL value of t that tends to hit boundaries.
func edgeValue(t types.Type, variant int) types.Value {
	switch t.Kind {
	case types.KindBoolean:
		return types.Bool(variant%2 == 0)
	case types.KindInteger:
		return types.Int([]int32{0, -2147483648, 2147483647, 7}[variant%4])
	case types.KindBigInt:
		return types.Big([]int64{0, -1 << 63, 1<<63 - 1, 9}[variant%4])
	case types.KindHugeInt:
		return types.Huge([]types.Int128{{}, {Hi: -1 << 63}, {Hi: 1<<63 - 1, Lo: ^uint64(0)}, types.I128(3)}[variant%4])
	case types.KindDecimal:
		x := []types.Int128{{}, types.I128(-5), pow10i128[t.Width], types.I128(1)}[variant%4]
		if variant%4 == 2 {
			x, _ = x.Sub(types.I128(1))
		}
		return types.Dec(x, t.Scale)
	case types.KindDouble:
		return types.Float([]float64{0, -1e308, 1e308, 2.5}[variant%4])
	case types.KindVarchar:
		return types.Str([]string{"", " 42 ", "2026-07-18 10:00:00", "\xff\xfe%_"}[variant%4])
	case types.KindTimestamp:
		return types.TS([]int64{0, minDateDays * usPerDay, maxDateDays * usPerDay, 1784368800000000}[variant%4])
	case types.KindDate:
		return types.DateDays([]int64{0, minDateDays, maxDateDays, 20652}[variant%4])
	case types.KindInterval:
		return []types.Value{types.Interv(0, 0, 0), types.Interv(-2147483648, -2147483648, -1<<63), types.Interv(2147483647, 2147483647, 1<<63-1), types.Interv(1, 2, 3)}[variant%4]
	}
	return types.NullOf(t)
}

func rowFor(ts []types.Type, variant int) []types.Value {
	row := make([]types.Value, len(ts))
	for i, t := range ts {
		if variant < 0 {
			row[i] = types.NullOf(t)
		} else {
			row[i] = edgeValue(t, variant+i)
		}
	}
	return row
}

func exerciseQuery(t *testing.T, sql string, q *Query) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("evaluating %q panicked: %v", sql, r)
		}
	}()
	srcTypes := make([]types.Type, len(q.Source.Columns))
	for i, c := range q.Source.Columns {
		srcTypes[i] = c.Type
	}
	postTypes := make([]types.Type, 0, q.PostAggWidth())
	for _, k := range q.Keys {
		if k.Kind == KeyExpr {
			postTypes = append(postTypes, k.Expr.Type())
		} else {
			postTypes = append(postTypes, types.Timestamp)
		}
	}
	for _, a := range q.Aggs {
		postTypes = append(postTypes, a.Type)
	}
	postTypes = append(postTypes, types.Timestamp, types.Timestamp, types.Boolean, types.BigInt)
	if len(postTypes) != q.PostAggWidth() {
		t.Fatalf("post-aggregation width %d, want %d", len(postTypes), q.PostAggWidth())
	}
	var src, post []Expr
	for _, c := range q.Source.Columns {
		if c.Computed != nil {
			src = append(src, c.Computed)
		}
	}
	if q.Filter != nil {
		src = append(src, q.Filter)
	}
	for _, k := range q.Keys {
		if k.Kind == KeyExpr {
			src = append(src, k.Expr)
		}
	}
	for _, a := range q.Aggs {
		src = append(src, a.Args...)
	}
	if q.Having != nil {
		post = append(post, q.Having)
	}
	for _, c := range q.Select {
		post = append(post, c.Expr)
	}
	check := func(exprs []Expr, ts []types.Type) {
		for variant := -1; variant < 4; variant++ {
			row := rowFor(ts, variant)
			for _, e := range exprs {
				v, err := e.Eval(row)
				_ = e.String()
				if err == nil && !v.Null && v.Kind != e.Type().Kind && e.Type().Kind != types.KindNull {
					t.Fatalf("%q: %s evaluated to kind %s, static type %s", sql, e, v.Kind, e.Type())
				}
				if err != nil {
					var ee *EvalError
					if !errors.As(err, &ee) {
						t.Fatalf("%q: %s: runtime error %v is not an *EvalError", sql, e, err)
					}
				}
			}
		}
	}
	check(src, srcTypes)
	check(post, postTypes)
	_ = fmt.Sprint(q.Explain())
}
