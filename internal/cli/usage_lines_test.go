package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestUsageWriteBadLinesNumbersAndBounds: through the CLI, on both stores,
// a key that is not UTF-8 is a bad line (never repaired into another
// event's key), a line over 1 MiB is a bad line and the lines after it are
// written, a number dimension keeps every digit in filters, groups and
// listings, and a --to with a 7th fractional digit rounds up.
func TestUsageWriteBadLinesNumbersAndBounds(t *testing.T) {
	var b [5]byte
	rand.Read(b[:])
	table := "cli_usage_lines_" + hex.EncodeToString(b[:])
	stores := map[string]string{
		"postgres":   envOr("UBIK_PG_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"clickhouse": strings.Replace(envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), "http://", "clickhouse://", 1) + "/ubik_usage_test",
	}
	t.Cleanup(func() {
		dropCLITables(t, stores["postgres"], envOr("UBIK_CLICKHOUSE_URL", "http://127.0.0.1:8123"), table)
	})
	long := `{"key":"long","time":1784368800000,"meter":"m","quantity":1,"dims":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	input := strings.Join([]string{
		"{\"key\":\"u\xff\",\"time\":1784368800000,\"meter\":\"m\",\"quantity\":1}",
		"{\"key\":\"u\xfe\",\"time\":1784368800000,\"meter\":\"m\",\"quantity\":1000}",
		`{"key":"u\ufffd","time":1784368800000,"meter":"m","quantity":3}`,
		`{"key":"hi","time":1784368800000,"meter":"acct","quantity":5,"dims":{"account":9007199254740993}}`,
		`{"key":"lo","time":1784368800000,"meter":"acct","quantity":7,"dims":{"account":9007199254740992}}`,
	}, "\n")
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runCLI(t, input, "usage", "write", "--store", store, "--table", table)
			var ws struct {
				Inserted, Duplicates, Rejected int
				Errors                         []struct {
					Line  int
					Error string
				}
			}
			if err := json.Unmarshal([]byte(out), &ws); err != nil || code != 1 {
				t.Errorf("write: exit %d, output %q %s: %v", code, out, errOut, err)
			}
			if ws.Inserted != 3 || ws.Duplicates != 0 || ws.Rejected != 2 || len(ws.Errors) != 2 ||
				ws.Errors[0].Line != 1 || ws.Errors[1].Line != 2 || !strings.Contains(ws.Errors[0].Error, "UTF-8") {
				t.Errorf("write summary %s, want the two keys that are not UTF-8 refused", out)
			}
			// A line over 1 MiB is one bad line; the line after it is written.
			out, errOut, code = runCLI(t, long+"\n"+`{"key":"after-long","time":1784368800000,"meter":"long","quantity":1}`,
				"usage", "write", "--store", store, "--table", table)
			if code != 1 || !strings.Contains(out, `"inserted":1,`) || !strings.Contains(out, `"line":1,`) || !strings.Contains(out, "at most 1048576") {
				t.Errorf("write of a long line: exit %d %s%s", code, out, errOut)
			}
			run := func(args ...string) string {
				t.Helper()
				out, errOut, code := runCLI(t, "", append([]string{"usage", args[0], "--store", store, "--table", table}, args[1:]...)...)
				if code != 0 {
					t.Errorf("%v: exit %d %s%s", args, code, out, errOut)
				}
				return strings.TrimSpace(out)
			}
			span := []string{"--from", "2026-07-18T10:00:00Z", "--to", "2026-07-18T10:00:01Z"}
			if got := run(append([]string{"aggregate", "--meter", "long"}, span...)...); got != `{"sum":"1.000000000","count":1}` {
				t.Errorf("meter long: %s, want the line after the long one", got)
			}
			if got := run(append([]string{"aggregate", "--meter", "m"}, span...)...); got != `{"sum":"3.000000000","count":1}` {
				t.Errorf("meter m: %s, want only the valid U+FFFD key", got)
			}
			if got := run(append([]string{"aggregate", "--meter", "acct", "--filter", "account=9007199254740993"}, span...)...); got != `{"sum":"5.000000000","count":1}` {
				t.Errorf("filter account=9007199254740993: %s", got)
			}
			got := run(append([]string{"aggregate", "--meter", "acct", "--group-by", "account"}, span...)...)
			if !strings.Contains(got, `"value":9007199254740992}]`) || !strings.Contains(got, `"value":9007199254740993}`) {
				t.Errorf("group by account: %s", got)
			}
			// A listing shows rows once they are below the store's
			// visibility watermark (ClickHouse: the next second).
			deadline := time.Now().Add(30 * time.Second)
			for {
				got := run("list", "--meter", "acct", "--filter", "account=9007199254740993")
				if strings.Contains(got, `"account":9007199254740993`) && strings.Count(got, `"key"`) == 1 {
					break
				}
				if strings.Count(got, `"key"`) > 1 || time.Now().After(deadline) {
					t.Errorf("list account=9007199254740993: %s", got)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			// 10:00:00.0000001 rounds up to 10:00:00.001, so the events at
			// 10:00:00.000 are inside [from, to).
			if got := run("aggregate", "--meter", "m", "--from", "2026-07-18T10:00:00Z", "--to", "2026-07-18T10:00:00.0000001Z"); got != `{"sum":"3.000000000","count":1}` {
				t.Errorf("--to with a 7th fractional digit: %s, want the event at 10:00:00.000", got)
			}
		})
	}
}
