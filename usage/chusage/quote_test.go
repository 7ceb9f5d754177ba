package chusage

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ubiksql/ubik/usage"
)

var quoteSeeds = []string{
	"", "plain", "it's", `back\slash`, `\'`, `\\'`, "'", "''", `\`, "a\\", "\x00", "\x01\x1f\x7f",
	"line\nbreak\r\ttab", "ümlaut ✓ 😀", "\xff\xfe", "'; DROP TABLE x; --", `\x41`, `\N`, "\u2028",
}

// FuzzQuoteString checks that every string quotes to a literal that reads
// back as exactly the same bytes under ClickHouse's escape rules, with no
// unescaped quote that could end it early.
func FuzzQuoteString(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := quoteString(s)
		got, ok := unquoteString(lit)
		if !ok || got != s {
			t.Fatalf("quoteString(%q) = %s reads back as %q (ok=%v)", s, lit, got, ok)
		}
		if strings.ContainsAny(lit[1:len(lit)-1], "\n\r\x00") {
			t.Fatalf("literal %q holds a raw control byte", lit)
		}
	})
}

// TestQuoteStringLive sends each seed, and the awkward strings of the
// conformance suite, through the real server and compares what it reads.
func TestQuoteStringLive(t *testing.T) {
	t.Parallel()
	l, _ := newLog(t)
	for _, s := range quoteSeeds {
		var got struct{ H string }
		err := l.c.selectRows(context.Background(), "SELECT hex("+quoteString(s)+") AS h", func(d *json.Decoder) error { return d.Decode(&got) })
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if want := strings.ToUpper(hexOf(s)); got.H != want {
			t.Fatalf("server read %q as hex %s, want %s", s, got.H, want)
		}
		if utf8.ValidString(s) {
			var r struct{ N json.Number }
			err := l.c.selectRows(context.Background(), "SELECT count() AS n FROM (SELECT "+quoteString(s)+" AS x) WHERE x = "+quoteString(s), func(d *json.Decoder) error { return d.Decode(&r) })
			if err != nil || r.N != "1" {
				t.Fatalf("%q: equality through SQL text: %v %v", s, r.N, err)
			}
		}
	}
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}

func TestDimEncodingRoundTrip(t *testing.T) {
	vals := []usage.Value{usage.Null(), usage.Bool(true), usage.Bool(false), usage.Number(5), usage.Number(-0.25), usage.Number(1e21),
		usage.String(""), usage.String("5"), usage.String("true"), usage.String("a\x01b"), usage.String("null")}
	seen := map[string]int{}
	for _, name := range []string{"d", "with space", "ü"} {
		for i, v := range vals {
			enc := encodeDim(name, v)
			n, got, err := decodeDim(enc)
			if err != nil || n != name || !got.Equal(v) {
				t.Fatalf("%q=%v encodes to %q, decodes to %q=%v (%v)", name, v, enc, n, got, err)
			}
			if j, dup := seen[enc]; dup && j != i {
				t.Fatalf("%v and %v share the encoding %q", vals[j], v, enc)
			}
			seen[enc] = i
		}
	}
}
