package chusage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/land/chhttp"
	"github.com/ubiksql/ubik/usage"
	"github.com/ubiksql/ubik/usage/usagetest"
)

func TestMain(m *testing.M) {
	usagetest.MaybeChild(func(ctx context.Context, target string) (usage.Log, error) {
		db, table, _ := strings.Cut(target, ".")
		return Open(ctx, Options{URL: chURL(), Database: db, Table: table})
	})
	os.Exit(m.Run())
}

func chURL() string {
	if v := os.Getenv("UBIK_CLICKHOUSE_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:8123"
}

// testDB is one database per test binary run, dropped at the end of each
// test's table (tables are dropped one by one; the database stays empty).
const testDB = "ubik_usage_test"

func uniqueTable() string {
	var b [6]byte
	rand.Read(b[:])
	return "ut_" + hex.EncodeToString(b[:])
}

func newLog(t testing.TB) (*Log, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := uniqueTable()
	l, err := Open(ctx, Options{URL: chURL(), Database: testDB, Table: table})
	if err != nil {
		t.Fatalf("ClickHouse at %s is required (set UBIK_CLICKHOUSE_URL): %v", chURL(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := l.c.Exec(ctx, "DROP TABLE IF EXISTS "+l.table, nil); err != nil {
			t.Errorf("dropping %s: %v", table, err)
		}
	})
	return l, testDB + "." + table
}

// The conformance suite runs once per query plan: collapsing only the
// candidate keys, and collapsing every key. Both must give every answer.
func TestConformance(t *testing.T) {
	for name, mode := range map[string]int{"prefilter": prefilterAlways, "full_collapse": prefilterNever} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			usagetest.Run(t, func(t *testing.T) usage.Log {
				l, _ := newLog(t)
				l.prefilter = mode
				return l
			})
		})
	}
}

func TestTwoProcessWriters(t *testing.T) {
	t.Parallel()
	l, target := newLog(t)
	usagetest.RunTwoProcesses(t, l, target, false)
}

// TestSameKeysRace: writers of the same keys in shuffled orders all
// succeed and every key counts once.
func TestSameKeysRace(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	usagetest.RunSameKeysRace(t, l, 4, 5000, 3, false)
}

