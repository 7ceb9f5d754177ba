package ubik_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// A query over a view whose body is a join of two views: q8 (the window
// join of two EMIT FINAL views over two sources, views_join2_test.go)
// read by a query that groups its final rows again, by the name in
// 20-second windows: view_over_join.txt's query q8m. The join's finals
// are an append-only stream of rows, so the reader needs no retractions.

// keptEvents drops the events late at their view (their window ended
// behind the source's watermark, max time - 2 s, at arrival): what every
// view sees, in any order of the two sources.
func keptEvents(evs []tsEvent) []tsEvent {
	const size, delay = 10_000_000, 2_000_000
	var out []tsEvent
	wm := int64(-1 << 62)
	for _, e := range evs {
		if start := e.ts - ((e.ts%size)+size)%size; start+size <= wm {
			continue
		}
		out = append(out, e)
		wm = max(wm, e.ts-delay)
	}
	return out
}

// TestViewJoinOverOracle: every view's finals and the query's equal
// PostgreSQL's batch computation over the events the views keep (the
// views, their join and the regrouping as plain GROUP BYs and a JOIN),
// key bytes and value bytes, under several interleavings of the two
// sources; and the query's finals are byte-identical under output bounds,
// checkpoints and restarts (runViews).
func TestViewJoinOverOracle(t *testing.T) {
	t.Parallel()
	dsn := testenv.RequirePostgres(t)
	prog, err := plan.Compile(scriptSQL(t, "view_over_join", 1), plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sc testenv.PGScript
	sc.Exec(`SET TIME ZONE 'UTC'`)
	type seedRun struct {
		ps, au []tsEvent
		q      map[string]int // query name: its oracle query
	}
	var runs []seedRun
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 31))
		ps, au := genTwoSources(rng, 3000)
		sc.Exec(`DROP TABLE IF EXISTS ops; DROP TABLE IF EXISTS oau;
			CREATE TEMP TABLE ops (id bigint, name text, ts timestamp); CREATE TEMP TABLE oau (seller bigint, ts timestamp)`)
		var rows [][]any
		for _, e := range keptEvents(ps) {
			var id, name any
			if e.id != nil {
				id = *e.id
			}
			if e.name != nil {
				name = *e.name
			}
			rows = append(rows, []any{id, name, time.UnixMicro(e.ts).UTC()})
		}
		sc.CopyIn(t, "ops", []string{"id", "name", "ts"}, rows)
		rows = nil
		for _, e := range keptEvents(au) {
			var id any
			if e.id != nil {
				id = *e.id
			}
			rows = append(rows, []any{id, time.UnixMicro(e.ts).UTC()})
		}
		sc.CopyIn(t, "oau", []string{"seller", "ts"}, rows)
		const np = `SELECT id, name, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws, count(*) AS v FROM ops GROUP BY 1, 2, 3`
		const ns = `SELECT seller, date_bin('10 seconds', ts, timestamp '1970-01-01') AS ws, count(*) AS a FROM oau GROUP BY 1, 2`
		const q8 = `SELECT p.id, p.name, p.ws, sum(p.v) AS v, sum(s.a) AS a FROM (` + np + `) p JOIN (` + ns + `) s ON p.id = s.seller AND p.ws = s.ws GROUP BY 1, 2, 3`
		r := seedRun{ps: ps, au: au, q: map[string]int{}}
		r.q["np"] = sc.Query(np)
		r.q["ns"] = sc.Query(ns)
		r.q["q8"] = sc.Query(q8)
		r.q["q8m"] = sc.Query(`SELECT name, date_bin('20 seconds', ws, timestamp '1970-01-01'), count(*), sum(v), sum(a), min(id) FROM (` + q8 + `) j GROUP BY 1, 2`)
		runs = append(runs, r)
	}
	res := sc.Run(t, dsn)
	for seed, r := range runs {
		want := map[string]map[string]string{}
		for _, q := range prog.Queries {
			nkeys := len(q.Keys)
			typs := make([]types.Type, len(q.Select))
			names := make([]string, len(q.Select))
			for i, c := range q.Select {
				typs[i], names[i] = c.Expr.Type(), c.Name
			}
			m := map[string]string{}
			for _, vals := range res[r.q[q.Name]] {
				cells := make([]types.Value, len(typs))
				for i, typ := range typs {
					cells[i] = pgCell(t, vals[i], typ)
				}
				m[string(changelog.AppendKey(nil, cells[:nkeys]))] = string(changelog.AppendValue(nil, names, cells))
			}
			want[q.Name] = m
		}
		if len(want["q8"]) < 50 || len(want["q8m"]) < 5 {
			t.Fatalf("seed %d: %d q8 rows, %d q8m rows: the test would prove little", seed, len(want["q8"]), len(want["q8m"]))
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 32))
		for _, pick := range []float64{0, 1, 0.5} {
			got := runOverJoin(t, r.ps, r.au, rng, pick)
			for name, w := range want {
				bad := 0
				if len(got[name]) != len(w) {
					t.Errorf("seed %d pick %v: %s has %d finals, PostgreSQL %d", seed, pick, name, len(got[name]), len(w))
				}
				for k, v := range w {
					if got[name][k] != v && bad < 3 {
						t.Errorf("seed %d pick %v: %s key %s:\n got %s\nwant %s", seed, pick, name, k, got[name][k], v)
						bad++
					}
				}
			}
		}
		t.Logf("seed %d: %d np, %d ns, %d q8, %d q8m finals agree", seed, len(want["np"]), len(want["ns"]), len(want["q8"]), len(want["q8m"]))
	}
}

