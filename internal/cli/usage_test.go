package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: os.Getenv}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Main(ctx, env, args)
	return out.String(), errb.String(), code
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestUsageCommands(t *testing.T) {
	var b [5]byte
	rand.Read(b[:])
	table := "cli_usage_" + hex.EncodeToString(b[:])
	ch := strings.Replace(envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), "http://", "clickhouse://", 1) + "/ubik_usage_test"
	stores := map[string]string{
		"postgres":   envOr("UBIK_PG_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"clickhouse": ch,
	}
	input := strings.Join([]string{
		`{"key":"a","time":"2026-07-18T10:00:00Z","meter":"calls","quantity":1.5,"dims":{"region":"eu","tier":5}}`,
		`{"key":"b","time":1784368800001,"meter":"calls","quantity":2,"dims":{"region":"us","tier":"5"}}`,
		`not json`,
		`{"key":"","time":1784368800001,"meter":"calls","quantity":2}`,
		`{"key":"a","time":"2026-07-18T11:00:00Z","meter":"calls","quantity":100}`,
		`{"key":"e1","time":"2026-07-18T10:00:00Z","meter":"exact","quantity":123456789.123456789}`,
		`{"key":"e2","time":"2026-07-18T10:00:01Z","meter":"exact","quantity":0.1}`,
		`{"key":"w1","time":"2026-07-18T10:00:00Z","meter":"wide","quantity":12345678901234567890123456789.123456789}`,
		`{"key":"w1","time":"2026-07-18T10:00:00Z","meter":"wide","quantity":1}`,
		`{"key":"w2","time":"2026-07-18T10:00:00Z","meter":"wide","quantity":-0.12345678e-1}`,
	}, "\n")
	t.Cleanup(func() {
		dropCLITables(t, stores["postgres"], envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), table)
	})
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runCLI(t, input, "usage", "write", "--store", store, "--table", table)
			if code != 1 {
				t.Fatalf("write with bad lines: exit %d, want 1\n%s%s", code, out, errOut)
			}
			var ws struct {
				Inserted, Duplicates, Rejected int
				Errors                         []struct{ Line int }
			}
			if err := json.Unmarshal([]byte(out), &ws); err != nil {
				t.Fatalf("write output %q: %v", out, err)
			}
			if ws.Inserted != 6 || ws.Duplicates != 2 || ws.Rejected != 2 || len(ws.Errors) != 2 || ws.Errors[0].Line != 3 || ws.Errors[1].Line != 4 {
				t.Fatalf("write summary %s", out)
			}
			out, errOut, code = runCLI(t, "", "usage", "aggregate", "--store", store, "--table", table, "--meter", "calls",
				"--from", "2026-07-18T10:00:00Z", "--to", "2026-07-18T12:00:00Z", "--filter", "tier=5")
			if code != 0 || strings.TrimSpace(out) != `{"sum":"1.500000000","count":1}` {
				t.Fatalf("aggregate tier=5: exit %d %s%s", code, out, errOut)
			}
			// Quantities are exact decimals end to end, printed with the
			// nine fractional digits of DECIMAL(38,9) as ubik run prints a
			// sum of DECIMAL(p,9).
			for meter, want := range map[string]string{
				"exact": `{"sum":"123456789.223456789","count":2}`,
				"wide":  `{"sum":"12345678901234567890123456789.111111111","count":2}`,
			} {
				out, errOut, code = runCLI(t, "", "usage", "aggregate", "--store", store, "--table", table, "--meter", meter,
					"--from", "2026-07-18T10:00:00Z", "--to", "2026-07-18T12:00:00Z")
				if code != 0 || strings.TrimSpace(out) != want {
					t.Fatalf("aggregate %s: exit %d %s%s, want %s", meter, code, out, errOut, want)
				}
			}
			out, _, code = runCLI(t, "", "usage", "aggregate", "--store", store, "--table", table, "--meter", "calls",
				"--from", "1784368800000", "--to", "1784376000000", "--group-by", "region", "--window", "1h")
			want := `{"sum":"3.500000000","count":2,"groups":[{"window_start":"2026-07-18T10:00:00.000Z","dims":[{"name":"region","present":true,"value":"eu"}],"sum":"1.500000000","count":1},{"window_start":"2026-07-18T10:00:00.000Z","dims":[{"name":"region","present":true,"value":"us"}],"sum":"2.000000000","count":1}]}`
			if code != 0 || strings.TrimSpace(out) != want {
				t.Fatalf("aggregate grouped: exit %d\n got %s\nwant %s", code, out, want)
			}
			// On PostgreSQL a listing shows only rows below the xmin of its
			// snapshot, so any transaction holding an xid anywhere on the
			// server (another test's, on a shared server) holds it back for
			// as long as it runs: that is the documented price of exact
			// paging. The deadline allows for it; a failure names them.
			var keys []string
			deadline := time.Now().Add(90 * time.Second)
			cursor := ""
			for len(keys) < 2 && time.Now().Before(deadline) {
				out, errOut, code = runCLI(t, "", "usage", "list", "--store", store, "--table", table, "--limit", "1", "--cursor", cursor)
				if code != 0 {
					t.Fatalf("list: exit %d %s", code, errOut)
				}
				var p struct {
					Events []struct{ Key string }
					Next   string
				}
				if err := json.Unmarshal([]byte(out), &p); err != nil {
					t.Fatalf("list output %q: %v", out, err)
				}
				for _, e := range p.Events {
					keys = append(keys, e.Key)
				}
				cursor = p.Next
				if len(p.Events) == 0 {
					time.Sleep(200 * time.Millisecond)
				}
			}
			if len(keys) != 2 {
				if name == "postgres" {
					t.Logf("transactions holding an xid now: %s", openXactions(t, store))
				}
				t.Fatalf("listed %v, want a and b", keys)
			}
			out, _, code = runCLI(t, "", "usage", "get", "--store", store, "--table", table, "--key", "a")
			if code != 0 || !strings.Contains(out, `"quantity":"1.500000000"`) {
				t.Fatalf("get a: exit %d %s", code, out)
			}
			if _, _, code = runCLI(t, "", "usage", "get", "--store", store, "--table", table, "--key", "zzz"); code != 1 {
				t.Fatalf("get of a missing key: exit %d, want 1", code)
			}
		})
	}
	for _, bad := range [][]string{
		{"usage"},
		{"usage", "frobnicate"},
		{"usage", "aggregate", "--meter", "x"},
		{"usage", "aggregate", "--store", "mysql://x"},
		{"usage", "aggregate", "--store", stores["postgres"], "--filter", "region=eu"},
		{"usage", "list", "--store", stores["postgres"], "--from", "yesterday"},
	} {
		if _, errOut, code := runCLI(t, "", bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errOut)
		}
	}
}

