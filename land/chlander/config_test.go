package chlander

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chhttp"
	"github.com/ubiksql/ubik/land/landtest"
)

// TestConfigErrorStops: errors that point at the configuration stop
// land.Run within seconds, naming ClickHouse's reason and what to check,
// where they were retried forever: a table dropped under the lander, a
// missing database, a table of another shape, an unknown user, a wrong
// password. (The test server's users.xml has one user, default, without
// grants to take away: ClickHouse 18.16 has no SQL to create users, so
// ACCESS_DENIED (497) is held by TestConfigErrCodes only.)
func TestConfigErrorStops(t *testing.T) {
	ctx := context.Background()
	url := testenv.RequireClickHouse(t)
	t.Run("TableDropped", func(t *testing.T) {
		l := openWith(t, Options{Mode: land.Latest, Table: testenv.Name(t, "chcfg")})
		if _, err := l.Exec(ctx, "DROP TABLE "+l.Table()); err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "Code: 60", "doesn't exist", l.Table(), "must exist")
	})
	t.Run("NoDatabase", func(t *testing.T) {
		l, err := New(ctx, Options{URL: url, Mode: land.Latest, Database: "ubik_no_such_db", NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "Code: 81", "ubik_no_such_db")
	})
	t.Run("OtherShape", func(t *testing.T) {
		table := testenv.Name(t, "chcfg")
		l, err := New(ctx, Options{URL: url, Mode: land.Continuous, Table: table, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Exec(ctx, "CREATE TABLE "+l.Table()+" (query String) ENGINE = Memory"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table()) })
		landtest.RequireConfigStop(t, l, "columns of "+l.Table())
	})
	t.Run("UnknownUser", func(t *testing.T) {
		l, err := New(ctx, Options{URL: url, User: "ubik_no_such_user", Mode: land.Latest, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "Code: 192", "ubik_no_such_user", "user name and password")
	})
	t.Run("WrongPassword", func(t *testing.T) {
		l, err := New(ctx, Options{URL: url, User: "default", Password: "wrong", Mode: land.Latest, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "Code: 193", "Wrong password", "user name and password")
	})
}

// TestConfigErrCodes: the codes of a configuration are ErrConfig; a
// server error of another kind, or no server, is not.
func TestConfigErrCodes(t *testing.T) {
	l := &Lander{table: "`d`.`t`", o: Options{Database: "d"}}
	for code, want := range map[int]bool{16: true, 47: true, 60: true, 81: true, 164: true, 192: true, 193: true,
		194: true, 195: true, 242: true, 291: true, 497: true, 516: true, 159: false, 209: false, 210: false, 241: false, 252: false} {
		err := l.configErr(&chhttp.ServerError{Status: 500, Text: fmt.Sprintf("Code: %d, e.displayText() = x", code)})
		if got := errors.Is(err, land.ErrConfig); got != want {
			t.Errorf("code %d: configuration error %v, want %v (%v)", code, got, want, err)
		}
	}
	if errors.Is(l.configErr(errors.New("dial tcp: connection refused")), land.ErrConfig) {
		t.Error("a refused connection is a configuration error")
	}
}
