package exec

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

var (
	identitySeed = flag.Uint64("identity.seed", 0, "seed of TestGroupIdentityProperty (0: the clock)")
	identityRows = flag.Int("identity.rows", 3000, "rows of TestGroupIdentityProperty")
)

// A semantic value of each key cell, with the text its contract key cell
// must show, and a generator of the many ways a producer can spell it.

// identityStrings are the VARCHAR values; U+FFFD also stands for the
// invalid UTF-8 a producer may send.
var identityStrings = []string{"Boé", `a"b\c/d`, "tab\there\n", "😀中", "a\ufffdb", "\ufffd", "", "x"}

// spellString writes s as a JSON string body in a random spelling: each
// character raw or escaped (short escape, \u with either hex case, a
// surrogate pair above U+FFFF), U+FFFD also as a raw invalid UTF-8 subpart.
func spellString(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		must := c == '"' || c == '\\' || c < 0x20
		switch k := r.IntN(4); {
		case c == utf8.RuneError && k == 0:
			// One maximal invalid subpart each; none of them can be
			// extended by what follows (an ASCII byte, a lead byte or an
			// escape).
			b.WriteString([]string{"\xff", "\xfe", "\xf5", "\xc0", "\xe2\x82"}[r.IntN(5)])
		case !must && k < 2:
			b.WriteRune(c)
		case k == 2 && strings.ContainsRune("\"\\\n\t\r\b\f/", c):
			b.WriteString(map[rune]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\t': `\t`, '\r': `\r`, '\b': `\b`, '\f': `\f`, '/': `\/`}[c])
		default:
			hex := "%04x"
			if r.IntN(2) == 0 {
				hex = "%04X"
			}
			if c > 0xffff {
				c -= 0x10000
				fmt.Fprintf(&b, `\u`+hex+`\u`+hex, 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else {
				fmt.Fprintf(&b, `\u`+hex, c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// identityDoubles: the DOUBLE classes, the text of their key cell, and
// their spellings ("" leaves the field out).
var identityDoubles = []struct {
	text      string
	spellings []string
}{
	{"0.0", []string{"-0.0", "0.0", "-0", "0", "0e5", "-0E-3", "0.000"}},
	{"null", []string{"NaN", "Infinity", "-Infinity", "null", "1e400", "-1e400", "nan", "-NaN", "inf", "+Infinity", ""}},
	{"1.5", []string{"1.5", "15e-1", "1.50", "0.15E1"}},
	{"-2.0", []string{"-2", "-2.0", "-20e-1"}},
}

// identityJSON: values of payload.n as JSON, their canonical text, and
// spellings (the strings are spelled by spellString).
var identityJSON = []struct {
	canon     string
	str       string // a string value, spelled at random; else spellings
	spellings []string
}{
	{canon: `"Boé"`, str: "Boé"},
	{canon: `"x\ny\u001F"`, str: "x\ny\x1f"},
	{canon: `"😀"`, str: "😀"},
	{canon: `2.5`, spellings: []string{"2.5", "2.50", "25e-1", "0.25E+1"}},
	{canon: `{"a":[1,true],"b":"é"}`, spellings: []string{`{"a":[1,true],"b":"é"}`, `{ "a" : [ 1 , true ] , "b" : "\u00e9" }`, "{\n\"a\":[1,\ttrue],\"b\":\"\\u00E9\"}"}},
	{canon: `0`, spellings: []string{"0", "-0"}},
}

// identityRow returns a random line, the contract key of its (g, x,
// payload->'n') and that of its (g, x).
func identityRow(r *rand.Rand, sec int) (line, key, flatKey string) {
	g := identityStrings[r.IntN(len(identityStrings))]
	x := identityDoubles[r.IntN(len(identityDoubles))]
	n := identityJSON[r.IntN(len(identityJSON))]
	ws := func() string { return []string{"", " ", "\n", "\t "}[r.IntN(4)] }
	var b strings.Builder
	b.WriteString("{" + ws() + `"g"` + ws() + ":" + ws() + spellString(r, g))
	if xs := x.spellings[r.IntN(len(x.spellings))]; xs != "" {
		b.WriteString("," + ws() + `"x":` + ws() + xs)
	}
	nv := ""
	if n.str != "" {
		nv = spellString(r, n.str)
	} else {
		nv = n.spellings[r.IntN(len(n.spellings))]
	}
	b.WriteString(`,"payload":{` + ws() + `"n"` + ws() + ":" + ws() + nv + ws() + "}")
	b.WriteString(fmt.Sprintf(`,"event_time":"%s"`, ts(sec%60)) + ws() + "}")
	var k []byte
	k = append(k, '[')
	k = changelog.AppendCell(k, types.Str(g))
	k = append(k, ", "+x.text...)
	flat := string(k) + "]"
	k = append(k, ", "...)
	k = changelog.AppendCell(k, types.Str(n.canon))
	k = append(k, ']')
	return b.String(), string(k), flat
}

// TestGroupIdentityProperty: over random rows whose cells are spelled
// adversarially (±0, the non-finite numbers and NULL, invalid UTF-8, JSON
// text with different escapes and spacing, escaped strings), two rows share
// a group exactly when their contract key bytes are equal: each row's
// record carries the key its semantic cells render to, and the revision
// counts exactly the earlier rows with that key.
func TestGroupIdentityProperty(t *testing.T) {
	seed := *identitySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -identity.seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	lines := make([]string, *identityRows)
	keys := make([]string, len(lines))
	flatKeys := make([]string, len(lines))
	for i := range lines {
		lines[i], keys[i], flatKeys[i] = identityRow(r, i)
	}
	for _, c := range []struct {
		sql  string
		keys []string
	}{
		{`SELECT g, x, payload->'n' AS n, count(*) AS c FROM ev GROUP BY g, x, payload->'n'`, keys},
		{`SELECT g, x, count(*) AS c FROM flat GROUP BY g, x`, flatKeys},
	} {
		recs := runLines(t, c.sql, lines)
		if len(recs) != len(lines) {
			t.Fatalf("%s: %d records for %d rows", c.sql, len(recs), len(lines))
		}
		seen := map[string]uint64{}
		for i, rec := range recs {
			k := c.keys[i]
			seen[k]++
			if string(rec.Key) != k {
				t.Fatalf("seed %d, %s: row %d %q: key %s, want %s", seed, c.sql, i+1, lines[i], rec.Key, k)
			}
			if rec.Meta.Revision != seen[k] {
				t.Fatalf("seed %d, %s: row %d %q: revision %d, but it is row %d of key %s", seed, c.sql, i+1, lines[i], rec.Meta.Revision, seen[k], k)
			}
		}
		t.Logf("%s: %d rows, %d groups", c.sql, len(lines), len(seen))
	}
}

// keyCellText is the contract text of v as a key cell, by the rules
// stated without the group key: the encoder's rendering, with -0.0 as 0.0.
func keyCellText(v types.Value) string {
	if !v.Null && v.Kind == types.KindDouble && v.F == 0 {
		v.F = 0
	}
	return string(changelog.AppendCell(nil, v))
}

// cellFrom builds a cell of one of a few kinds from fuzz bytes.
func cellFrom(kind uint8, b []byte) types.Value {
	u := uint64(0)
	for i := 0; i < 8 && i < len(b); i++ {
		u |= uint64(b[i]) << (8 * i)
	}
	switch kind % 5 {
	case 0:
		return types.Str(string(b))
	case 1:
		return types.Float(math.Float64frombits(u))
	case 2:
		return types.Big(int64(u))
	case 3:
		if len(b) == 0 {
			return types.NullOf(types.Double)
		}
		// The special doubles, often.
		return types.Float([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.Float64frombits(0x7ff8000000000001)}[int(b[0])%6])
	default:
		return types.NullOf(types.Varchar)
	}
}

// FuzzGroupKey: for two cells of one type, their group key bytes are equal
// exactly when their key cell texts are, and the key cell decoded from the
// bytes renders to that text.
func FuzzGroupKey(f *testing.F) {
	for _, s := range []struct {
		k    uint8
		a, b string
	}{
		{0, "\xff", "\xfe"}, {0, "a\xe2\x82b", "a\xefb"}, {0, "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
		{0, "é", "e\u0301"}, {0, "", "\x00"}, {1, "\x00\x00\x00\x00\x00\x00\x00\x80", "\x00\x00\x00\x00\x00\x00\x00\x00"},
		{1, "\x01\x00\x00\x00\x00\x00\xf8\x7f", "\x00\x00\x00\x00\x00\x00\xf0\x7f"}, {3, "\x00", "\x01"}, {3, "\x02", "\x03"},
		{3, "", "\x05"}, {2, "\x01", "\x01\x00"}, {4, "", ""},
	} {
		f.Add(s.k, []byte(s.a), s.k, []byte(s.b))
	}
	f.Fuzz(func(t *testing.T, ka uint8, a []byte, kb uint8, b []byte) {
		va, vb := cellFrom(ka, a), cellFrom(kb, b)
		typeOf := func(v types.Value) types.Type {
			if v.Kind == types.KindDouble {
				return types.Double
			}
			if v.Kind == types.KindBigInt {
				return types.BigInt
			}
			return types.Varchar
		}
		ta, tb := typeOf(va), typeOf(vb)
		if ta != tb {
			return // a GROUP BY column has one type
		}
		ba := AppendGroupIdentity(nil, []types.Value{va})
		bb := AppendGroupIdentity(nil, []types.Value{vb})
		xa, xb := keyCellText(va), keyCellText(vb)
		if (string(ba) == string(bb)) != (xa == xb) {
			t.Fatalf("cells %#v and %#v: key bytes equal %v, texts %s and %s", va, vb, string(ba) == string(bb), xa, xb)
		}
		for _, c := range []struct {
			k    []byte
			want string
		}{{ba, xa}, {bb, xb}} {
			cells := decodeKeyBytes(string(c.k), []types.Type{ta}, nil)
			if got := string(changelog.AppendKey(nil, cells)); got != "["+c.want+"]" {
				t.Fatalf("key bytes %q emit %s, want [%s]", c.k, got, c.want)
			}
		}
	})
}

// TestProcessKeyedMatchesProcess: an operator handed each row's group key
// (as a repartitioning stage does) emits exactly what one evaluating the
// GROUP BY emits; a key that is not a well-formed group key (another
// format, corrupt bytes) is ignored, never trusted.
func TestProcessKeyedMatchesProcess(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	var lines []string
	for i := 0; i < 2000; i++ {
		l, _, _ := identityRow(r, i)
		lines = append(lines, l)
	}
	want := recordText(runLines(t, `SELECT g, x, count(*) AS c FROM flat GROUP BY g, x`, lines))
	for _, mode := range []string{"keyed", "garbage"} {
		got := recordText(runLinesWith(t, `SELECT g, x, count(*) AS c FROM flat GROUP BY g, x`, lines, func(keys *GroupKeys, row []types.Value) []byte {
			if mode == "keyed" {
				k, err := keys.Append(nil, row)
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
			// A JSON key, a truncated key, -0.0 and NaN bits, invalid UTF-8.
			return [][]byte{[]byte(`["a", 1.0]`), {8, 3, 'a'}, {6, 0, 0, 0, 0, 0, 0, 0, 0x80, 0}, {6, 1, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0}, {8, 1, 0xff, 0}, {}}[r.IntN(6)]
		}))
		if got != want {
			t.Fatalf("%s: ProcessKeyed emits differently from Process", mode)
		}
	}
}

func TestIsASCII(t *testing.T) {
	for n := 0; n <= 40; n++ {
		s := []byte(strings.Repeat("a", n))
		if !isASCII(string(s)) {
			t.Fatalf("%d ASCII bytes: not ASCII", n)
		}
		for i := 0; i < n; i++ {
			c := append([]byte(nil), s...)
			c[i] = 0x80
			if isASCII(string(c)) {
				t.Fatalf("%d bytes with 0x80 at %d: ASCII", n, i)
			}
		}
	}
}
