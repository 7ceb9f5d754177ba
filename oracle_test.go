package ubik_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// oracleEvent is one generated event; the same events feed ubik and the
// batch oracle (PostgreSQL).
type oracleEvent struct {
	k      *string
	amount *float64
	qty    int64
	price  string // DECIMAL(12,3) text
	tsUS   int64
}

const oracleSource = `CREATE SOURCE ev (k VARCHAR, amount DOUBLE, qty BIGINT, price DECIMAL(12,3), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl');`

// genOracleEvents makes n events whose disorder stays inside the watermark
// delay (3 s), so none is late and the batch answer is the full answer.
// Amounts mix cents, huge and tiny magnitudes and cancellations so a naive
// floating-point sum would differ from the exact one.
func genOracleEvents(seed uint64, n int) []oracleEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keys := []string{"acme", "zeta", "ünïcødé", "a\"b\\c", "tab\there", "😀", "", "m7", "m8", "m9"}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	evs := make([]oracleEvent, n)
	for i := range evs {
		e := &evs[i]
		if r.IntN(50) != 0 {
			k := keys[r.IntN(len(keys))]
			e.k = &k
		}
		if r.IntN(40) != 0 {
			var a float64
			switch r.IntN(6) {
			case 0:
				a = float64(r.IntN(1_000_000)) / 100
			case 1:
				a = (r.Float64() - 0.5) * 1e16
			case 2:
				a = r.Float64() * 1e-9
			case 3:
				a = -float64(r.IntN(1000)) / 10
			case 4:
				a = math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(1000+r.IntN(100))<<52)
			default:
				a = 0.1
			}
			e.amount = &a
		}
		e.qty = r.Int64N(1<<62) - 1<<61
		e.price = fmt.Sprintf("%d.%03d", r.IntN(1_000_000_000)-500_000_000, r.IntN(1000))
		// ~1 event per 7 ms with up to 2.5 s of disorder.
		e.tsUS = base + int64(i)*7000 - r.Int64N(2_500_000)
	}
	return evs
}

func (e *oracleEvent) json() []byte {
	b := []byte(`{"k":`)
	if e.k == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendQuote(b, *e.k)
	}
	b = append(b, `,"amount":`...)
	if e.amount == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendFloat(b, *e.amount, 'g', -1, 64)
	}
	b = append(b, `,"qty":`...)
	b = strconv.AppendInt(b, e.qty, 10)
	b = append(b, `,"price":`...)
	b = append(b, e.price...)
	b = append(b, `,"ts":"`...)
	b = append(b, tsText(e.tsUS)...)
	return append(b, `"}`...)
}

func tsText(us int64) string {
	b := changelog.AppendCell(nil, types.TS(us))
	return string(b[1 : len(b)-1])
}

