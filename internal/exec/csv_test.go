package exec

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// orderSource is the source of testdata/script/csv.txt, in declared order.
func orderSource() *plan.Source {
	return &plan.Source{Name: "orders", TimeCol: 4, Columns: []plan.Column{
		{Name: "merchant", Type: types.Varchar}, {Name: "amount", Type: types.Decimal(10, 2)},
		{Name: "paid", Type: types.Boolean}, {Name: "note", Type: types.Varchar}, {Name: "ts", Type: types.Timestamp},
	}}
}

// fileTwin is the file CSV decoder that reads the same fields by position
// (header = 'false'): every record a message decoder accepts, the file
// source must read to the same row, since both convert cells one way.
func fileTwin(src *plan.Source, delim byte) *Decoder {
	twin := *src
	twin.Options = map[string]string{"format": "csv", "header": "false", "delimiter": string(delim)}
	return NewDecoder(&twin)
}

// rowText renders a row as the changelog writes cells (null, "text", 10.50).
func rowText(row []types.Value) string {
	var b []byte
	for i, v := range row {
		if i > 0 {
			b = append(b, " | "...)
		}
		b = changelog.AppendCell(b, v)
	}
	return string(b)
}

// sameRow compares rows cell by cell, doubles by their bits.
func sameRow(a, b []types.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameCell(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestCSVMessageDecode covers hostile cells: delimiters, doubled quotes and
// line breaks inside quotes, empty unquoted (NULL) against quoted empty
// (the empty string), trailing line breaks, and the malformed shapes.
func TestCSVMessageDecode(t *testing.T) {
	ts := "2026-07-18 10:00:00"
	for _, c := range []struct {
		name, in string
		delim    byte
		want     string // rowText, or "" when an error containing err is expected
		err      string
	}{
		{name: "plain", in: "acme,10.50,true,hi," + ts,
			want: `"acme" | 10.50 | true | "hi" | "2026-07-18 10:00:00"`},
		{name: "delimiter in quotes, NULL vs empty", in: `"ac,me",1.005,,""," 2026-07-18T10:00:01Z"`,
			want: `"ac,me" | 1.01 | null | "" | "2026-07-18 10:00:01"`},
		{name: "doubled quotes, newline in quotes, CRLF end", in: "\"say \"\"hi\"\"\",1,f,\"line1\nline2\r\nline3\"," + ts + "\r\n",
			want: `"say \"hi\"" | 1.00 | false | "line1\nline2\r\nline3" | "2026-07-18 10:00:00"`},
		{name: "LF end", in: "a,,,," + ts + "\n", want: `"a" | null | null | null | "2026-07-18 10:00:00"`},
		{name: "CR end", in: "a,,,," + ts + "\r", want: `"a" | null | null | null | "2026-07-18 10:00:00"`},
		{name: "only quotes", in: `"""",,,"""""",` + ts, want: `"\"" | null | null | "\"\"" | "2026-07-18 10:00:00"`},
		{name: "spaces are data", in: " a , 1 ,true, x ," + ts, want: `" a " | 1.00 | true | " x " | "2026-07-18 10:00:00"`},
		{name: "semicolon", delim: ';', in: `"a;b";2;t;"c,d";` + ts, want: `"a;b" | 2.00 | true | "c,d" | "2026-07-18 10:00:00"`},
		{name: "tab", delim: '\t', in: "a b\t2\tt\t\"\t\"\t" + ts, want: `"a b" | 2.00 | true | "\t" | "2026-07-18 10:00:00"`},

		{name: "too few fields", in: "a,1,true," + ts, err: "CSV record has 4 fields, expected 5"},
		{name: "too many fields", in: "a,1,true,x," + ts + ",extra", err: "CSV record has 6 fields, expected 5"},
		{name: "bad cast", in: "a,ten,true,x," + ts, err: `column "amount": Conversion Error`},
		{name: "quoted empty is not NULL", in: `a,"",true,x,` + ts, err: `column "amount"`},
		{name: "bad boolean", in: "a,1,maybe,x," + ts, err: `column "paid"`},
		{name: "missing event time", in: "a,1,true,x,", err: `column "ts": missing event time`},
		{name: "quote in unquoted field", in: `a"b,1,true,x,` + ts, err: "a quote inside an unquoted field"},
		{name: "text after closing quote", in: `"a"b,1,true,x,` + ts, err: "text after a closing quote"},
		{name: "unterminated quote", in: `"a,1,true,x,` + ts + "\n", err: "unterminated quoted field"},
		{name: "two records in one value", in: "a,1,true,x," + ts + "\nb,2,true,y," + ts, err: "line break outside quotes"},
		{name: "bare CR inside", in: "a\rb,1,true,x," + ts, err: "line break outside quotes"},
		{name: "empty", in: "", err: "empty CSV record"},
		{name: "only a newline", in: "\r\n", err: "empty CSV record"},
		{name: "header", in: "merchant,amount,paid,note,ts", err: "a CSV header record"},
		{name: "header, spaced and quoted", in: ` Merchant ,"AMOUNT",paid,note,ts` + "\r\n", err: "a CSV header record"},
		{name: "header out of order is not a header", in: "amount,merchant,paid,note,ts", err: `column "amount"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := orderSource()
			f := MessageFormat{CSV: true, Delimiter: c.delim}
			d := NewMessageDecoder(src, f)
			if d.Err() != nil {
				t.Fatal(d.Err())
			}
			row, err := d.Decode([]byte(c.in))
			if c.err != "" {
				var de *DecodeError
				if err == nil || !errors.As(err, &de) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Decode(%q) = %v, %v; want a malformed error containing %q", c.in, row, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%q): %v", c.in, err)
			}
			if got := rowText(row); got != c.want {
				t.Fatalf("Decode(%q)\n got  %s\n want %s", c.in, got, c.want)
			}
			// The file source reads the same record to the same row.
			delim := c.delim
			if delim == 0 {
				delim = ','
			}
			frow, ferr := fileTwin(src, delim).Decode([]byte(strings.TrimRight(c.in, "\r\n")))
			if ferr != nil || !sameRow(frow, row) {
				t.Fatalf("the file CSV decoder reads %q as %v, %v; the message decoder as %s", c.in, rowText(frow), ferr, c.want)
			}
		})
	}
}

// TestCSVMessageHeader: a header record is skipped when the format says so
// (a nil row and no error), malformed otherwise, and recognized by content,
// not position, so it is handled alike wherever it appears.
func TestCSVMessageHeader(t *testing.T) {
	src := &plan.Source{Name: "kv", TimeCol: -1, Columns: []plan.Column{{Name: "k", Type: types.Varchar}, {Name: "v", Type: types.Varchar}}}
	skip := NewMessageDecoder(src, MessageFormat{CSV: true, SkipHeader: true})
	strict := NewMessageDecoder(src, MessageFormat{CSV: true})
	for _, in := range []string{"a,b", "k,v", "a,b", "K , V\n", `"k","v"`} {
		row, err := skip.Decode([]byte(in))
		isHeader := strings.EqualFold(strings.NewReplacer(" ", "", `"`, "", "\n", "").Replace(in), "k,v")
		if isHeader {
			if row != nil || err != nil {
				t.Errorf("skip: header %q: %v, %v; want nil, nil", in, row, err)
			}
			if _, err := strict.Decode([]byte(in)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "header") {
				t.Errorf("default: header %q: %v, want malformed", in, err)
			}
			continue
		}
		if err != nil || row[0].S != "a" || row[1].S != "b" {
			t.Errorf("skip: data %q: %v, %v", in, row, err)
		}
	}
}

func TestParseMessageFormat(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		want MessageFormat
	}{
		{nil, MessageFormat{}},
		{map[string]string{"format": "JSON"}, MessageFormat{}},
		{map[string]string{"format": "jsonl", "topic": "x"}, MessageFormat{}},
		{map[string]string{"format": "csv"}, MessageFormat{CSV: true, Delimiter: ','}},
		{map[string]string{"format": "CSV", "delimiter": ";", "header": "true"}, MessageFormat{CSV: true, Delimiter: ';', SkipHeader: true}},
		{map[string]string{"format": "csv", "delimiter": `\t`, "header": "no"}, MessageFormat{CSV: true, Delimiter: '\t'}},
		{map[string]string{"format": "csv", "delimiter": "TAB"}, MessageFormat{CSV: true, Delimiter: '\t'}},
		{map[string]string{"format": "csv", "delimiter": "space"}, MessageFormat{CSV: true, Delimiter: ' '}},
		{map[string]string{"format": "csv", "delimiter": "|"}, MessageFormat{CSV: true, Delimiter: '|'}},
	} {
		got, err := ParseMessageFormat(c.opts)
		if err != nil || got != c.want {
			t.Errorf("ParseMessageFormat(%v) = %+v, %v; want %+v", c.opts, got, err, c.want)
		}
	}
	for _, c := range []struct {
		opts map[string]string
		err  string
	}{
		{map[string]string{"format": "avro"}, `unknown format "avro"`},
		{map[string]string{"delimiter": ";"}, "delimiter is for format csv"},
		{map[string]string{"format": "json", "header": "true"}, "header is for format csv"},
		{map[string]string{"format": "csv", "delimiter": ""}, "delimiter must be one character"},
		{map[string]string{"format": "csv", "delimiter": ";;"}, "delimiter must be one character"},
		{map[string]string{"format": "csv", "delimiter": `"`}, "delimiter must be one character"},
		{map[string]string{"format": "csv", "delimiter": "\n"}, "delimiter must be one character"},
		{map[string]string{"format": "csv", "header": "maybe"}, "header must be true or false"},
	} {
		if _, err := ParseMessageFormat(c.opts); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseMessageFormat(%v) = %v, want an error containing %q", c.opts, err, c.err)
		}
	}
	// A format built by hand is checked by the decoder.
	if d := NewMessageDecoder(orderSource(), MessageFormat{CSV: true, Delimiter: '"'}); d.Err() == nil {
		t.Error("a quote as the delimiter: no error")
	}
}

// FuzzDecodeCSVMessage holds the Kafka CSV record decoder to three rules
// on any bytes: it never panics and fails only with a malformed-event
// error; a row it returns has the declared kinds and an event time; and
// it agrees with the file CSV decoder (fields by position) on every record
// both can read, refusing only what a record value must not be (empty,
// two records, a header). The seeds run in every `go test`.
func FuzzDecodeCSVMessage(f *testing.F) {
	ts := "2026-07-18 10:00:00"
	for _, s := range []string{
		"x,1,-9223372036854775808,170141183460469231731687303715884105727,1e308,12.3456,true,2026-07-18," + ts,
		`"a,b",,,,,,,,` + ts, `"a""b",2147483648,,,,,,,` + ts, "\"multi\nline\r\n\",,,,,,,," + ts + "\r\n",
		",,,,,,,,", "s,i,b,h,d,m,t,day,ts", `"",,,,-0,,f,1969-12-31,1969-12-31T23:59:59.5Z`,
		`x,1,1,1,1,1,t,2026-07-18,` + ts + "\nx,1,1,1,1,1,t,2026-07-18," + ts, `"x`, `x"`, `"x"y`, "", "\n", "\r", "k,v", "K , v\r\n",
		"x,,,,NaN,1e400,yes,0001-01-01,2026-07-18 24:00:00", "x,,,,,,,,2026-07-18 10:00:00.1234567891", "\xff,,,,,,,," + ts,
	} {
		f.Add([]byte(s))
	}
	src := fuzzSource()
	d := NewMessageDecoder(src, MessageFormat{CSV: true})
	file := fileTwin(src, ',')
	// An all-VARCHAR source, where a header could pass for data.
	kv := &plan.Source{Name: "kv", TimeCol: -1, Columns: []plan.Column{{Name: "k", Type: types.Varchar}, {Name: "v", Type: types.Varchar}}}
	kvStrict := NewMessageDecoder(kv, MessageFormat{CSV: true})
	kvSkip := NewMessageDecoder(kv, MessageFormat{CSV: true, SkipHeader: true})
	kvFile := fileTwin(kv, ',')
	f.Fuzz(func(t *testing.T, msg []byte) {
		check := func(name string, dec, twin *Decoder, s *plan.Source) (ok bool, text string) {
			row, err := dec.Decode(msg)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: %q: error %v is not a DecodeError", name, msg, err)
				}
				return false, err.Error()
			}
			if row == nil {
				return false, "skipped"
			}
			for i, c := range s.Columns {
				if !row[i].Null && row[i].Kind != c.Type.Kind {
					t.Fatalf("%s: %q: column %s: kind %s", name, msg, c.Name, row[i].Kind)
				}
			}
			if s.TimeCol >= 0 && row[s.TimeCol].Null {
				t.Fatalf("%s: %q: a row with a NULL event time", name, msg)
			}
			got := rowText(row)
			trimmed := strings.TrimSuffix(strings.TrimSuffix(string(msg), "\n"), "\r")
			frow, ferr := twin.Decode([]byte(trimmed))
			if ferr != nil || !sameRow(frow, row) {
				t.Fatalf("%s: %q: message decoder %s, file decoder %v, %v", name, msg, got, rowText(frow), ferr)
			}
			return true, got
		}
		check("typed", d, file, src)
		okStrict, strictText := check("kv", kvStrict, kvFile, kv)
		okSkip, skipText := check("kv skip", kvSkip, kvFile, kv)
		switch {
		case skipText == "skipped":
			if okStrict || !strings.Contains(strictText, "header") {
				t.Fatalf("%q: skipped as a header, but the strict decoder says %s", msg, strictText)
			}
		case okStrict != okSkip || strictText != skipText:
			t.Fatalf("%q: header handling changed a non-header: %s / %s", msg, strictText, skipText)
		}
		if !okStrict {
			// What the file reader would have taken as data, a record
			// value refuses only for being empty, two records or a header.
			trimmed := strings.TrimSuffix(strings.TrimSuffix(string(msg), "\n"), "\r")
			if _, ferr := kvFile.Decode([]byte(trimmed)); ferr == nil && trimmed != "" &&
				!strings.Contains(strictText, "line break outside quotes") && !strings.Contains(strictText, "header") {
				t.Fatalf("%q: the file decoder reads it, the message decoder says %s", msg, strictText)
			}
		}
	})
}
