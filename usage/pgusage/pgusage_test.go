package pgusage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubiksql/ubik/usage"
	"github.com/ubiksql/ubik/usage/usagetest"
)

func TestMain(m *testing.M) {
	usagetest.MaybeChild(func(ctx context.Context, target string) (usage.Log, error) {
		dsn, table, _ := strings.Cut(target, "#")
		return Open(ctx, Options{DSN: dsn, Table: table})
	})
	os.Exit(m.Run())
}

func dsn() string {
	if v := os.Getenv("UBIK_PG_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func uniqueTable() string {
	var b [6]byte
	rand.Read(b[:])
	return "ut_usage_" + hex.EncodeToString(b[:])
}

// newLog opens a log on a fresh table that is dropped after the test.
func newLog(t testing.TB) (*Log, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := uniqueTable()
	l, err := Open(ctx, Options{DSN: dsn(), Table: table})
	if err != nil {
		t.Fatalf("PostgreSQL at %s is required (set UBIK_PG_DSN): %v", redact(dsn()), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := l.pool.Exec(ctx, `DROP TABLE IF EXISTS `+l.table); err != nil {
			t.Errorf("dropping %s: %v", table, err)
		}
		l.Close()
	})
	return l, table
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}

func TestConformance(t *testing.T) {
	usagetest.Run(t, func(t *testing.T) usage.Log {
		l, _ := newLog(t)
		return l
	})
}

func TestTwoProcessWriters(t *testing.T) {
	t.Parallel()
	l, table := newLog(t)
	usagetest.RunTwoProcesses(t, l, dsn()+"#"+table, true)
}

// TestSameKeysRace: four writers of the same 5,000 keys in shuffled orders
// used to deadlock (SQLSTATE 40P01) and fail the Write.
func TestSameKeysRace(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	usagetest.RunSameKeysRace(t, l, 4, 5000, 3, true)
}

// TestPagingWaitsForLateCommit holds a transaction open that inserted a row
// first (so it has the lower xid and the lower seq), commits a later row,
// and checks that the listing neither returns the later row past the open
// one nor skips the open one once it commits.
func TestPagingWaitsForLateCommit(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ts := usagetest.Base
	if _, err := tx.Exec(ctx, `INSERT INTO `+l.table+` (key, event_ms, meter, quantity, dims) VALUES ('late', $1, 'lc', 1, '{}')`, ts.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(ctx, []usage.Event{{Key: "early", Time: ts, Meter: "lc", Quantity: "2"}}); err != nil {
		t.Fatal(err)
	}
	// The aggregate is exact at once: it sees the committed row only.
	tot, err := l.Aggregate(ctx, usage.AggregateQuery{Meter: "lc", From: ts, To: ts.Add(time.Second)})
	if err != nil || tot.Count != 1 {
		t.Fatalf("aggregate with one row committed: %+v %v", tot, err)
	}
	q := usage.ListQuery{Meter: "lc", Limit: 10}
	p, err := l.ListEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 0 {
		t.Fatalf("listing returned %v past an open older transaction", keys(p.Events))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Another transaction holding an xid on the server (a test of another
	// package, run beside this one) holds the listing back as this test's
	// own did, so it polls until both rows are listed.
	var listed []string
	for deadline := time.Now().Add(90 * time.Second); len(listed) < 2 && time.Now().Before(deadline); {
		q.Cursor = p.Next
		if p, err = l.ListEvents(ctx, q); err != nil {
			t.Fatal(err)
		}
		listed = append(listed, keys(p.Events)...)
		if len(p.Events) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if got := fmt.Sprint(listed); got != "[late early]" {
		t.Fatalf("after the late commit the listing continued with %s, want [late early]", got)
	}
}

func keys(es []usage.Stored) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

func TestOptionsValidation(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{},
		{DSN: dsn(), Table: "Bad-Name"},
		{DSN: dsn(), Table: "t; drop"},
		{DSN: dsn(), Schema: "x y"},
		{DSN: dsn(), MaxRowsPerStatement: -1},
	} {
		if _, err := Open(ctx, o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	_, err := Open(ctx, Options{DSN: "postgres://user:secret@[::1"})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad DSN: %v (must fail without echoing the password)", err)
	}
}
