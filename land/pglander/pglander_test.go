package pglander

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"context"
	"github.com/ubiksql/ubik/changelog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func testPool(t testing.TB) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), testenv.RequirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformance(t *testing.T) {
	p := testPool(t)
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			table := ns + "_" + mode.String()
			l, err := New(context.Background(), Options{Pool: p, Mode: mode, Table: table})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+l.Table()) })
			return l
		},
		ExactValue: false, // jsonb
		RefusesNUL: true,
		Refusals: []landtest.Refusal{
			{Name: "revision 2^63", Make: func(g changelog.Record) changelog.Record {
				r := g.Clone()
				r.Meta.Revision = 1 << 63
				return r
			}, Reason: "2^63-1"},
			{Name: "incompressible group of 3000 bytes", Make: func(g changelog.Record) changelog.Record {
				return landtest.Record(land.Latest, g.Meta.Query, incompressible(3000), landtest.Base(), 1, false)
			}, Reason: "2704"},
		},
	})
}

// incompressible is n bytes of random text that pglz does not shrink.
func incompressible(n int) string {
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = abc[r.IntN(len(abc))]
	}
	return string(b)
}

func TestBadInput(t *testing.T) {
	p := testPool(t)
	ctx := context.Background()
	for _, bad := range []string{"a;b", "x.y.z", `"q"`, ""} {
		if bad == "" {
			continue
		}
		if _, err := New(ctx, Options{Pool: p, Mode: land.Latest, Table: bad}); err == nil {
			t.Errorf("table %q accepted", bad)
		}
	}
	table := testenv.Name(t, "pg")
	l, err := New(ctx, Options{Pool: p, Mode: land.Continuous, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
	r := landtest.Record(land.Continuous, "q", "g", landtest.Base(), 1, false)
	r.Value = []byte("{not json")
	if _, err := l.Land(ctx, landRecs(r)); !land.Permanent(err) {
		t.Fatalf("a value that is not JSON: %v, want a permanent error", err)
	}
	// The bound: 2^63-1 lands, 2^63 is refused naming the limit, and the
	// refusal names the record's position in the batch (not in the
	// deduplicated, sorted statement).
	r = landtest.Record(land.Continuous, "q", "z", landtest.Base(), math.MaxInt64, false)
	if res, err := l.Land(ctx, landRecs(r)); err != nil || res.Landed != 1 {
		t.Fatalf("revision 2^63-1: %+v, %v; want it landed", res, err)
	}
	a := landtest.Record(land.Continuous, "q", "a", landtest.Base(), 1, false)
	r = landtest.Record(land.Continuous, "q", "b", landtest.Base(), 1<<63, false)
	var re *land.RecordError
	if _, err := l.Land(ctx, landRecs(a, a, r)); !errors.As(err, &re) || re.Index != 2 || !errors.Is(err, land.ErrRefused) || !strings.Contains(err.Error(), "2^63-1") {
		t.Fatalf("revision 2^63: %v, want a refusal of record 2 naming 2^63-1", err)
	}
	// \u0000 is refused, an escaped backslash before u0000 is not one.
	for v, refused := range map[string]bool{`{"k":"x\u0000y"}`: true, `{"k":"x\\u0000y"}`: false, `{"k":"\\\u0000"}`: true} {
		r := landtest.Record(land.Continuous, "q", "nul", landtest.Base(), 1, false)
		r.Value = []byte(v)
		_, err := l.Land(ctx, landRecs(r))
		if refused != errors.Is(err, land.ErrRefused) || !refused && err != nil {
			t.Errorf("value %s: Land = %v, want refused %v", v, err, refused)
		}
	}
}

// TestGroupColumns: typed columns generated from the group's cells can be
// filtered and follow each landing.
func TestGroupColumns(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	table := testenv.Name(t, "pg")
	l, err := New(ctx, Options{Pool: p, Mode: land.Continuous, Table: table,
		GroupColumns: []GroupColumn{{Name: "merchant"}, {Name: "shard", Type: "bigint"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
	rec := func(m string, shard, rev int) changelog.Record {
		return changelog.Record{Key: []byte(fmt.Sprintf(`[%q, %d]`, m, shard)), Value: []byte(fmt.Sprintf(`{"rev":%d}`, rev)),
			Meta: changelog.Meta{Query: "q", Revision: uint64(rev)}}
	}
	if _, err := l.Land(ctx, landRecs(rec("acme", 3, 1), rec("zeta", 4, 1), rec("acme", 3, 2))); err != nil {
		t.Fatal(err)
	}
	var rev int
	if err := p.QueryRow(ctx, "SELECT revision FROM "+l.Table()+" WHERE merchant = 'acme' AND shard = 3").Scan(&rev); err != nil || rev != 2 {
		t.Fatalf("typed lookup: revision %d, %v", rev, err)
	}
	for _, bad := range []GroupColumn{{Name: "value"}, {Name: "x;y"}, {Name: "ts", Type: "timestamp"}} {
		if _, err := New(ctx, Options{Pool: p, Mode: land.Continuous, Table: table, GroupColumns: []GroupColumn{bad}}); err == nil {
			t.Errorf("group column %+v accepted", bad)
		}
	}
}

// TestFillFactor: a table the lander creates gets the fillfactor asked
// for, DefaultFillFactor when none is; an existing table keeps its own; a
// fillfactor PostgreSQL refuses is refused before any DDL.
func TestFillFactor(t *testing.T) {
	p := testPool(t)
	ctx := context.Background()
	for _, bad := range []int{-1, 9, 101} {
		if _, err := New(ctx, Options{Pool: p, Mode: land.Latest, Table: testenv.Name(t, "pgff"), FillFactor: bad}); err == nil {
			t.Errorf("FillFactor %d accepted", bad)
		}
	}
	table := testenv.Name(t, "pgff")
	reloptions := func() string {
		var s *string
		if err := p.QueryRow(ctx, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = to_regclass($1)", table).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
	l, err := New(ctx, Options{Pool: p, Mode: land.Latest, Table: table, FillFactor: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
	if got := reloptions(); got != "fillfactor=50" {
		t.Fatalf("reloptions %q, want fillfactor=50", got)
	}
	if _, err := New(ctx, Options{Pool: p, Mode: land.Latest, Table: table, FillFactor: 80}); err != nil {
		t.Fatal(err)
	}
	if got := reloptions(); got != "fillfactor=50" {
		t.Fatalf("an existing table was altered: reloptions %q", got)
	}
	for _, c := range []struct {
		ff   int
		want string
	}{{0, fmt.Sprintf("fillfactor=%d", DefaultFillFactor)}, {100, "fillfactor=100"}} {
		table = testenv.Name(t, fmt.Sprintf("pgff%d", c.ff))
		l, err := New(ctx, Options{Pool: p, Mode: land.Latest, Table: table, FillFactor: c.ff})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
		if got := reloptions(); got != c.want {
			t.Fatalf("FillFactor %d: reloptions %q, want %s", c.ff, got, c.want)
		}
	}
}
