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

// roundTrip checks that the server reads each of ss as exactly the string
// quoted, on every path a literal takes: the rows of INSERT ... FORMAT
// Values, read back as hex (exact bytes, whatever the output format does
// with invalid UTF-8); the same rows sent as a temporary table beside a
// query, joined to the table on the string (so byte-equal to what was
// inserted); and the literal in the query text, tested with IN against the
// stored row. ids.next numbers the rows: no two calls on one table share
// an id, so the table is never emptied and a call reads only its own rows.
//
// A call is three requests (an INSERT, one SELECT per 100 kB of literals,
// the join): a fuzz worker kills an input that runs 10 s and reports no
// message (Go's internal/fuzz), so an iteration must be cheap, and a slow
// server fails with a message naming the deadline instead (budget).
func roundTrip(t testing.TB, c *Client, table string, ids *ids, budget time.Duration, ss []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	fail := func(what string, err error) {
		t.Helper()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: the server did not answer within %v (this machine's load; the strings were not checked): %v", what, budget, err)
		}
		t.Fatalf("%s: %v", what, err)
	}
	base := ids.take(len(ss))
	var rows []byte
	for i, s := range ss {
		rows = fmt.Appendf(rows, "(%d,", base+i)
		rows = AppendQuote(rows, s)
		rows = append(rows, ')', '\n')
	}
	if err := c.Insert(ctx, "INSERT INTO "+table+" (i, s) FORMAT Values", rows, nil); err != nil {
		fail(fmt.Sprintf("inserting %d strings", len(ss)), err)
	}
	// The literals in the query text, tested with IN against the rows as
	// read back, in the request body (the URL of a request with a
	// temporary table holds 16 kB), under max_query_size.
	seen := map[int]bool{}
	for lo := 0; lo < len(ss); {
		var lits strings.Builder
		hi := lo
		for ; hi < len(ss) && lits.Len() < 100_000; hi++ {
			if hi > lo {
				lits.WriteString(", ")
			}
			fmt.Fprintf(&lits, "(%d, %s)", base+hi, Quote(ss[hi]))
		}
		q := fmt.Sprintf("SELECT i, hex(s), (i, s) IN (%s) FROM %s WHERE i >= %d AND i < %d", lits.String(), table, base+lo, base+hi)
		err := c.SelectTSV(ctx, q, nil, nil, func(f [][]byte) error {
			if len(f) != 3 {
				return fmt.Errorf("%d fields, want 3", len(f))
			}
			id, err1 := strconv.Atoi(string(f[0]))
			raw, err2 := hex.DecodeString(string(f[1]))
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			i := id - base
			if i < lo || i >= hi || seen[i] {
				return fmt.Errorf("row %d: not one of the rows %d..%d, or read twice", id, base+lo, base+hi-1)
			}
			seen[i] = true
			if s := ss[i]; string(raw) != s {
				t.Errorf("inserted %q as %s, read back %q", s, Quote(s), raw)
			} else if string(f[2]) != "1" {
				t.Errorf("the literal %s in a query does not equal the stored %q", Quote(s), s)
			}
			return nil
		})
		if err != nil {
			fail(fmt.Sprintf("reading back strings %d..%d", lo, hi-1), err)
		}
		lo = hi
	}
	for i, s := range ss {
		if !seen[i] {
			t.Errorf("inserted %q as %s: no row read back", s, Quote(s))
		}
	}
	// The same rows as a temporary table, joined to the table on the
	// string: each stored row must meet a row of _t with the same bytes
	// (ss may hold a string twice: compare strings, not ids).
	joined := map[int]bool{}
	q := fmt.Sprintf("SELECT t.i, e.i FROM %s AS t ANY LEFT JOIN _t AS e USING (s) WHERE t.i >= %d AND t.i < %d", table, base, base+len(ss))
	err := c.SelectTSV(ctx, q, nil, &Table{Name: "_t", Structure: "i UInt32, s String", Values: rows}, func(f [][]byte) error {
		if len(f) != 2 {
			return fmt.Errorf("%d fields, want 2", len(f))
		}
		id, err1 := strconv.Atoi(string(f[0]))
		eid, err2 := strconv.Atoi(string(f[1]))
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		i, j := id-base, eid-base
		if i < 0 || i >= len(ss) {
			return fmt.Errorf("row %d: not one of the rows %d..%d", id, base, base+len(ss)-1)
		}
		joined[i] = true
		if s := ss[i]; eid == 0 || j < 0 || j >= len(ss) || ss[j] != s {
			t.Errorf("sent %q as %s in a temporary table: no row of it equals the inserted string (joined to row %d)", s, Quote(s), eid)
		}
		return nil
	})
	if err != nil {
		fail("joining the strings sent as a temporary table", err)
	}
	for i, s := range ss {
		if !joined[i] {
			t.Errorf("inserted %q as %s: the join read no row for it", s, Quote(s))
		}
	}
}

// ids hands out row numbers, from 1 (0 is a join's "no match").
type ids struct{ n int }

func (x *ids) take(n int) int { x.n += n; return x.n - n + 1 }

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
// round trip (it runs in CI, like every test), then once more with every
// string beside a second table's worth of rows, so a read sees only its
// own.
func TestQuoteServer(t *testing.T) {
	c, table := newTable(t)
	var n ids
	roundTrip(t, c, table, &n, time.Minute, quoteSeeds())
	roundTrip(t, c, table, &n, time.Minute, quoteSeeds())
	// A temporary table read back on its own, through SelectJSONWith.
	ss := quoteSeeds()
	var rows []byte
	for i, s := range ss {
		rows = fmt.Appendf(rows, "(%d,", i)
		rows = AppendQuote(rows, s)
		rows = append(rows, ')', '\n')
	}
	ext := map[int]string{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.SelectJSONWith(ctx, "SELECT i, hex(s) AS h FROM _t", nil, Table{Name: "_t", Structure: "i UInt32, s String", Values: rows}, hexRows(ext))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if ext[i] != s {
			t.Errorf("sent %q as %s in a temporary table, read back %q", s, Quote(s), ext[i])
		}
	}
}

// fuzzBudget bounds one fuzz iteration's requests, under the 10 s after
// which a fuzz worker kills the input without a message.
const fuzzBudget = 8 * time.Second

// FuzzQuoteServer sends each input through the real server: go test
// -fuzz=FuzzQuoteServer ./land/chhttp. Without -fuzz it runs the seeds.
// Each worker process has its own table (testenv.Name is random) and
// numbers its rows itself; iterations of one worker run one at a time.
func FuzzQuoteServer(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	c, table := newTable(f)
	var n ids
	f.Fuzz(func(t *testing.T, s string) {
		roundTrip(t, c, table, &n, fuzzBudget, []string{s, s + "'" + s, "\\" + s})
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
