package chlander

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func open(t testing.TB, mode land.Mode, table string, appendOnly bool) *Lander {
	t.Helper()
	l, err := New(context.Background(), Options{URL: testenv.RequireClickHouse(t), Mode: mode, Table: table, AppendOnly: appendOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Exec(context.Background(), "DROP TABLE IF EXISTS "+l.View())
		l.Exec(context.Background(), "DROP TABLE IF EXISTS "+l.Table())
	})
	return l
}

func TestConformance(t *testing.T) {
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			return open(t, mode, ns+"_"+mode.String(), false)
		},
		ExactValue: true,
		// An insert costs ClickHouse a part: land bigger batches.
		BatchScale: 20,
	})
}

// TestAppendOnlyConformance: with no read before the append every copy
// lands as a row, and the read-time collapse alone must be exact.
func TestAppendOnlyConformance(t *testing.T) {
	for _, mode := range []land.Mode{land.Continuous, land.Latest, land.History} {
		t.Run(mode.String(), func(t *testing.T) {
			seed := landtest.Seed(t)
			r := rand.New(rand.NewPCG(seed, 3))
			gen := landtest.Gen{Mode: mode, Queries: []string{"qa", "qb"}, Groups: 2, Windows: 3, Revisions: 4}
			var all []changelog.Record
			for trial := range 400 {
				all = append(all, gen.Changelog(r, trial)...)
			}
			l := open(t, mode, testenv.Name(t, "ch"), true)
			for _, b := range landtest.Batches(r, landtest.Deliver(r, all, 3), 200) {
				if _, err := l.Land(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			oracle := landtest.NewMemory(mode, "")
			oracle.Land(context.Background(), all)
			landtest.Check(t, landtest.Harness{ExactValue: true}, l, oracle)
		})
	}
}

func count(t *testing.T, l *Lander, sql string) int {
	t.Helper()
	out, err := l.Exec(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(string(out), &n); err != nil {
		t.Fatalf("%s: %q", sql, out)
	}
	return n
}

// TestUnmergedThenOptimized: with merges stopped and every record in its
// own insert (its own part), the read-time collapse equals the oracle; after
// OPTIMIZE FINAL the answer is the same; and a filter on a column whose
// value changed between revisions gives the post-collapse answer.
func TestUnmergedThenOptimized(t *testing.T) {
	ctx := context.Background()
	mode := land.Latest
	l := open(t, mode, testenv.Name(t, "ch"), true)
	tableName := strings.Trim(strings.SplitN(l.Table(), ".", 2)[1], "`")
	if _, err := l.Exec(ctx, "SYSTEM STOP MERGES "+l.Table()); err != nil {
		t.Fatal(err)
	}
	seed := landtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 5))
	gen := landtest.Gen{Mode: mode, Groups: 2, Windows: 2, Revisions: 3}
	var all []changelog.Record
	for trial := range 30 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	delivered := landtest.Deliver(r, all, 2)
	for _, rec := range delivered {
		if _, err := l.Land(ctx, []changelog.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	oracle := landtest.NewMemory(mode, "")
	oracle.Land(ctx, all)
	h := landtest.Harness{ExactValue: true}

	parts := count(t, l, "SELECT count() FROM system.parts WHERE active AND database = currentDatabase() AND table = '"+tableName+"'")
	if parts < len(delivered)/2 {
		t.Fatalf("%d active parts for %d inserts: merges ran", parts, len(delivered))
	}
	rows := count(t, l, "SELECT count() FROM "+l.Table())
	if rows != len(delivered) {
		t.Fatalf("%d rows for %d inserts", rows, len(delivered))
	}
	landtest.Check(t, h, l, oracle)

	// A filter on final (it changes from 0 to 1 between revisions): after
	// the collapse it counts only identities whose current row is final.
	wantFinal := 0
	for _, ref := range oracle.Refs() {
		if s, _ := oracle.Get(ctx, ref); s.Final {
			wantFinal++
		}
	}
	after := "SELECT count() FROM " + l.View() + " WHERE final = 1"
	if got := count(t, l, after); got != wantFinal {
		t.Fatalf("collapse-then-filter counted %d final identities, want %d", got, wantFinal)
	}
	// And the wrong way round (filter, then collapse) sees stale rows
	// whenever an identity moved on to a newer, not final, window: this
	// is what the read path must never do.
	wrong := "SELECT count() FROM (" + l.CurrentSQL("final = 1") + ")"
	t.Logf("filter-then-collapse would count %d, collapse-then-filter %d", count(t, l, wrong), wantFinal)

	if _, err := l.Exec(ctx, "SYSTEM START MERGES "+l.Table()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Exec(ctx, "OPTIMIZE TABLE "+l.Table()+" FINAL"); err != nil {
		t.Fatal(err)
	}
	if got := count(t, l, "SELECT count() FROM system.parts WHERE active AND database = currentDatabase() AND table = '"+tableName+"'"); got != 1 {
		t.Fatalf("%d active parts after OPTIMIZE FINAL, want 1", got)
	}
	landtest.Check(t, h, l, oracle)
	if got := count(t, l, after); got != wantFinal {
		t.Fatalf("after OPTIMIZE: %d final identities, want %d", got, wantFinal)
	}
}

func TestLiteralEscaping(t *testing.T) {
	ctx := context.Background()
	l := open(t, land.Continuous, testenv.Name(t, "ch"), false)
	groups := []string{`it's`, `back\slash`, "tab\tnew\nline", `"quoted"`, `ünï`}
	for i, g := range groups {
		rec := changelog.Record{
			Key: mustJSON(t, g), Value: []byte(fmt.Sprintf(`{"n":%d,"s":%s}`, i, mustJSON(t, g))),
			Meta: changelog.Meta{Query: "esc", Revision: 1},
		}
		if _, err := l.Land(ctx, []changelog.Record{rec}); err != nil {
			t.Fatal(err)
		}
		st, err := l.Get(ctx, land.Ref{Query: "esc", Group: rec.Key})
		if err != nil || string(st.Value) != string(rec.Value) || string(st.Key) != string(rec.Key) {
			t.Fatalf("%q: got %s %s, %v", g, st.Key, st.Value, err)
		}
	}
}

func mustJSON(t *testing.T, s string) []byte {
	// changelog's string encoder: the bytes the engine writes.
	b := append([]byte{'['}, changelog.AppendString(nil, s)...)
	return append(b, ']')
}
