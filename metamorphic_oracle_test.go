package ubik_test

import (
	"math"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/metamorphic"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
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
	// The four seeds' events load and their oracle queries run in one psql
	// session; the comparison follows.
	var sc testenv.PGScript
	sc.Exec(`SET TIME ZONE 'UTC'; SET extra_float_digits = 1`)
	type run struct {
		seed       uint64
		q          int
		got        metamorphic.Finals
		events     int
		duplicates int64
	}
	var runs []run
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
		sc.Exec(`DROP TABLE IF EXISTS mev; CREATE TEMP TABLE mev (g text, xk float8, xnull bool, n bigint, k text, ts timestamp)`)
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
		sc.CopyIn(t, "mev", []string{"g", "xk", "xnull", "n", "k", "ts"}, rows)
		q := sc.Query(`SELECT g, xk::text, k, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws,
			count(*)::text, (count(*) FILTER (WHERE NOT xnull))::text, sum(n)::text, min(n)::text, max(n)::text, count(DISTINCT k)::text
			FROM mev GROUP BY 1, 2, 3, 4`)
		runs = append(runs, run{seed, q, got, len(c.Events), ref.Duplicates})
	}
	res := sc.Run(t, dsn)
	cols := []string{"g", "x", "k", "ws", "c", "cx", "sn", "ln", "hn", "dk"}
	typs := []types.Type{types.Varchar, types.Double, types.Varchar, types.Timestamp, types.BigInt, types.BigInt, types.HugeInt, types.BigInt, types.BigInt, types.BigInt}
	for _, r := range runs {
		seed, got := r.seed, r.got
		want := metamorphic.Finals{}
		for _, vals := range res[r.q] {
			if len(vals) != len(typs) {
				t.Fatalf("seed %d: an oracle row has %d cells, want %d", seed, len(vals), len(typs))
			}
			cells := make([]types.Value, len(typs))
			for i, typ := range typs {
				cells[i] = pgCell(t, vals[i], typ)
			}
			want[string(changelog.AppendKey(nil, cells[:4]))] = string(changelog.AppendValue(nil, cols, cells))
		}
		if d := metamorphic.Diff(want, got); d != "" {
			t.Errorf("seed %d: the reference run differs from PostgreSQL: %s", seed, d)
		}
		t.Logf("seed %d: %d events, %d retries, %d (group, window) agree", seed, r.events, r.duplicates, len(want))
	}
}