// openXactions describes the server's transactions that hold an xid (and
// so hold back a usage listing), for a failure message.
func openXactions(t *testing.T, dsn string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid::text || ' xid ' || backend_xid::text || ' since ' || coalesce(xact_start::text, '?') || ': ' || left(query, 80)
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL`)
	if err != nil {
		return err.Error()
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(all, "; ")
}

func dropCLITables(t *testing.T, pgDSN, chURL, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgDSN)
	if err != nil {
		t.Errorf("dropping test table: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
		t.Errorf("dropping %s: %v", table, err)
	}
	resp, err := http.Post(chURL+"/", "text/plain", strings.NewReader("DROP TABLE IF EXISTS ubik_usage_test."+table))
	if err != nil {
		t.Errorf("dropping %s: %v", table, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("dropping %s: HTTP %d", table, resp.StatusCode)
	}
}

// TestUsageWriteTimestampForms: usage write reads event times as ubik run
// reads a TIMESTAMP column (DuckDB text, RFC 3339 with a zone, a bare date)
// and also epoch milliseconds; every form lands at the instant it names, and
// a time that parses as none of them is refused with its line number.
func TestUsageWriteTimestampForms(t *testing.T) {
	var b [5]byte
	rand.Read(b[:])
	table := "cli_usage_ts_" + hex.EncodeToString(b[:])
	stores := map[string]string{
		"postgres":   envOr("UBIK_PG_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"clickhouse": strings.Replace(envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), "http://", "clickhouse://", 1) + "/ubik_usage_test",
	}
	t.Cleanup(func() {
		dropCLITables(t, stores["postgres"], envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), table)
	})
	// 2026-07-18 10:00:00.123 UTC in every form.
	input := strings.Join([]string{
		`{"key":"duck","time":"2026-07-18 10:00:00.123","meter":"m","quantity":1}`,
		`{"key":"rfc","time":"2026-07-18T10:00:00.123Z","meter":"m","quantity":1}`,
		`{"key":"offset","time":"2026-07-18T12:00:00.123+02:00","meter":"m","quantity":1}`,
		`{"key":"ms","time":1784368800123,"meter":"m","quantity":1}`,
		`{"key":"bad","time":"18/07/2026 10:00","meter":"m","quantity":1}`,
	}, "\n")
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runCLI(t, input, "usage", "write", "--store", store, "--table", table)
			if code != 1 {
				t.Fatalf("write: exit %d, want 1 (one bad line)\n%s%s", code, out, errOut)
			}
			var ws struct {
				Inserted, Rejected int
				Errors             []struct {
					Line  int
					Error string
				}
			}
			if err := json.Unmarshal([]byte(out), &ws); err != nil {
				t.Fatalf("write output %q: %v", out, err)
			}
			if ws.Inserted != 4 || ws.Rejected != 1 || len(ws.Errors) != 1 || ws.Errors[0].Line != 5 ||
				!strings.Contains(ws.Errors[0].Error, `"18/07/2026 10:00"`) {
				t.Fatalf("write summary %s", out)
			}
			for _, key := range []string{"duck", "rfc", "offset", "ms"} {
				out, errOut, code := runCLI(t, "", "usage", "get", "--store", store, "--table", table, "--key", key)
				if code != 0 || !strings.Contains(out, `"time":"2026-07-18T10:00:00.123Z"`) {
					t.Errorf("get %s: exit %d %s%s, want time 2026-07-18T10:00:00.123Z", key, code, out, errOut)
				}
			}
			// --from and --to take the same forms.
			out, errOut, code = runCLI(t, "", "usage", "aggregate", "--store", store, "--table", table, "--meter", "m",
				"--from", "2026-07-18 10:00:00.123", "--to", "2026-07-18T10:00:00.124Z")
			if code != 0 || strings.TrimSpace(out) != `{"sum":"4.000000000","count":4}` {
				t.Fatalf("aggregate: exit %d %s%s", code, out, errOut)
			}
		})
	}
}
