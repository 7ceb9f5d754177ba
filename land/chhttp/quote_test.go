package chhttp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/testenv"
)

// fuzzSeeds are the strings a literal can go wrong on: quotes and
// backslashes in every combination, control bytes, DEL, invalid UTF-8,
// escape sequences that must stay text, and SQL that must stay data.
func fuzzSeeds() []string {
	return []string{
		"", "plain", "it's", `back\slash`, `\'`, `\\'`, "'", "''", `\`, "a\\", "\\\\", "\x00", "a\x00b",
		"\x01\x1f\x7f", "line\nbreak\r\ttab", "\t\n", "ümlaut ✓ 😀", "\xff\xfe", "\xc3", "\xed\xa0\x80",
		"\xf4\x90\x80\x80", "'; DROP TABLE x; --", `\x41`, `\N`, `\0`, "\u2028", "?", "{x}", "$1", "`",
		`"`, "\\x", "\\u0041", "a'b\\c\"d`e\x00f\ng",
	}
}

// quoteSeeds adds every byte alone and inside a string, all 256 bytes in
// one string, and seeded random strings heavy in the awkward bytes.
func quoteSeeds() []string {
	s := fuzzSeeds()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
		s = append(s, string([]byte{byte(i)}), "x"+string([]byte{byte(i)})+"'")
	}
	s = append(s, string(all))
	rng := rand.New(rand.NewPCG(18, 1816))
	for range 300 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = "'\\\x00\t\n\r\"`"[rng.IntN(8)]
			default:
				b[i] = byte(rng.IntN(256))
			}
		}
		s = append(s, string(b))
	}
	return s
}

// roundTrip inserts ss through INSERT ... FORMAT Values, reads them back as
// hex (exact bytes, whatever the output format does with invalid UTF-8),
// and looks each up by its literal in a WHERE clause: the server must parse
// every literal as exactly the string quoted, on the way in and in a query.
func roundTrip(t testing.TB, c *Client, table string, ss []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Exec(ctx, "TRUNCATE TABLE "+table, nil); err != nil {
		t.Fatal(err)
	}
	var rows []byte
	for i, s := range ss {
		rows = fmt.Appendf(rows, "(%d,", i)
		rows = AppendQuote(rows, s)
		rows = append(rows, ')', '\n')
	}
	if err := c.Insert(ctx, "INSERT INTO "+table+" (i, s) FORMAT Values", rows, nil); err != nil {
		t.Fatalf("inserting %d strings: %v", len(ss), err)
	}
	got := map[int]string{}
	err := c.SelectJSON(ctx, "SELECT i, hex(s) AS h FROM "+table, nil, hexRows(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ss) {
		t.Fatalf("%d rows read back, %d inserted", len(got), len(ss))
	}
	for i, s := range ss {
		if got[i] != s {
			t.Errorf("inserted %q as %s, read back %q", s, Quote(s), got[i])
		}
	}
	// Numbers through SelectTSV, with the rows as a temporary table too.
	lens := map[int]int{}
	err = c.SelectTSV(ctx, "SELECT t.i, length(t.s), e.i FROM "+table+" AS t ANY INNER JOIN _t AS e USING (s)", nil,
		&Table{Name: "_t", Structure: "i UInt32, s String", Values: rows}, func(f [][]byte) error {
			if len(f) != 3 {
				return fmt.Errorf("%d fields", len(f))
			}
			i, err1 := strconv.Atoi(string(f[0]))
			n, err2 := strconv.Atoi(string(f[1]))
			lens[i] = n
			return errors.Join(err1, err2)
		})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if lens[i] != len(s) {
			t.Errorf("%q: length %d joined through a temporary table, want %d", s, lens[i], len(s))
		}
	}
	// The same rows as a temporary table sent beside a query.
	ext := map[int]string{}
	err = c.SelectJSONWith(ctx, "SELECT i, hex(s) AS h FROM _t", nil, Table{Name: "_t", Structure: "i UInt32, s String", Values: rows}, hexRows(ext))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if ext[i] != s {
			t.Errorf("sent %q as %s in a temporary table, read back %q", s, Quote(s), ext[i])
		}
	}
	// Each literal in a WHERE clause finds its own row, in batches that
	// keep the query under max_query_size.
	for lo := 0; lo < len(ss); {
		var q strings.Builder
		q.WriteString("SELECT i FROM " + table + " WHERE (i, s) IN (")
		hi := lo
		for ; hi < len(ss) && q.Len() < 100_000; hi++ {
			if hi > lo {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "(%d, %s)", hi, Quote(ss[hi]))
		}
		q.WriteString(")")
		found := map[int]bool{}
		err := c.SelectJSON(ctx, q.String(), nil, func(d *json.Decoder) error {
			var r struct{ I int }
			err := d.Decode(&r)
			found[r.I] = true
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := lo; i < hi; i++ {
			if !found[i] {
				t.Errorf("WHERE s = %s does not find %q", Quote(ss[i]), ss[i])
			}
		}
		lo = hi
	}
}

// hexRows decodes rows {"i": N, "h": HEX} into into[N].
func hexRows(into map[int]string) func(*json.Decoder) error {
	return func(d *json.Decoder) error {
		var r struct {
			I int
			H string
		}
		if err := d.Decode(&r); err != nil {
			return err
		}
		b, err := hex.DecodeString(r.H)
		into[r.I] = string(b)
		return err
	}
}

func newTable(t testing.TB) (*Client, string) {
	t.Helper()
	c, err := New(Options{URL: testenv.RequireClickHouse(t)})
	if err != nil {
		t.Fatal(err)
	}
	table := "default." + QuoteIdent(testenv.Name(t, "chhttp_quote"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "CREATE TABLE "+table+" (i UInt32, s String) ENGINE = Memory", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table, nil) })
	return c, table
}

// TestQuoteServer runs the seed corpus through the real server in one
// round trip (it runs in CI, like every test).
func TestQuoteServer(t *testing.T) {
	c, table := newTable(t)
	roundTrip(t, c, table, quoteSeeds())
}

// FuzzQuoteServer sends each input through the real server: go test
// -fuzz=FuzzQuoteServer ./land/chhttp. Without -fuzz it runs the seeds.
func FuzzQuoteServer(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	c, table := newTable(f)
	f.Fuzz(func(t *testing.T, s string) {
		roundTrip(t, c, table, []string{s, s + "'" + s, "\\" + s})
	})
}

func TestQuoteShape(t *testing.T) {
	for _, s := range quoteSeeds() {
		lit := Quote(s)
		body := lit[1 : len(lit)-1]
		for i := 0; i < len(body); i++ {
			if c := body[i]; c < 0x20 || c == 0x7f {
				t.Fatalf("Quote(%q) = %q holds the raw byte %#x", s, lit, c)
			}
		}
	}
	if got := Quote("a'b\\c\x00"); got != `'a\'b\\c\x00'` {
		t.Fatalf("Quote = %s", got)
	}
}

func TestValidIdent(t *testing.T) {
	for s, want := range map[string]bool{"t": true, "_x1": true, "ubik_land": true, "": false, "1t": false, "a-b": false, "a`b": false, "a.b": false, "ü": false} {
		if ValidIdent(s) != want {
			t.Errorf("ValidIdent(%q) = %v", s, !want)
		}
	}
}
