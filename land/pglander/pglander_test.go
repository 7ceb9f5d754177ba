package pglander

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func pool(t testing.TB) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), testenv.RequirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformance(t *testing.T) {
	p := pool(t)
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
	})
}

func TestBadInput(t *testing.T) {
	p := pool(t)
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
	r = landtest.Record(land.Continuous, "q", "g", landtest.Base(), 1<<63, false)
	if _, err := l.Land(ctx, landRecs(r)); !land.Permanent(err) {
		t.Fatalf("revision 2^63: %v, want a permanent error", err)
	}
}
