package ubik_test

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// The window join of two EMIT FINAL views (the Nexmark q8 shape): an
// interval join with zero bounds on their window starts, run as one
// graph with both views.

const viewJoinOracleSQL = oracleSource + `
CREATE VIEW cheap AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n, sum(qty) AS q
  FROM ev WHERE price < 500 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
CREATE VIEW dear AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, sum(price) AS total
  FROM ev WHERE price >= 500 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
CREATE VIEW both_sides AS SELECT c.k, TUMBLE_START(c.ws, INTERVAL '10' SECOND) AS w, sum(c.n) AS n, sum(c.q) AS q,
  sum(d.total) AS total, count(*) AS windows
  FROM cheap c JOIN dear d ON c.k = d.k AND c.ws = d.ws
  GROUP BY c.k, TUMBLE(c.ws, INTERVAL '10' SECOND);`

// TestViewWindowJoinOracle: the finals of the join of two views equal
// PostgreSQL's join of the same two GROUP BYs in batch.
func TestViewWindowJoinOracle(t *testing.T) {
	t.Parallel()
	sc, dsn, evs := loadOracle(t, 23, 20000)
	view := func(where, aggs string) string {
		return `SELECT k, date_bin('2 seconds', ts, '1970-01-01') AS ws, ` + aggs + ` FROM ev WHERE ` + where + ` GROUP BY 1, 2`
	}
	qj := sc.Query(`SELECT c.k, date_bin('10 seconds', c.ws, '1970-01-01') AS w, c.k, date_bin('10 seconds', c.ws, '1970-01-01'),
	  sum(c.n), sum(c.q), sum(d.total), count(*)
	  FROM (` + view("price < 500", "count(*) AS n, sum(qty) AS q") + `) c JOIN (` + view("price >= 500", "sum(price) AS total") + `) d
	  ON c.k = d.k AND c.ws = d.ws GROUP BY 1, 2`)
	res := sc.Run(t, dsn)
	eng, _ := ubik.Open(ubik.DefaultOptions())
	got := map[string]string{}
	q, err := eng.Start(viewJoinOracleSQL, ubik.QueryOptions{Name: "both_sides", OnRecord: func(r changelog.Record) error {
		if !r.Meta.Final {
			t.Errorf("a record that is not final: %s", r.Value)
		}
		if _, dup := got[string(r.Key)]; dup {
			t.Errorf("key %s published twice", r.Key)
		}
		got[string(r.Key)] = string(r.Value)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := q.Push(evs[i].json()); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.Late != 0 || st.EvalErrors != 0 || st.Interval.LateLeft != 0 || st.Interval.LateRight != 0 || st.Interval.Matches == 0 {
		t.Fatalf("stats %+v", st)
	}
	// The join holds a view's row only until the other view's watermark
	// passes its window start.
	if st.Interval.LeftPeak > 40 || st.Interval.RightPeak > 40 {
		t.Fatalf("the join held %d and %d rows at most", st.Interval.LeftPeak, st.Interval.RightPeak)
	}
	want := map[string]string{}
	kt := []types.Type{types.Varchar, types.Timestamp}
	vt := []types.Type{types.Varchar, types.Timestamp, types.HugeInt, types.HugeInt, types.Decimal(38, 3), types.BigInt}
	for _, row := range res[qj] {
		kc := make([]types.Value, len(kt))
		for i := range kt {
			kc[i] = pgCell(t, row[i], kt[i])
		}
		vc := make([]types.Value, len(vt))
		for i := range vt {
			vc[i] = pgCell(t, row[len(kt)+i], vt[i])
		}
		want[string(changelog.AppendKey(nil, kc))] = string(changelog.AppendValue(nil, []string{"k", "w", "n", "q", "total", "windows"}, vc))
	}
	if len(want) < 50 {
		t.Fatalf("the oracle has only %d rows", len(want))
	}
	if len(got) != len(want) {
		t.Errorf("ubik has %d keys, the oracle %d", len(got), len(want))
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		if got[k] != want[k] {
			if bad++; bad <= 5 {
				t.Errorf("key %s:\n  ubik   %s\n  oracle %s", k, got[k], want[k])
			}
		}
	}
}

// TestViewWindowJoinMetamorphic holds the full changelogs of the two
// views and their join to one reference run, byte for byte, under output
// bounds, partial pulls, full and incremental checkpoints and restarts.
// The join is view_join_edges.txt's, over viewEdgeSQL's source: the views'
// string groups and their double groups (NaN, ±Inf and NULL are one group
// of a view, whose row has a NULL cell: it never matches).
func TestViewWindowJoinMetamorphic(t *testing.T) {
	t.Parallel()
	viewJoinEdgeSQL := scriptSQL(t, "view_join_edges", 1)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	evs := viewEdgeEvents(seed, 3000)
	ref := runViews(t, viewOpts{primary: "j", script: viewJoinEdgeSQL, eventsIn: evs})
	if len(ref.logs["j"]) < 20 || len(ref.logs["pos"]) < 20 || len(ref.logs["neg"]) < 20 {
		t.Fatalf("too few records: j %d, pos %d, neg %d", len(ref.logs["j"]), len(ref.logs["pos"]), len(ref.logs["neg"]))
	}
	if ref.own.Late != 0 || ref.stats.Late != int64(ref.late) || ref.stats.Interval.LateLeft+ref.stats.Interval.LateRight != 0 {
		t.Fatalf("rows of a view were late at the join: %+v", ref.stats)
	}
	for _, l := range ref.logs["j"] {
		if strings.Contains(l, `"d": null`) {
			t.Fatalf("a NULL key matched: %s", l)
		}
	}
	r := rand.New(rand.NewPCG(seed, 5))
	for trial := 0; trial < 12; trial++ {
		o := viewOpts{primary: "j", script: viewJoinEdgeSQL, eventsIn: evs, full: trial%2 == 0,
			pull: trial%3 != 0, maxPend: 1 + r.IntN(5)}
		for k := 0; k < 1+r.IntN(6); k++ {
			c := r.IntN(len(evs))
			o.ckptAt = append(o.ckptAt, c)
			if r.IntN(2) == 0 {
				o.crashAt = append(o.crashAt, c+r.IntN(400))
			}
		}
		got := runViews(t, o)
		for _, name := range ref.queries() {
			if d := firstDiff(ref.logs[name], got.logs[name]); d != "" {
				t.Fatalf("seed %d trial %d (checkpoints %v, crashes %v) query %s: %s", seed, trial, o.ckptAt, o.crashAt, name, d)
			}
		}
	}
}
