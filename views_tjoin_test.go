package ubik_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// A query over a view whose body is a temporal join: the view prices each
// usage event by the version valid at its time and publishes per
// customer and minute once (EMIT FINAL); the reader sums the minutes into
// 2-minute windows. The reader's finals must not depend on how the two
// inputs interleave, on shuffles within the watermark delays, on output
// bounds or on a checkpoint and restore at any point, and must equal
// PostgreSQL's batch answer over the same events and versions. The
// queries are view_over_temporal_join.txt's: the first an inner join, the
// second a LEFT JOIN.

func TestViewOverTemporalJoin(t *testing.T) {
	t.Parallel()
	evs, vs := genJoin(21, 5000, 3600)
	dsn := testenv.RequirePostgres(t)
	sc := &testenv.PGScript{}
	sc.Exec(`SET TIME ZONE 'UTC'`)
	sc.Exec(`CREATE TEMP TABLE usage (customer text, plan text, qty numeric(10,2), ts timestamp)`)
	sc.Exec(`CREATE TEMP TABLE prices (plan text, price numeric(12,6), valid_from timestamp)`)
	rows := make([][]any, len(evs))
	for i, e := range evs {
		var plan any
		if e.plan != nil {
			plan = *e.plan
		}
		rows[i] = []any{e.customer, plan, e.qty, time.UnixMicro(e.ts).UTC()}
	}
	sc.CopyIn(t, "usage", []string{"customer", "plan", "qty", "ts"}, rows)
	rows = make([][]any, len(vs))
	for i, v := range vs {
		rows[i] = []any{v.plan, v.price, time.UnixMicro(v.ts).UTC()}
	}
	sc.CopyIn(t, "prices", []string{"plan", "price", "valid_from"}, rows)
	// A LEFT JOIN's unmatched events price to NULL: sum skips them, count
	// counts them, as ubik's aggregates do.
	pg := `WITH mc AS (
  SELECT u.customer, date_trunc('minute', u.ts) AS m, sum(u.qty * p.price) AS charge, count(*) AS events
  FROM usage u %s JOIN LATERAL (SELECT * FROM prices v WHERE v.plan = u.plan AND v.valid_from <= u.ts
    ORDER BY v.valid_from DESC LIMIT 1) p ON true
  GROUP BY u.customer, date_trunc('minute', u.ts)),
tw AS (SELECT customer, timestamp 'epoch' + floor(extract(epoch FROM m) / 120) * interval '120 seconds' AS w, charge, events FROM mc)
SELECT customer, w, customer, w, sum(charge), sum(events), max(charge), count(*) FROM tw GROUP BY customer, w`
	inner := sc.Query(fmt.Sprintf(pg, "INNER"))
	left := sc.Query(fmt.Sprintf(pg, "LEFT"))
	res := sc.Run(t, dsn)
	dec := types.Decimal(38, 8)
	keyT := []types.Type{types.Varchar, types.Timestamp}
	valT := []types.Type{types.Varchar, types.Timestamp, dec, types.HugeInt, dec, types.BigInt}
	cols := []string{"customer", "w", "charge", "events", "top", "minutes"}
	for _, c := range []struct {
		kind string
		idx  int
		n    int // the query of view_over_temporal_join.txt
	}{{"", inner, 1}, {"LEFT", left, 2}} {
		t.Run("join="+c.kind, func(t *testing.T) {
			sql := scriptSQL(t, "view_over_temporal_join", c.n)
			var want []string
			for _, row := range res[c.idx] {
				key := make([]types.Value, len(keyT))
				for i, kt := range keyT {
					key[i] = pgCell(t, row[i], kt)
				}
				val := make([]types.Value, len(valT))
				for i, vt := range valT {
					val[i] = pgCell(t, row[len(keyT)+i], vt)
				}
				want = append(want, string(changelog.AppendKey(nil, key))+"\t"+string(changelog.AppendValue(nil, cols, val)))
			}
			sort.Strings(want)
			if len(want) < 150 {
				t.Fatalf("the oracle has only %d rows", len(want))
			}
			// The table first, then the events, in time order.
			var ref []joinInput
			for _, v := range vs {
				ref = append(ref, joinInput{table: true, raw: v.json()})
			}
			for _, e := range evs {
				ref = append(ref, joinInput{raw: e.json()})
			}
			if d := diffLines(want, joinRunNamed(t, sql, "two_minute", ref, 0, -1, -1)); d != "" {
				t.Fatalf("ubik differs from PostgreSQL:\n%s", d)
			}
			r := rand.New(rand.NewPCG(31, 37))
			for trial := 0; trial < 12; trial++ {
				se := shuffleWithin(r, evs, func(e joinEvent) int64 { return e.ts }, 5_000_000)
				sv := shuffleWithin(r, vs, func(v joinVersion) int64 { return v.ts }, 3_000_000)
				in := interleave(r, se, sv)
				bound := []int{0, 1, 7}[trial%3]
				ckpt, full := -1, -1
				if trial%2 == 1 {
					ckpt = r.IntN(len(in))
				}
				if trial%4 == 3 {
					full = r.IntN(ckpt + 1)
				}
				if d := diffLines(want, joinRunNamed(t, sql, "two_minute", in, bound, full, ckpt)); d != "" {
					t.Fatalf("trial %d (bound %d, full checkpoint before input %d, restore before %d): finals differ from PostgreSQL's:\n%s", trial, bound, full, ckpt, d)
				}
			}
		})
	}
}
