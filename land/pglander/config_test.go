package pglander

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// poolAs is a pool on the test server as user (no password: the test
// server trusts local connections, so a role that exists logs in).
func poolAs(t *testing.T, user string) *pgxpool.Pool {
	u, err := url.Parse(testenv.RequirePostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	p, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func exec(t *testing.T, p *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := p.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestConfigErrorStops: errors that point at the configuration stop
// land.Run within seconds, naming the server's reason and what to check,
// where they were retried forever: a role without INSERT, a read-only
// session, a table dropped under the lander, a role that does not exist.
func TestConfigErrorStops(t *testing.T) {
	admin := testPool(t)
	ctx := context.Background()
	t.Run("InsertRevoked", func(t *testing.T) {
		table, role := testenv.Name(t, "pgcfg"), testenv.Name(t, "pgrole")
		l, err := New(ctx, Options{Pool: admin, Mode: land.Latest, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
			admin.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		})
		exec(t, admin, "CREATE ROLE "+role+" LOGIN")
		exec(t, admin, "GRANT ALL ON "+l.Table()+" TO "+role)
		exec(t, admin, "REVOKE INSERT ON "+l.Table()+" FROM "+role)
		rl, err := New(ctx, Options{Pool: poolAs(t, role), Mode: land.Latest, Table: table, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, rl, "permission denied", "42501", "INSERT", table)
	})
	t.Run("ReadOnly", func(t *testing.T) {
		table, role := testenv.Name(t, "pgcfg"), testenv.Name(t, "pgrole")
		l, err := New(ctx, Options{Pool: admin, Mode: land.History, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
			admin.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		})
		// The role's sessions are read-only, as on a standby.
		exec(t, admin, "CREATE ROLE "+role+" LOGIN")
		exec(t, admin, "GRANT ALL ON "+l.Table()+" TO "+role)
		exec(t, admin, "ALTER ROLE "+role+" SET default_transaction_read_only = on")
		rl, err := New(ctx, Options{Pool: poolAs(t, role), Mode: land.History, Table: table, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, rl, "read-only transaction", "25006", "writable primary")
	})
	t.Run("TableDropped", func(t *testing.T) {
		table := testenv.Name(t, "pgcfg")
		l, err := New(ctx, Options{Pool: admin, Mode: land.Continuous, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		exec(t, admin, "DROP TABLE "+l.Table())
		landtest.RequireConfigStop(t, l, "does not exist", "42P01", table)
	})
	t.Run("UnknownRole", func(t *testing.T) {
		l, err := New(ctx, Options{Pool: poolAs(t, "ubik_no_such_role"), Mode: land.Latest, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "ubik_no_such_role", "28000", "user name and password")
	})
}

// TestConfigErrClasses: the SQLSTATEs of a configuration are ErrConfig;
// an outage, a conflict between transactions and a data error are not.
func TestConfigErrClasses(t *testing.T) {
	for code, want := range map[string]bool{"42501": true, "42P01": true, "42703": true, "28P01": true, "28000": true,
		"25006": true, "3D000": true, "3F000": true, "57P01": false, "57P03": false, "40001": false, "40P01": false,
		"08006": false, "53300": false, "22P02": false} {
		err := configErr(&pgconn.PgError{Code: code, Message: "m"}, "t")
		if got := errors.Is(err, land.ErrConfig); got != want {
			t.Errorf("SQLSTATE %s: configuration error %v, want %v (%v)", code, got, want, err)
		}
	}
	if configErr(errors.New("dial tcp: connection refused"), "t") != nil {
		t.Error("a refused connection is a configuration error")
	}
}
