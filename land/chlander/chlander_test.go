package chlander

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func open(t testing.TB, mode land.Mode, table string, appendOnly bool) *Lander {
	t.Helper()
	return openWith(t, Options{Mode: mode, Table: table, AppendOnly: appendOnly})
}

// openWith opens a lander on the test server with o and drops its table
// and view at the end of the test.
func openWith(t testing.TB, o Options) *Lander {
	t.Helper()
	o.URL = testenv.RequireClickHouse(t)
	l, err := New(context.Background(), o)
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

// TestConformanceReadsOnly runs the suite with no memory of stored
// versions: every batch takes the guard read.
func TestConformanceReadsOnly(t *testing.T) {
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			return openWith(t, Options{Mode: mode, Table: ns + "_" + mode.String(), KnownVersions: -1})
		},
		ExactValue: true,
		BatchScale: 20,
	})
}

// countingTransport counts the requests a lander sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestKnownVersions: what the lander appended or read it does not read
// again; a record at or below a known version is counted without a
// request; past the bound the memory is dropped and the reads come back.
func TestKnownVersions(t *testing.T) {
	ctx := context.Background()
	var tr countingTransport
	table := testenv.Name(t, "ch")
	l := openWith(t, Options{Mode: land.Latest, Table: table, KnownVersions: 3, HTTPClient: &http.Client{Transport: &tr}})
	recs := func(rev uint64, groups ...string) []changelog.Record {
		var out []changelog.Record
		for _, g := range groups {
			out = append(out, landtest.Record(land.Latest, "q", g, landtest.Base(), rev, false))
		}
		return out
	}
	step := func(batch []changelog.Record, want land.Result, wantRequests int64) {
		t.Helper()
		before := tr.n.Load()
		got, err := l.Land(ctx, batch)
		if err != nil || got != want {
			t.Fatalf("Land: %+v, %v; want %+v", got, err, want)
		}
		if n := tr.n.Load() - before; n != wantRequests {
			t.Fatalf("%d requests, want %d", n, wantRequests)
		}
	}
	step(recs(2, "a", "b"), land.Result{Landed: 2}, 2)                     // read + append
	step(recs(2, "a", "b"), land.Result{Duplicate: 2}, 0)                  // known: no request
	step(recs(1, "a", "b"), land.Result{Superseded: 2}, 0)                 // known: no request
	step(recs(3, "a", "b"), land.Result{Landed: 2}, 1)                     // append only
	step(recs(1, "c", "d"), land.Result{Landed: 2}, 2)                     // unknown: read + append; 4 > 3 known
	step(recs(3, "a"), land.Result{Duplicate: 1}, 1)                       // memory dropped: read again
	step(append(recs(2, "c"), recs(4, "b")...), land.Result{Landed: 2}, 2) // c known again? no: dropped, read + append
	// A second lander knows nothing and reads what the first wrote.
	l2, err := New(ctx, Options{URL: testenv.RequireClickHouse(t), Mode: land.Latest, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l2.Land(ctx, recs(3, "a", "b", "c", "d")); err != nil || got != (land.Result{Duplicate: 1, Superseded: 1, Landed: 2}) {
		t.Fatalf("second lander: %+v, %v", got, err)
	}
}

// TestDefaultClientDropsIdleConnections: a lander without a client of
// its own uses chhttp's, which does not send a request on a connection
// idle for longer than ClickHouse keeps one (keep_alive_timeout, 3 s by
// default): the server may be closing it at that moment.
func TestDefaultClientDropsIdleConnections(t *testing.T) {
	l := open(t, land.Latest, testenv.Name(t, "ch"), false)
	reused := func() bool {
		t.Helper()
		var r bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { r = i.Reused }})
		if _, err := l.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !reused() {
		t.Fatal("a request right after the table's creation opened a connection: none was kept")
	}
	time.Sleep(3 * time.Second)
	if reused() {
		t.Fatal("a request after 3 s went out on a connection idle all that time")
	}
}