// runFinal runs sql over the events and returns the last record per key
// (the final one for windowed queries), pushing in batches of batch events
// with an early emission after each batch.
func runFinal(t *testing.T, sql string, evs []oracleEvent, batch int) (map[string]string, []changelog.Record) {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var all []changelog.Record
	q, err := eng.Start(sql, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		all = append(all, r.Clone())
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := q.Push(evs[i].json()); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if (i+1)%batch == 0 {
			if err := q.EmitEarly(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Late != 0 || st.Malformed != 0 || st.EvalErrors != 0 {
		t.Fatalf("unexpected rejects: %+v", st)
	}
	last := map[string]string{}
	for _, r := range all {
		last[string(r.Key)] = string(r.Value)
	}
	return last, all
}

type oracleCase struct {
	name  string
	sql   string // ubik
	pgsql string // the batch answer over table ev: key cells, then value cells as text
	key   []types.Type
	cols  []string
	types []types.Type
	// keyInValue maps value columns that are key cells (by index), -1 otherwise.
}

func oracleCases() []oracleCase {
	dec := types.Decimal(38, 3)
	return []oracleCase{
		{
			name: "tumble",
			sql: oracleSource + `SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, count(amount) AS na,
				sum(amount) AS s, min(amount) AS lo, max(amount) AS hi, avg(amount) AS mean, sum(qty) AS q, sum(price) AS p
				FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT EARLY EVERY INTERVAL '1' SECOND`,
			pgsql: `SELECT k, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws,
				k, date_bin('10 seconds', ts, timestamp '1970-01-01')::text, count(*)::text, count(amount)::text,
				(sum(exact)::float8)::text, min(amount)::text, max(amount)::text, ((sum(exact)::numeric(1000,400) / count(amount))::float8)::text,
				sum(qty)::text, sum(price)::text
				FROM ev GROUP BY 1, 2`,
			key:   []types.Type{types.Varchar, types.Timestamp},
			cols:  []string{"k", "ws", "n", "na", "s", "lo", "hi", "mean", "q", "p"},
			types: []types.Type{types.Varchar, types.Timestamp, types.BigInt, types.BigInt, types.Double, types.Double, types.Double, types.Double, types.HugeInt, dec},
		},
		{
			name: "hop",
			sql: oracleSource + `SELECT k, HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS ws, count(*) AS n, sum(amount) AS s
				FROM ev GROUP BY k, HOP(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) EMIT EARLY EVERY INTERVAL '1' SECOND`,
			pgsql: `SELECT k, w AS ws, k, w::text, count(*)::text, (sum(exact)::float8)::text FROM (
				  SELECT ev.*, date_bin('2 seconds', ts, timestamp '1970-01-01') - g * interval '2 seconds' AS w
				  FROM ev, generate_series(0, 2) g) x
				WHERE w + interval '6 seconds' > ts GROUP BY 1, 2`,
			key:   []types.Type{types.Varchar, types.Timestamp},
			cols:  []string{"k", "ws", "n", "s"},
			types: []types.Type{types.Varchar, types.Timestamp, types.BigInt, types.Double},
		},
		{
			name: "session",
			sql: oracleSource + `SELECT k, SESSION_START(ts, INTERVAL '40' MILLISECOND) AS ss, SESSION_END(ts, INTERVAL '40' MILLISECOND) AS se,
				count(*) AS n, sum(qty) AS q, max(amount) AS hi
				FROM ev GROUP BY k, SESSION(ts, INTERVAL '40' MILLISECOND)`,
			pgsql: `WITH o AS (SELECT ev.*, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts) <= interval '40 milliseconds' THEN 0 ELSE 1 END AS brk FROM ev),
				s AS (SELECT o.*, sum(brk) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM o)
				SELECT k, min(ts), k, min(ts)::text, (max(ts) + interval '40 milliseconds')::text, count(*)::text, sum(qty)::text, max(amount)::text
				FROM s GROUP BY k, sid`,
			key:   []types.Type{types.Varchar, types.Timestamp},
			cols:  []string{"k", "ss", "se", "n", "q", "hi"},
			types: []types.Type{types.Varchar, types.Timestamp, types.Timestamp, types.BigInt, types.HugeInt, types.Double},
		},
		{
			// The exact aggregates. PostgreSQL spells them with
			// ordered array_agg: ties on the ordering value break on the
			// value itself (byte order: COLLATE "C"), as ubik does.
			name: "aggs_tumble",
			sql: oracleSource + `SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(DISTINCT amount) AS da,
				count(DISTINCT qty % 7) AS dq, sum(DISTINCT qty % 7) AS sdq, min_by(qty, amount) AS qmin, max_by(k, amount) AS kmax,
				first(amount) AS fa, last(amount) AS la, bool_and(amount > 0) AS allpos, bool_or(amount > 1e15) AS anyhuge
				FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT EARLY EVERY INTERVAL '1' SECOND`,
			pgsql: `SELECT k, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws,
				k, date_bin('10 seconds', ts, timestamp '1970-01-01')::text, count(DISTINCT amount)::text,
				count(DISTINCT qty % 7)::text, sum(DISTINCT qty % 7)::text,
				((array_agg(qty ORDER BY amount, qty) FILTER (WHERE amount IS NOT NULL))[1])::text,
				((array_agg(k ORDER BY amount DESC, k COLLATE "C" DESC) FILTER (WHERE k IS NOT NULL AND amount IS NOT NULL))[1])::text,
				((array_agg(amount ORDER BY ts, amount NULLS LAST))[1])::text,
				((array_agg(amount ORDER BY ts DESC, amount DESC NULLS FIRST))[1])::text,
				bool_and(amount > 0)::text, bool_or(amount > 1e15)::text
				FROM ev GROUP BY 1, 2`,
			key:   []types.Type{types.Varchar, types.Timestamp},
			cols:  []string{"k", "ws", "da", "dq", "sdq", "qmin", "kmax", "fa", "la", "allpos", "anyhuge"},
			types: []types.Type{types.Varchar, types.Timestamp, types.BigInt, types.BigInt, types.HugeInt, types.BigInt, types.Varchar, types.Double, types.Double, types.Boolean, types.Boolean},
		},
		{
			// The same aggregates under session merges.
			name: "aggs_session",
			sql: oracleSource + `SELECT k, SESSION_START(ts, INTERVAL '40' MILLISECOND) AS ss, count(DISTINCT qty % 5) AS dq,
				min_by(amount, qty) AS amin, max_by(amount, qty) AS amax, first(qty) AS fq, last(qty) AS lq, bool_or(amount < 0) AS neg
				FROM ev GROUP BY k, SESSION(ts, INTERVAL '40' MILLISECOND)`,
			pgsql: `WITH o AS (SELECT ev.*, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts) <= interval '40 milliseconds' THEN 0 ELSE 1 END AS brk FROM ev),
				s AS (SELECT o.*, sum(brk) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM o)
				SELECT k, min(ts), k, min(ts)::text, count(DISTINCT qty % 5)::text,
				((array_agg(amount ORDER BY qty, amount) FILTER (WHERE amount IS NOT NULL))[1])::text,
				((array_agg(amount ORDER BY qty DESC, amount DESC) FILTER (WHERE amount IS NOT NULL))[1])::text,
				((array_agg(qty ORDER BY ts, qty))[1])::text, ((array_agg(qty ORDER BY ts DESC, qty DESC))[1])::text,
				bool_or(amount < 0)::text
				FROM s GROUP BY k, sid`,
			key:   []types.Type{types.Varchar, types.Timestamp},
			cols:  []string{"k", "ss", "dq", "amin", "amax", "fq", "lq", "neg"},
			types: []types.Type{types.Varchar, types.Timestamp, types.BigInt, types.Double, types.Double, types.BigInt, types.BigInt, types.Boolean},
		},
		{
			name:  "continuous",
			sql:   oracleSource + `SELECT k, count(*) AS n, sum(amount) AS s, sum(price) AS p, min(ts) AS first_seen FROM ev GROUP BY k`,
			pgsql: `SELECT k, k, count(*)::text, (sum(exact)::float8)::text, sum(price)::text, min(ts)::text FROM ev GROUP BY k`,
			key:   []types.Type{types.Varchar},
			cols:  []string{"k", "n", "s", "p", "first_seen"},
			types: []types.Type{types.Varchar, types.BigInt, types.Double, dec, types.Timestamp},
		},
	}
}

// TestOracle compares every final (group, window) value with PostgreSQL's
// batch GROUP BY over the same events. Exact double sums are checked
// against PostgreSQL's exact numeric sum of each double's exact decimal
// expansion, rounded once.
// loadOracle makes a PostgreSQL session (through psql) that loads n
// generated events (seed) into a temporary table ev; amounts also go in as
// the exact decimal expansion of each double (column exact), so
// PostgreSQL's numeric sums are exact. The caller adds its queries and
// runs the script against the returned DSN.
func loadOracle(t *testing.T, seed uint64, n int) (*testenv.PGScript, string, []oracleEvent) {
	t.Helper()
	dsn := testenv.RequirePostgres(t)
	sc := &testenv.PGScript{}
	sc.Exec(`SET TIME ZONE 'UTC'; SET extra_float_digits = 1`)
	sc.Exec(`CREATE TEMP TABLE ev (k text, amount float8, exact numeric, qty bigint, price numeric(12,3), ts timestamp)`)
	evs := genOracleEvents(seed, n)
	rows := make([][]any, len(evs))
	for i, e := range evs {
		var k, amount, exact any
		if e.k != nil {
			k = *e.k
		}
		if e.amount != nil {
			amount = *e.amount
			exact = new(big.Rat).SetFloat64(*e.amount).FloatString(1100)
		}
		rows[i] = []any{k, amount, exact, e.qty, e.price, time.UnixMicro(e.tsUS).UTC()}
	}
	sc.CopyIn(t, "ev", []string{"k", "amount", "exact", "qty", "price", "ts"}, rows)
	return sc, dsn, evs
}

func TestOracle(t *testing.T) {
	sc, dsn, evs := loadOracle(t, 1, 20000)
	cases := oracleCases()
	queries := make([]int, len(cases))
	for i, c := range cases {
		queries[i] = sc.Query(c.pgsql)
	}
	results := sc.Run(t, dsn)
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := runFinal(t, c.sql, evs, 1000)
			want := map[string]string{}
			for _, vals := range results[queries[ci]] {
				if len(vals) != len(c.key)+len(c.cols) {
					t.Fatalf("an oracle row has %d cells, want %d", len(vals), len(c.key)+len(c.cols))
				}
				keyCells := make([]types.Value, len(c.key))
				for i, kt := range c.key {
					keyCells[i] = pgCell(t, vals[i], kt)
				}
				cells := make([]types.Value, len(c.cols))
				for i, vt := range c.types {
					cells[i] = pgCell(t, vals[len(c.key)+i], vt)
				}
				want[string(changelog.AppendKey(nil, keyCells))] = string(changelog.AppendValue(nil, c.cols, cells))
			}
			if len(got) != len(want) {
				t.Errorf("ubik has %d keys, the oracle %d", len(got), len(want))
			}
			bad := 0
			keys := make([]string, 0, len(want))
			for k := range want {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if got[k] != want[k] {
					bad++
					if bad <= 5 {
						t.Errorf("key %s:\n  ubik   %s\n  oracle %s", k, got[k], want[k])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d keys differ", bad, len(want))
			}
		})
	}
}

// pgCell converts one oracle result cell (PostgreSQL's text; nil is NULL)
// to a Value of type t.
func pgCell(t *testing.T, v *string, typ types.Type) types.Value {
	t.Helper()
	if v == nil {
		return types.NullOf(typ)
	}
	s := *v
	switch typ.Kind {
	case types.KindVarchar:
		return types.Str(s)
	case types.KindBoolean:
		return types.Bool(s == "true")
	case types.KindBigInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return types.Big(n)
	case types.KindHugeInt:
		b, _ := new(big.Int).SetString(s, 10)
		x, _ := types.Int128FromBig(b)
		return types.Huge(x)
	case types.KindDouble:
		switch s {
		case "NaN":
			return types.Float(math.NaN())
		case "Infinity":
			return types.Float(math.Inf(1))
		case "-Infinity":
			return types.Float(math.Inf(-1))
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return types.Float(f)
	case types.KindDecimal:
		x, err := types.ParseDecimal([]byte(s), typ.Width, typ.Scale)
		if err != nil {
			t.Fatal(err)
		}
		return types.Dec(x, typ.Scale)
	case types.KindTimestamp:
		us, err := types.ParseTimestamp([]byte(strings.TrimSpace(s)))
		if err != nil {
			t.Fatal(err)
		}
		return types.TS(us)
	}
	t.Fatalf("no oracle conversion for %s", typ)
	return types.Value{}
}

// TestMetamorphic: batch sizes 1, 7 and 1000 (an early emission after each
// batch) and a reordering within the watermark delay give byte-identical
// final records; every key's revisions go 1, 2, 3, ... and end with exactly
// one final record; a key's count never goes down, so no provisional count
// exceeds the final one.
func TestMetamorphic(t *testing.T) {
	evs := genOracleEvents(7, 6000)
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			ref, _ := runFinal(t, c.sql, evs, 1000)
			for _, b := range []int{1, 7} {
				got, all := runFinal(t, c.sql, evs, b)
				if !equalMaps(ref, got) {
					t.Fatalf("batch size %d changes the final records", b)
				}
				checkRevisions(t, all, c.name != "continuous")
			}
			// Swap neighbours whose times differ by less than 0.5 s: the
			// disorder stays inside the watermark delay.
			shuf := append([]oracleEvent(nil), evs...)
			r := rand.New(rand.NewPCG(99, 100))
			for i := 0; i+1 < len(shuf); i++ {
				if r.IntN(2) == 0 && abs64(shuf[i].tsUS-shuf[i+1].tsUS) < 500_000 {
					shuf[i], shuf[i+1] = shuf[i+1], shuf[i]
				}
			}
			got, _ := runFinal(t, c.sql, shuf, 13)
			if !equalMaps(ref, got) {
				t.Fatalf("reordering within the watermark delay changes the final records")
			}
		})
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkRevisions(t *testing.T, all []changelog.Record, windowed bool) {
	t.Helper()
	rev := map[string]uint64{}
	final := map[string]bool{}
	count := map[string]float64{}
	for _, r := range all {
		k := string(r.Key)
		var v map[string]any
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %s is not JSON: %v", r.Value, err)
		}
		if n, ok := v["n"].(float64); ok {
			if n < count[k] {
				t.Fatalf("key %s: count went down from %v to %v", k, count[k], n)
			}
			count[k] = n
		}
		if final[k] {
			t.Fatalf("key %s: a record after its final one", k)
		}
		if r.Meta.Revision != rev[k]+1 {
			t.Fatalf("key %s: revision %d after %d", k, r.Meta.Revision, rev[k])
		}
		rev[k] = r.Meta.Revision
		if r.Meta.Final {
			if !windowed {
				t.Fatalf("continuous view emitted a final record")
			}
			final[k] = true
		}
	}
	if windowed {
		for k := range rev {
			if !final[k] {
				t.Fatalf("key %s: no final record", k)
			}
		}
	}
}

// TestOracleStatistics compares the statistical aggregates with
// PostgreSQL. var_samp/var_pop/stddev_samp/stddev_pop: ubik's are the
// correctly rounded values of the doubles (exact sums); the oracle is
// PostgreSQL's numeric aggregate over each double's exact decimal
// expansion, and the two must agree to a relative 1e-12 (PostgreSQL's
// numeric division keeps at least 16 significant digits). The sketches are
// checked against their stated bounds: approx_count_distinct within 4
// standard errors (4 x 0.81%) of count(DISTINCT), exact up to 1000
// values within 1%; approx_quantile within 1% (relative) of the exact
// values at the neighbouring ranks of q*(n-1).
func TestOracleStatistics(t *testing.T) {
	sc, dsn, evs := loadOracle(t, 3, 20000)
	got, _ := runFinal(t, oracleSource+`SELECT k, var_samp(amount) AS vs, var_pop(amount) AS vp, stddev_samp(amount) AS ss,
		stddev_pop(amount) AS sp, approx_count_distinct(qty % 3000) AS acd, approx_count_distinct(amount) AS acda,
		approx_quantile(amount, 0.1) AS q1, approx_quantile(amount, 0.5) AS q5, approx_quantile(amount, 0.99) AS q9
		FROM ev GROUP BY k`, evs, 1000)
	q := sc.Query(`SELECT k, var_samp(exact)::text, var_pop(exact)::text, sqrt(var_samp(exact))::text, sqrt(var_pop(exact))::text,
		count(DISTINCT qty % 3000), count(DISTINCT amount), count(amount),
		(array_agg(amount ORDER BY amount) FILTER (WHERE amount IS NOT NULL))::float8[]
		FROM ev GROUP BY k`)
	n := 0
	worst := 0.0
	for _, row := range sc.Run(t, dsn)[q] {
		if len(row) != 9 {
			t.Fatalf("an oracle row has %d cells, want 9", len(row))
		}
		k, vs, vp, ss, sp := row[0], row[1], row[2], row[3], row[4]
		dq, da, cnt := pgInt(t, row[5]), pgInt(t, row[6]), pgInt(t, row[7])
		sorted := pgFloats(t, row[8])
		kc := types.NullOf(types.Varchar)
		if k != nil {
			kc = types.Str(*k)
		}
		val, ok := got[string(changelog.AppendKey(nil, []types.Value{kc}))]
		if !ok {
			t.Fatalf("key %v: no ubik record", kc)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(val), &v); err != nil {
			t.Fatal(err)
		}
		n++
		for _, c := range []struct {
			col  string
			want *string
		}{{"vs", vs}, {"vp", vp}, {"ss", ss}, {"sp", sp}} {
			if c.want == nil {
				if v[c.col] != nil {
					t.Errorf("key %v %s: ubik %v, oracle NULL", kc, c.col, v[c.col])
				}
				continue
			}
			w, _ := strconv.ParseFloat(*c.want, 64)
			g, _ := v[c.col].(float64)
			if w != 0 {
				worst = math.Max(worst, math.Abs(g-w)/math.Abs(w))
			}
			if math.Abs(g-w) > 1e-12*math.Abs(w) {
				t.Errorf("key %v %s: ubik %v, oracle %v (relative %g)", kc, c.col, g, w, math.Abs(g-w)/math.Abs(w))
			}
		}
		for _, c := range []struct {
			col  string
			want int64
		}{{"acd", dq}, {"acda", da}} {
			g := v[c.col].(float64)
			bound := 4 * 0.0081
			if c.want <= 1000 {
				bound = 0.01
			}
			if math.Abs(g-float64(c.want)) > bound*float64(c.want) {
				t.Errorf("key %v %s: ubik %v, count(DISTINCT) %d (bound %.2f%%)", kc, c.col, g, c.want, bound*100)
			}
		}
		for i, q := range []float64{0.1, 0.5, 0.99} {
			col := []string{"q1", "q5", "q9"}[i]
			if cnt == 0 {
				if v[col] != nil {
					t.Errorf("key %v %s: ubik %v over no values", kc, col, v[col])
				}
				continue
			}
			g := v[col].(float64)
			rank := q * float64(len(sorted)-1)
			lo, hi := sorted[int(math.Floor(rank))], sorted[int(math.Ceil(rank))]
			lob := math.Min(lo*0.99, lo*1.01)
			hib := math.Max(hi*0.99, hi*1.01)
			if g < lob || g > hib {
				t.Errorf("key %v approx_quantile(amount, %v) = %v, outside [%v, %v]", kc, q, g, lob, hib)
			}
		}
	}
	if n != len(got) || n < 5 {
		t.Fatalf("oracle has %d keys, ubik %d", n, len(got))
	}
	t.Logf("%d keys; largest relative difference of the variance aggregates from PostgreSQL's numeric: %g", n, worst)
}

// pgInt parses a non-NULL bigint cell.
func pgInt(t *testing.T, v *string) int64 {
	t.Helper()
	if v == nil {
		t.Fatal("oracle: a count is NULL")
	}
	n, err := strconv.ParseInt(*v, 10, 64)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return n
}

// pgFloats parses a float8[] cell without NULL elements ({1.5,-2,1e+100});
// NULL is an empty slice.
func pgFloats(t *testing.T, v *string) []float64 {
	t.Helper()
	if v == nil {
		return nil
	}
	body, ok := strings.CutPrefix(*v, "{")
	if body, ok = strings.CutSuffix(body, "}"); !ok {
		t.Fatalf("oracle: %q is not an array", *v)
	}
	if body == "" {
		return nil
	}
	parts := strings.Split(body, ",")
	out := make([]float64, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			t.Fatalf("oracle: array element %d: %v", i, err)
		}
		out[i] = f
	}
	return out
}