// runOverJoin pushes both sources interleaved at random (pick: the chance
// of taking a person next) and returns every query's finals by key.
func runOverJoin(t *testing.T, ps, au []tsEvent, rng *rand.Rand, pick float64) map[string]map[string]string {
	t.Helper()
	eng, _ := ubik.Open(ubik.DefaultOptions())
	got := map[string]map[string]string{}
	rec := func(r changelog.Record) error {
		if !r.Meta.Final {
			t.Errorf("%s: a record that is not final: %s", r.Meta.Query, r.Value)
		}
		m := got[r.Meta.Query]
		if m == nil {
			m = map[string]string{}
			got[r.Meta.Query] = m
		}
		if _, dup := m[string(r.Key)]; dup {
			t.Errorf("%s: key %s published twice", r.Meta.Query, r.Key)
		}
		m[string(r.Key)] = string(r.Value)
		return nil
	}
	q, err := eng.Start(scriptSQL(t, "view_over_join", 1), ubik.QueryOptions{Name: "q8m", OnRecord: rec, OnViewRecord: rec})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, 0; i < len(ps) || j < len(au); {
		if j == len(au) || (i < len(ps) && rng.Float64() < pick) {
			if err := q.PushInput("ps", ps[i].json()); err != nil {
				t.Fatal(err)
			}
			i++
			continue
		}
		if err := q.PushInput("au", au[j].json()); err != nil {
			t.Fatal(err)
		}
		j++
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"q8", "q8m"} {
		if st, _ := q.ViewStats(v); st.Late != 0 {
			t.Fatalf("%d rows late at %s: a view's final rows are never late at its reader", st.Late, v)
		}
	}
	return got
}

// TestViewJoinOverMetamorphic holds the full changelogs of every view and
// the query over the join to one reference run, byte for byte, under
// output bounds, partial pulls, full and incremental checkpoints and
// restarts at random events.
func TestViewJoinOverMetamorphic(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 33))
	ps, au := genTwoSources(rng, 1500)
	var evs [][]byte
	var inputs []string
	for i, j := 0, 0; i < len(ps) || j < len(au); {
		if j == len(au) || (i < len(ps) && rng.IntN(2) == 0) {
			evs, inputs = append(evs, ps[i].json()), append(inputs, "ps")
			i++
		} else {
			evs, inputs = append(evs, au[j].json()), append(inputs, "au")
			j++
		}
	}
	overJoinSQL := scriptSQL(t, "view_over_join", 1)
	ref := runViews(t, viewOpts{primary: "q8m", script: overJoinSQL, eventsIn: evs, inputOf: inputs})
	if len(ref.logs["q8m"]) < 5 || len(ref.logs["q8"]) < 20 || ref.late == 0 {
		t.Fatalf("too little: q8m %d, q8 %d records, %d late", len(ref.logs["q8m"]), len(ref.logs["q8"]), ref.late)
	}
	if !slices.Contains(ref.queries(), "q8m") {
		t.Fatalf("the reference has no records of q8m: %v", ref.queries())
	}
	for trial := 0; trial < 12; trial++ {
		o := viewOpts{primary: "q8m", script: overJoinSQL, eventsIn: evs, inputOf: inputs, full: trial%2 == 0,
			pull: trial%3 != 0, maxPend: 1 + rng.IntN(5)}
		for k := 0; k < 1+rng.IntN(6); k++ {
			c := rng.IntN(len(evs))
			o.ckptAt = append(o.ckptAt, c)
			if rng.IntN(2) == 0 {
				o.crashAt = append(o.crashAt, c+rng.IntN(400))
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