func (l *Log) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := l.c.Exec(context.Background(), q, nil); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (l *Log) scalar(t *testing.T, q string) string {
	t.Helper()
	var out string
	err := l.selectRows(context.Background(), q, func(d *json.Decoder) error {
		var r map[string]any
		if err := d.Decode(&r); err != nil {
			return err
		}
		for _, v := range r { // one column
			out = strings.Trim(toJSON(v), `"`)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func prepared(t *testing.T, evs ...usage.Event) []usage.Row {
	t.Helper()
	b := usage.Prepare(evs)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return b.Rows
}

// waitNextSecond sleeps into the next wall-clock second, so the next
// INSERT gets a later now() on an 18.16 server (1 s resolution).
func waitNextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
}

// TestPhysicalDuplicateDoesNotCount makes a duplicate land as a second
// physical row, with merges stopped so nothing can collapse it on disk, and
// checks that no read counts it; then lets a merge run and checks that the
// answers do not change.
func TestPhysicalDuplicateDoesNotCount(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	ctx := context.Background()
	l.exec(t, "SYSTEM STOP MERGES "+l.table)
	ts := usagetest.Base
	first := usage.Event{Key: "k", Time: ts, Meter: "m", Quantity: "5", Dims: map[string]usage.Value{"v": usage.String("first")}}
	if r, err := l.Write(ctx, []usage.Event{first, {Key: "other", Time: ts, Meter: "m", Quantity: "1"}}); err != nil || r.Inserted != 2 {
		t.Fatalf("Write: %+v %v", r, err)
	}
	// An identical retry that bypassed the pre-append check (as a racing
	// writer would), in its own INSERT: a second part, a second row.
	if err := l.insertRows(ctx, prepared(t, first)); err != nil {
		t.Fatal(err)
	}
	// A later copy with different facts, ingested in a later second.
	waitNextSecond()
	later := first
	later.Quantity, later.Dims = "500", map[string]usage.Value{"v": usage.String("later")}
	if err := l.insertRows(ctx, prepared(t, later)); err != nil {
		t.Fatal(err)
	}
	if got := l.scalar(t, "SELECT count() FROM "+l.table+" WHERE key = 'k'"); got != "3" {
		t.Fatalf("physical rows for k: %s, want 3 (merges are stopped)", got)
	}
	check := func(when string) {
		t.Helper()
		tot, err := l.Aggregate(ctx, usage.AggregateQuery{Meter: "m", From: ts, To: ts.Add(time.Second)})
		if err != nil || tot.Sum != "6" || tot.Count != 2 {
			t.Fatalf("%s: aggregate %+v %v, want sum 6 count 2", when, tot, err)
		}
		tot, err = l.Aggregate(ctx, usage.AggregateQuery{Meter: "m", From: ts, To: ts.Add(time.Second), Filters: []usage.Filter{usage.Eq("v", usage.String("later"))}})
		if err != nil || tot.Count != 0 {
			t.Fatalf("%s: a filter on the losing copy's facts matched: %+v %v", when, tot, err)
		}
		s, ok, err := l.Get(ctx, "k")
		if err != nil || !ok || s.Quantity != "5" || s.Dims["v"].Str() != "first" {
			t.Fatalf("%s: Get = %+v %v %v, want the first copy", when, s, ok, err)
		}
		var seen []string
		q := usage.ListQuery{Meter: "m", Limit: 1}
		deadline := time.Now().Add(10 * time.Second)
		for len(seen) < 2 && time.Now().Before(deadline) {
			p, err := l.ListEvents(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Events {
				seen = append(seen, e.Key+"="+e.Quantity.String())
			}
			q.Cursor = p.Next
			if len(p.Events) == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		p, err := l.ListEvents(ctx, q)
		if err != nil || len(p.Events) != 0 || len(seen) != 2 || seen[0] != "k=5" && seen[1] != "k=5" {
			t.Fatalf("%s: listing %v then %d more, want k=5 and other=1 once each", when, seen, len(p.Events))
		}
	}
	check("before merge")
	l.exec(t, "SYSTEM START MERGES "+l.table)
	l.exec(t, "OPTIMIZE TABLE "+l.table+" FINAL")
	if got := l.scalar(t, "SELECT count() FROM "+l.table+" WHERE key = 'k'"); got != "1" {
		t.Fatalf("physical rows for k after OPTIMIZE FINAL: %s, want 1", got)
	}
	check("after merge")
}

// TestSameTickTiebreakAgreesWithMerge lands two different copies of a key in
// one INSERT second (a tie on the clock) and checks that the read path and
// a merge pick the same copy.
func TestSameTickTiebreakAgreesWithMerge(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	ctx := context.Background()
	l.exec(t, "SYSTEM STOP MERGES "+l.table)
	ts := usagetest.Base
	var rows []usage.Row
	for i := 0; i < 20; i++ {
		rows = append(rows, prepared(t, usage.Event{Key: "tie", Time: ts, Meter: "m", Quantity: usage.Decimal(strconv.Itoa(i))})...)
	}
	// Separate INSERTs in quick succession: the same second on 18.16 most
	// of the time; either way the answer must survive the merge.
	for _, r := range rows {
		if err := l.insertRows(ctx, []usage.Row{r}); err != nil {
			t.Fatal(err)
		}
	}
	before, _, err := l.Get(ctx, "tie")
	if err != nil {
		t.Fatal(err)
	}
	l.exec(t, "SYSTEM START MERGES "+l.table)
	l.exec(t, "OPTIMIZE TABLE "+l.table+" FINAL")
	after, _, err := l.Get(ctx, "tie")
	if err != nil {
		t.Fatal(err)
	}
	if before.Quantity != after.Quantity {
		t.Fatalf("read path kept quantity %s, the merge kept %s", before.Quantity, after.Quantity)
	}
	if got := l.scalar(t, "SELECT count() FROM "+l.table); got != "1" {
		t.Fatalf("physical rows after OPTIMIZE FINAL: %s, want 1", got)
	}
}

// TestVersionIsServerAssigned checks that a client cannot send the version
// or the ingestion time: they are MATERIALIZED columns.
func TestVersionIsServerAssigned(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	for _, col := range []string{"version", "recorded_ms", "tiebreak"} {
		err := l.c.Insert(context.Background(), "INSERT INTO "+l.table+" (key, "+col+") FORMAT JSONEachRow", []byte(`{"key":"x","`+col+`":1}`+"\n"), nil)
		if err == nil {
			t.Fatalf("inserting %s was accepted", col)
		}
		if se, ok := err.(*chhttp.ServerError); !ok || se.Code() == 0 {
			t.Fatalf("inserting %s: %v, want a ClickHouse error with a code", col, err)
		}
	}
	if _, err := l.Write(context.Background(), []usage.Event{{Key: "a", Time: usagetest.Base, Meter: "m", Quantity: "1"}}); err != nil {
		t.Fatal(err)
	}
	rec := l.scalar(t, "SELECT recorded_ms FROM "+l.table)
	ver := l.scalar(t, "SELECT toString(intDiv(version - toInt64(tiebreak % 2097152), 2097152)) FROM "+l.table)
	if "-"+rec != ver {
		t.Fatalf("version's high part %s is not the negated ingestion time %s", ver, rec)
	}
}

func TestServerErrorSurfaces(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	err := l.selectRows(context.Background(), "SELECT no_such_column FROM "+l.table, func(*json.Decoder) error { return nil })
	se, ok := err.(*chhttp.ServerError)
	if !ok || se.Code() != 47 || !strings.Contains(se.Text, "no_such_column") {
		t.Fatalf("got %v, want ClickHouse error 47 naming the column", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{},
		{URL: "ftp://x"},
		{URL: "http://u:secret@127.0.0.1:8123"},
		{URL: chURL(), Table: "a-b"},
		{URL: chURL(), Database: "x`y"},
		{URL: chURL(), MaxRowsPerInsert: -5},
	} {
		_, err := Open(ctx, o)
		if err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error echoes a password: %v", err)
		}
	}
}
