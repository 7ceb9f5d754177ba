package ubik_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/metamorphic"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/types"
)

// metamorphicOracleSQL is a query the batch oracle can state over the
// metamorphic harness's schema: every key cell kind (a repaired string,
// a DOUBLE whose NaN, ±Infinity and NULL are one cell and whose -0.0 is
// 0.0, canonical JSON text) and aggregates that PostgreSQL computes
// exactly.
const metamorphicOracleSQL = `CREATE VIEW mq AS SELECT g, x, payload->'k' AS k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws,
  count(*) AS c, count(x) AS cx, sum(n) AS sn, min(n) AS ln, max(n) AS hn, count(DISTINCT payload->'k') AS dk
FROM ev GROUP BY g, x, payload->'k', TUMBLE(ts, INTERVAL '10' SECOND);
`

// TestMetamorphicOracle checks the metamorphic harness's reference run (the
// one every other path is compared with) against PostgreSQL's batch GROUP
// BY over the generated events' values: the events that are not retries
// (dedup_key keeps the first copy; a retry carries the same values), with
// each key cell as the identity rules make it.
func TestMetamorphicOracle(t *testing.T) {
	dsn := testenv.RequirePostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET TIME ZONE 'UTC'; SET extra_float_digits = 1`); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{11, 12, 13, 14} {
		c := metamorphic.Generate(seed, metamorphic.Size{Events: 3000})
		c.SQL = metamorphic.Source + metamorphicOracleSQL
		c.Query = nil
		c.Monotone, c.Windowed = true, true
		ref, got, err := metamorphic.Reference(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if ref.Malformed != 0 {
			t.Fatalf("seed %d: %d malformed events", seed, ref.Malformed)
		}
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS mev; CREATE TEMP TABLE mev (g text, xk float8, xnull bool, n bigint, k text, ts timestamp)`); err != nil {
			t.Fatal(err)
		}
		var rows [][]any
		for _, e := range c.Events {
			if e.Dup {
				continue
			}
			var g, xk, n, k any
			if !e.GNull {
				g = e.G
			}
			if !e.X.Null && !math.IsNaN(e.X.F) && !math.IsInf(e.X.F, 0) {
				xk = e.X.F + 0 // -0.0 + 0 is 0.0
			}
			if !e.NNull {
				n = e.N
			}
			if e.K != "" {
				k = e.K
			}
			rows = append(rows, []any{g, xk, e.X.Null, n, k, time.UnixMicro(e.TS).UTC()})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"mev"}, []string{"g", "xk", "xnull", "n", "k", "ts"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
		res, err := conn.Query(ctx, `SELECT g, xk::text, k, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws,
			count(*)::text, (count(*) FILTER (WHERE NOT xnull))::text, sum(n)::text, min(n)::text, max(n)::text, count(DISTINCT k)::text
			FROM mev GROUP BY 1, 2, 3, 4`)
		if err != nil {
			t.Fatal(err)
		}
		want := metamorphic.Finals{}
		cols := []string{"g", "x", "k", "ws", "c", "cx", "sn", "ln", "hn", "dk"}
		typs := []types.Type{types.Varchar, types.Double, types.Varchar, types.Timestamp, types.BigInt, types.BigInt, types.HugeInt, types.BigInt, types.BigInt, types.BigInt}
		for res.Next() {
			vals, err := res.Values()
			if err != nil {
				t.Fatal(err)
			}
			cells := make([]types.Value, len(typs))
			for i, typ := range typs {
				cells[i] = pgCell(t, vals[i], typ)
			}
			want[string(changelog.AppendKey(nil, cells[:4]))] = string(changelog.AppendValue(nil, cols, cells))
		}
		if res.Err() != nil {
			t.Fatal(res.Err())
		}
		if d := metamorphic.Diff(want, got); d != "" {
			t.Errorf("seed %d: the reference run differs from PostgreSQL: %s", seed, d)
		}
		t.Logf("seed %d: %d events, %d retries, %d (group, window) agree", seed, len(c.Events), ref.Duplicates, len(want))
	}
}
