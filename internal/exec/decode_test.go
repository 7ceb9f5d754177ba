package exec

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

func fuzzSource() *plan.Source {
	return &plan.Source{
		Name: "ev",
		Columns: []plan.Column{
			{Name: "s", Type: types.Varchar}, {Name: "i", Type: types.Integer}, {Name: "b", Type: types.BigInt},
			{Name: "h", Type: types.HugeInt}, {Name: "d", Type: types.Double}, {Name: "m", Type: types.Decimal(18, 3)},
			{Name: "t", Type: types.Boolean}, {Name: "day", Type: types.Date}, {Name: "ts", Type: types.Timestamp},
		},
		TimeCol: 8,
	}
}

// FuzzDecode: any bytes either decode into a row of the declared kinds, or
// fail with a DecodeError that classifies as ErrMalformed; never a panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"s":"x","i":1,"b":-9223372036854775808,"h":170141183460469231731687303715884105727,"d":1e308,"m":"12.3456","t":true,"day":"2026-07-18","ts":"2026-07-18 10:00:00.123456"}`,
		`{"ts":"2026-07-18T10:00:00+05:30"}`, `{"ts":"2026-07-18"}`, `{"ts":null}`, `{}`, `[]`, `null`, `"x"`, `{"ts":"x"`,
		`{"i":2147483648,"ts":"2026-07-18 10:00:00"}`, `{"m":1e400,"ts":"2026-07-18 10:00:00"}`, `{"d":-0,"ts":"0001-01-01 00:00:00"}`,
		`{"s":"\ud800","ts":"-2026-07-18 10:00:00"}`, `{"ts":"2026-07-18 24:00:00"}`, `{"ts":"2026-07-18 10:00:00.1234567891"}`,
		`{"m":"1/3","ts":"2026-07-18 10:00:00"}`, "{\"s\":\"\xff\",\"ts\":\"2026-07-18 10:00:00\"}",
		`{"j":{"a":[1,{"b":"\u00e9"}]},"s":"x","ts":"2026-07-18 10:00:00"}`, `{"j":"str","ts":"2026-07-18 10:00:00"}`, `{"j":1e999,"ts":"2026-07-18 10:00:00"}`,
	} {
		f.Add([]byte(s))
	}
	d := NewDecoder(fuzzSource())
	jsrc := fuzzSource()
	jsrc.Columns = append(jsrc.Columns, plan.Column{Name: "j", Type: types.Varchar, JSON: true})
	jd := NewDecoder(jsrc)
	// The same line through a source with derived columns (computed and
	// TIMESTAMP(3)).
	dprog, err := plan.Compile(`CREATE SOURCE dv (s VARCHAR, b BIGINT, ts TIMESTAMP(3), c AS TO_TIMESTAMP_LTZ(b, 3), u AS upper(s),
  WATERMARK FOR c AS c); SELECT count(*) FROM dv`, plan.CompileOptions{})
	if err != nil {
		f.Fatal(err)
	}
	dd := NewDecoder(dprog.Queries[0].Source)
	f.Add([]byte(`{"s":"é","b":1784368800123,"ts":"2026-07-18 10:00:00.1235"}`))
	f.Add([]byte(`{"b":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if drow, err := dd.Decode(line); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("derived source: error %v is not malformed", err)
			}
		} else {
			if drow[3].Null || drow[3].I != drow[1].I*1000 {
				t.Fatalf("computed event time %v from %v", drow[3], drow[1])
			}
			if !drow[2].Null && drow[2].I%1000 != 0 {
				t.Fatalf("TIMESTAMP(3) cell %d has more than 3 digits", drow[2].I)
			}
			if drow[0].Null != drow[4].Null || !drow[0].Null && drow[4].Kind != types.KindVarchar {
				t.Fatalf("upper(s) = %v for s = %v", drow[4], drow[0])
			}
		}
		row, err := d.Decode(line)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not a DecodeError", err)
			}
			return
		}
		for i, c := range d.src.Columns {
			if !row[i].Null && row[i].Kind != c.Type.Kind {
				t.Fatalf("column %s: got kind %s", c.Name, row[i].Kind)
			}
		}
		if row[8].Null {
			t.Fatal("a decoded row has a NULL event time")
		}
		// The same line through a source whose j column is JSON: the
		// column holds valid JSON text.
		if jrow, err := jd.Decode(line); err == nil {
			if j := jrow[len(jrow)-1]; !j.Null {
				if err := fastjson.Validate(j.S); err != nil {
					t.Fatalf("JSON column holds %q: %v", j.S, err)
				}
			}
		}
	})
}

func TestDecodeValues(t *testing.T) {
	d := NewDecoder(fuzzSource())
	row, err := d.Decode([]byte(`{"s":"a\"b","i":-5,"b":42,"h":-170141183460469231731687303715884105728,"d":0.1,"m":2.0005,"t":false,"day":"1969-12-31","ts":"1969-12-31T23:59:59.5Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if row[0].S != `a"b` || row[1].I != -5 || row[2].I != 42 || row[4].F != 0.1 || row[6].Bool() || row[7].I != -1 || row[8].I != -500000 {
		t.Fatalf("bad row %+v", row)
	}
	if got := row[3].Int128().String(); got != "-170141183460469231731687303715884105728" {
		t.Fatalf("hugeint %s", got)
	}
	if got := row[5].Int128().String(); got != "2001" { // 2.0005 rounds half away from zero to 2.001
		t.Fatalf("decimal unscaled %s", got)
	}
}

// TestDecodeJSONColumn: a JSON column keeps the field's JSON text, whatever
// its type; JSON null and an absent field are SQL NULL; two JSON columns do
// not overwrite each other.
func TestDecodeJSONColumn(t *testing.T) {
	src := &plan.Source{Name: "ev", TimeCol: -1, Columns: []plan.Column{
		{Name: "a", Type: types.Varchar, JSON: true}, {Name: "b", Type: types.Varchar, JSON: true}, {Name: "n", Type: types.BigInt},
	}}
	d := NewDecoder(src)
	for _, c := range []struct{ in, a, b string }{
		{`{"a":{"x":[1,2,{"y":"é"}]},"b":"s\"q","n":1}`, `{"x":[1,2,{"y":"é"}]}`, `"s\"q"`},
		{`{"a":1.50,"b":true}`, `1.5`, `true`}, // canonical JSON text, as DuckDB prints it
		{`{"a":null}`, "NULL", "NULL"},
		{`{"a":[],"b":{}}`, `[]`, `{}`},
	} {
		row, err := d.Decode([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		for i, want := range []string{c.a, c.b} {
			got := "NULL"
			if !row[i].Null {
				got = row[i].S
			}
			if got != want {
				t.Errorf("%s column %d: got %s, want %s", c.in, i, got, want)
			}
		}
	}
}

func sameCell(a, b types.Value) bool {
	if a.Null || b.Null {
		return a.Null == b.Null && a.Kind == b.Kind
	}
	if a.Kind == types.KindDouble {
		return math.Float64bits(a.F) == math.Float64bits(b.F)
	}
	return a == b
}

// FuzzScanMatchesFastjson: whenever the hand-written scanner decodes a line,
// the reference (fastjson) decoder decodes it to the same row; lines the
// scanner declines go to the reference, so the two paths never disagree.
func FuzzScanMatchesFastjson(f *testing.F) {
	for _, s := range []string{
		`{"s":"x","i":1,"b":-9223372036854775808,"d":1e308,"t":true,"day":"2026-07-18","ts":"2026-07-18 10:00:00.123456"}`,
		`{"s":"a\"b\\c\u00e9\ud83d\ude00","ts":"2026-07-18T10:00:00Z","extra":{"x":[1,2,{"y":null}]},"d":-0.0}`,
		` { "ts" : "2026-07-18 10:00:00" , "d" : 12.5e-3 , "s" : "" } `,
		`{"ts":"2026-07-18 10:00:00","ts":"2027-01-01 00:00:00"}`, `{"ts":"2026-07-18 10:00:00","x":tru}`,
		`{"ts":"2026-07-18 10:00:00","d":01}`, `{"ts":"2026-07-18 10:00:00","s":"\ud800"}`, `{"ts":"2026-07-18 10:00:00"} x`,
		"{\"ts\":\"2026-07-18 10:00:00\",\"s\":\"tab\there\"}", `{"ts":"2026-07-18 10:00:00","i":2147483648}`,
		`{"ts":"2026-07-18 10:00:00","b":1.0}`, `{"ts":"2026-07-18 10:00:00","d":1.}`, `{"ts":"2026-07-18 10:00:00","t":null}`,
		`{"ts":"2026-07-18 10:00:00","d":"1.5","b":"9007199254740993","i":" 42 ","h":"-12345678901234567890123","m":" 2.5"}`,
		`{"ts":"2026-07-18 10:00:00","d":"-Infinity","b":"0x7F","i":"0b101"}`, `{"ts":"2026-07-18 10:00:00","d":"NaN","b":"-0"}`,
		`{"ts":"2026-07-18 10:00:00","d":"1e400","b":"00042"}`, `{"ts":"2026-07-18 10:00:00","d":" .5","i":"2147483648"}`,
		`{"ts":"2026-07-18 10:00:00","d":"4\u0032","b":"4\u0032"}`, `{"ts":"2026-07-18 10:00:00","d":"1.5 ","b":"1.5"}`,
		`{"ts":"2026-07-18 10:00:00","d":Infinity}`, `{"ts":"2026-07-18 10:00:00","d":-Infinity,"z":[NaN,{"y":-inf}]}`,
		`{"ts":"2026-07-18 10:00:00","d":-NaN}`, `{"ts":"2026-07-18 10:00:00","d":+inf}`, `{"ts":"2026-07-18 10:00:00","d":Infinit}`,
		`{"ts":"2026-07-18 10:00:00","d":--inf}`, `{"ts":"2026-07-18 10:00:00","i":NaN}`, "{\"ts\":\"2026-07-18 10:00:00\",\"s\":\"a\xffb\xe2\x82\"}",
		`{"ts":"2026-07-18 10:00:00","s":"\ud83d\u0041"}`, `{"ts":"2026-07-18 10:00:00","s":"\\ud800"}`,
		// strings longer than a word (scanned eight bytes at a time), with a
		// non-ASCII or invalid byte or an escape past the first word
		"{\"ts\":\"2026-07-18 10:00:00\",\"s\":\"abcdefgh\xe9ijklmnop\"}", "{\"ts\":\"2026-07-18 10:00:00\",\"s\":\"abcdefghij\xffklmnop\"}",
		`{"ts":"2026-07-18 10:00:00.123456","s":"abcdefghijklmnop\"q","d":123.45}`,
	} {
		f.Add([]byte(s))
	}
	src := fuzzSource()
	scan := NewDecoder(src)
	ref := NewDecoder(src)
	ref.noScan = true
	f.Fuzz(func(t *testing.T, line []byte) {
		row, err := scan.scanDecode(line)
		if err != nil {
			return
		}
		got := append([]types.Value(nil), row...)
		for i := range got {
			got[i].S = strings.Clone(got[i].S)
		}
		want, rerr := ref.Decode(line)
		if rerr != nil {
			t.Fatalf("scanner decoded %q, the reference rejects it: %v", line, rerr)
		}
		for i := range got {
			if !sameCell(got[i], want[i]) {
				t.Fatalf("%q: column %s: scanner %+v, reference %+v", line, src.Columns[i].Name, got[i], want[i])
			}
		}
	})
}

// The scanner remembers the previous line's keys by position; whatever
// came before, each line decodes as the reference decodes it alone.
func TestScanKeyCacheAcrossLines(t *testing.T) {
	lines := []string{
		`{"s":"x","i":1,"d":2.5,"ts":"2026-07-18 10:00:00"}`,
		`{"s2":"x","i":1,"ts":"2026-07-18 10:00:00","s":"y"}`,
		`{"i":1,"s":"x","ts":"2026-07-18 10:00:00"}`,
		`{"\u0073":"esc","ts":"2026-07-18 10:00:00","i":3}`,
		`{ "s" :"sp","ts":"2026-07-18 10:00:00"}`,
		`{"ts":"2026-07-18 10:00:00"}`,
		`{"s":"x","s":"dup","ts":"2026-07-18 10:00:00"}`,
		`{"ts":"2026-07-18 10:00:00","t":true,"day":"2026-07-18","b":-1}`,
		// The cached key takes its ':' along; these differ from the cached
		// spelling only around or in place of the colon.
		`{"s" : "x","i" :1,"ts": "2026-07-18 10:00:00"}`,
		`{"s"  :"x","i":1,"ts"` + "\t" + `:"2026-07-18 10:00:00"}`,
		`{"s","i":1,"ts":"2026-07-18 10:00:00"}`,
		`{"s"::"x","ts":"2026-07-18 10:00:00"}`,
		`{"s" "x","ts":"2026-07-18 10:00:00"}`,
		`{"s":"x","i" 1,"ts":"2026-07-18 10:00:00"}`,
		`{"s"`,
		`{"s":`,
		`{"s":"x","ts"`,
	}
	src := fuzzSource()
	ref := NewDecoder(src)
	ref.noScan = true
	for _, a := range lines {
		for _, b := range lines {
			scan := NewDecoder(src)
			for _, line := range []string{a, b, a} {
				got, err := scan.Decode([]byte(line))
				cp := append([]types.Value(nil), got...)
				for i := range cp {
					cp[i].S = strings.Clone(cp[i].S)
				}
				want, rerr := ref.Decode([]byte(line))
				if (err == nil) != (rerr == nil) {
					t.Fatalf("after %q: %q: scanner error %v, reference %v", a, line, err, rerr)
				}
				for i := range cp {
					if err == nil && !sameCell(cp[i], want[i]) {
						t.Fatalf("after %q: %q: column %s: scanner %+v, reference %+v", a, line, src.Columns[i].Name, cp[i], want[i])
					}
				}
			}
		}
	}
}

// simpleFloat is ParseFloat's answer, bit for bit, wherever it answers.
func FuzzSimpleFloat(f *testing.F) {
	for _, s := range []string{"153.98", "-0.0", "0", "123456789012345", "1234567890123456", "0.1", "9007199254740993", "-12.5", "1.", ".5", "1e5", "0.000000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, ok := simpleFloat([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("simpleFloat(%q) = %v, ParseFloat fails: %v", s, x, err)
		}
		if math.Float64bits(x) != math.Float64bits(want) {
			t.Fatalf("simpleFloat(%q) = %v, ParseFloat %v", s, x, want)
		}
	})
}
