package exec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// maxMessageBytes bounds the text of one decode error: a message echoes
// parts of the event, and an event may be megabytes.
const maxMessageBytes = 320

// clipMessage keeps the start and the end of a long message (the reason is
// at one or the other) and says how much it cut, at UTF-8 boundaries.
func clipMessage(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	head, tail := 200, 80
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s ...(%d bytes cut)... %s", s[:head], t-head, s[t:])
}

// shortJSONError drops the middle of fastjson's error chain, which holds
// one "cannot parse array: cannot parse array value:" per nesting level:
// the first two steps and the reason stay.
func shortJSONError(msg string) string {
	parts := strings.Split(msg, ": ")
	n := 0
	for n < len(parts)-1 && strings.HasPrefix(parts[n], "cannot parse ") {
		n++
	}
	if n <= 4 {
		return msg
	}
	return strings.Join(parts[:2], ": ") + ": ... (" + strconv.Itoa(n-3) + " more levels) ...: " + strings.Join(parts[n-1:], ": ")
}

// Decoder turns JSON-lines events into source rows. It uses fastjson rather
// than encoding/json: encoding/json costs about 2 µs per event, several times
// the whole aggregation (see shared/docs/performance.md).
//
// A Decoder is not safe for concurrent use. The row it returns, and the
// strings in it, alias the Decoder's buffers and stay valid only until the
// next Decode; the operator copies what it keeps.
type Decoder struct {
	src     *plan.Source
	p       fastjson.Parser
	row     []types.Value
	scratch []byte
	jsonBuf []byte // canonical text of JSON columns for the current event
	jsonRaw []byte // one JSON column's text as the line spells it
	// nonFinite holds a line respelled by rewriteNonFinite.
	nonFinite []byte
	csv       *csvDecoder // format = 'csv'
	bad       error       // a source the decoder cannot read (bad CSV options)

	// scanDecode's state: column names, which columns a line set, and
	// buffers for unescaped strings (one per column, since a row may alias
	// several at once).
	names      []string
	colIndex   map[string]int // name -> column, for a source of many columns
	vals       []*fastjson.Value
	seen       []bool
	keyScratch []byte
	keyCache   []cachedKey // the previous line's keys, by position
	valScratch [][]byte
	noScan     bool   // tests: force the reference path
	used       []bool // columns to convert; nil: all
	ts         types.TimestampParser

	// derive, for a source with computed or TIMESTAMP(p) columns: the
	// decoder reads the physical columns (src is then derive.Physical())
	// and derive makes the source's row.
	derive *Deriver
}

// NewDecoder returns a decoder for src's columns and format option
// ('jsonl', the default, or 'csv'). A source it cannot read makes every
// Decode fail with the reason (see Err).
func NewDecoder(src *plan.Source) *Decoder {
	dv := NewDeriver(src)
	if dv != nil {
		src = dv.Physical()
	}
	d := newJSONDecoder(src)
	d.derive = dv
	switch f := strings.ToLower(src.Options["format"]); f {
	case "", "jsonl", "json", "ndjson":
	case "csv":
		d.csv, d.bad = newCSVDecoder(src)
	default:
		d.bad = fmt.Errorf("exec: source %s: unknown format %q (want jsonl or csv)", src.Name, f)
	}
	return d
}

// NewMessageDecoder returns a decoder for a source whose events arrive one
// per message (a Kafka record value) encoded as f says, whatever src's own
// format option: a message is always a whole event, and CSV fields map to
// the columns by position (see MessageFormat). A decoder that cannot read
// src makes every Decode fail with the reason (see Err).
func NewMessageDecoder(src *plan.Source, f MessageFormat) *Decoder {
	dv := NewDeriver(src)
	if dv != nil {
		src = dv.Physical()
	}
	d := newJSONDecoder(src)
	d.derive = dv
	if f.CSV {
		d.csv, d.bad = newCSVMessageDecoder(src, f)
	}
	return d
}

func newJSONDecoder(src *plan.Source) *Decoder {
	d := &Decoder{src: src, row: make([]types.Value, len(src.Columns)), vals: make([]*fastjson.Value, len(src.Columns)),
		seen: make([]bool, len(src.Columns)), valScratch: make([][]byte, len(src.Columns))}
	if len(src.Columns) > linearColumns {
		d.colIndex = make(map[string]int, len(src.Columns))
	}
	for i, c := range src.Columns {
		d.names = append(d.names, c.Name)
		if _, dup := d.colIndex[c.Name]; d.colIndex != nil && !dup {
			d.colIndex[c.Name] = i
		}
		// A JSON column keeps the value's canonical JSON text; the scanner
		// does not produce that text, so such sources take the reference
		// path.
		if c.JSON {
			d.noScan = true
		}
	}
	return d
}

// NewQueryDecoder returns a decoder that converts only the source columns
// q reads (q.UsedColumns); the others are skipped as JSON and left NULL, so
// a column the query never reads can neither cost time nor reject an event.
func NewQueryDecoder(q *plan.Query) *Decoder {
	d := NewDecoder(q.Source)
	d.used = q.UsedColumns
	if d.derive != nil {
		d.used = d.derive.SetUsed(q.UsedColumns)
	}
	return d
}

// Err reports why the decoder cannot read its source, if it cannot.
func (d *Decoder) Err() error { return d.bad }

// IsCSV reports whether the source is CSV (records may span lines).
func (d *Decoder) IsCSV() bool { return d.csv != nil }

// UseRow makes the decoder write each row it decodes into row, whose
// length is Width, until the next UseRow, and returns the row it wrote
// into before: a host keeping a block of rows decodes each in its place
// rather than copying it there. With computed columns, Decode still
// returns the deriver's row, not row.
func (d *Decoder) UseRow(row []types.Value) []types.Value {
	old := d.row
	d.row = row
	return old
}

// Width is the number of cells of the rows the decoder writes (UseRow).
func (d *Decoder) Width() int { return len(d.row) }

// Converts reports whether the decoder converts column i of its rows; a
// column it does not convert is always NULL.
func (d *Decoder) Converts(i int) bool { return d.used == nil || i < len(d.used) && d.used[i] }

// Decode parses one event: a JSON object, or a CSV record. Absent fields and
// nulls become SQL NULL; a missing or NULL event time is an error, because
// the event could not be placed in time. For CSV with a header, the first
// record is the header: Decode returns a nil row and no error for it (for a
// message decoder, every header record it is told to skip).
func (d *Decoder) Decode(line []byte) ([]types.Value, error) {
	if d.derive != nil {
		row, err := d.decode(line)
		if row == nil || err != nil {
			return row, err
		}
		return d.derive.Apply(row)
	}
	return d.decode(line)
}

// decode decodes the columns of d.src (the physical ones, with a Deriver).
func (d *Decoder) decode(line []byte) ([]types.Value, error) {
	if d.bad != nil {
		return nil, d.bad
	}
	if d.csv != nil {
		return d.csv.decode(line, d.row)
	}
	if !d.noScan {
		if row, err := d.scanDecode(line); err == nil {
			return row, nil
		}
	}
	return d.decodeReference(line)
}

// decodeReference decodes with fastjson. It is the definition of what a
// line means (scanDecode must agree with it) and the path for every line
// scanDecode does not take.
func (d *Decoder) decodeReference(line []byte) ([]types.Value, error) {
	if off := loneSurrogate(line); off >= 0 {
		return nil, &DecodeError{Msg: fmt.Sprintf("bad JSON: lone surrogate escape %s at byte %d "+
			"(a character above U+FFFF is written as a pair of escapes, a high one \\ud800-\\udbff then a low one \\udc00-\\udfff)", line[off:off+6], off)}
	}
	v, err := d.p.ParseBytes(line)
	if err != nil {
		// fastjson reads nan and inf in any case, but not Infinity or
		// -Infinity: spell the non-finite numbers the way it reads them
		// and try again. The error stays the first parse's.
		if fixed, ok := rewriteNonFinite(d.nonFinite[:0], line); ok {
			d.nonFinite = fixed
			if v2, err2 := d.p.ParseBytes(fixed); err2 == nil {
				v, err = v2, nil
			}
		}
		if err != nil {
			return nil, &DecodeError{Msg: "bad JSON: " + shortJSONError(err.Error())}
		}
	}
	obj, err := v.Object()
	if err != nil {
		return nil, &DecodeError{Msg: "an event must be a JSON object, got " + v.Type().String()}
	}
	if tok, off := badNumber(line); off >= 0 {
		return nil, numberError(tok, off)
	}
	d.fieldValues(obj)
	d.jsonBuf = d.jsonBuf[:0]
	for i := range d.src.Columns {
		c := &d.src.Columns[i]
		if d.used != nil && !d.used[i] {
			d.row[i] = types.NullOf(c.Type)
			continue
		}
		f := d.vals[i]
		if c.JSON && f != nil {
			// Keep the value's JSON text; -> and ->> read paths from it.
			// The text is taken before anything asks f its type: fastjson
			// unescapes a string when asked, and would then write it back
			// with its own escapes. The cell is the value's canonical
			// text (DuckDB's), so the spellings of one value are one
			// cell; the line parser is lenient inside strings (raw control
			// characters pass), the canonical form is checked strictly,
			// so the column holds JSON the path operators can read.
			// Earlier cells keep pointing at the old array if this append
			// grows the buffer, so they stay valid.
			d.jsonRaw = f.MarshalTo(d.jsonRaw[:0])
			if string(d.jsonRaw) == "null" {
				d.row[i] = types.NullOf(c.Type)
				continue
			}
			n := len(d.jsonBuf)
			var err error
			if d.jsonBuf, err = plan.AppendCanonicalJSON(d.jsonBuf, d.jsonRaw); err != nil {
				return nil, &DecodeError{Column: c.Name, Msg: "not valid JSON: " + err.Error()}
			}
			d.row[i] = types.Value{Kind: types.KindVarchar, S: bytesString(d.jsonBuf[n:])}
			continue
		}
		if f == nil || f.Type() == fastjson.TypeNull {
			if i == d.src.TimeCol {
				if f == nil {
					return nil, &DecodeError{Column: c.Name, Msg: "missing event time"}
				}
				return nil, &DecodeError{Column: c.Name, Msg: "event time is null"}
			}
			d.row[i] = types.NullOf(c.Type)
			continue
		}
		cell, derr := d.convert(f, c.Type)
		if derr != "" {
			return nil, &DecodeError{Column: c.Name, Msg: derr}
		}
		d.row[i] = cell
	}
	return d.row, nil
}

// fieldValues finds each column's value among obj's fields in one pass
// over them (the first field of a name wins, as in fastjson's Get, which
// searches the fields once per column).
func (d *Decoder) fieldValues(obj *fastjson.Object) {
	clear(d.vals)
	obj.Visit(func(k []byte, v *fastjson.Value) {
		if c := d.columnIndex(k); c >= 0 && d.vals[c] == nil {
			d.vals[c] = v
		}
	})
}

func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (d *Decoder) convert(f *fastjson.Value, t types.Type) (types.Value, string) {
	switch t.Kind {
	case types.KindVarchar:
		b, err := f.StringBytes()
		if err != nil {
			return types.Value{}, "expected a string, got " + f.Type().String()
		}
		return types.Value{Kind: types.KindVarchar, S: bytesString(repairUTF8(b))}, ""
	case types.KindTimestamp:
		b, err := f.StringBytes()
		if err != nil {
			return types.Value{}, "expected a timestamp string, got " + f.Type().String()
		}
		us, perr := d.ts.Parse(b)
		if perr != nil {
			return types.Value{}, perr.Error()
		}
		return types.TS(us), ""
	case types.KindDate:
		b, err := f.StringBytes()
		if err != nil {
			return types.Value{}, "expected a date string, got " + f.Type().String()
		}
		days, perr := types.ParseDate(b)
		if perr != nil {
			return types.Value{}, perr.Error()
		}
		return types.DateDays(days), ""
	case types.KindDouble:
		if f.Type() == fastjson.TypeString {
			b, _ := f.StringBytes()
			return quotedNumber(b, t)
		}
		if f.Type() != fastjson.TypeNumber {
			return types.Value{}, "expected a number, got " + f.Type().String()
		}
		// fastjson's own float parser takes a fast path that is exact only
		// for short mantissas; strconv is correctly rounded for all input.
		d.scratch = f.MarshalTo(d.scratch[:0])
		if x, n := nonFinite(d.scratch); n == len(d.scratch) {
			return types.Float(x), ""
		}
		x, err := strconv.ParseFloat(bytesString(d.scratch), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return types.Value{}, "bad number: " + err.Error()
		}
		return types.Float(x), ""
	case types.KindInteger, types.KindBigInt:
		if f.Type() == fastjson.TypeString {
			b, _ := f.StringBytes()
			return quotedNumber(b, t)
		}
		if f.Type() != fastjson.TypeNumber {
			return types.Value{}, "expected an integer, got " + f.Type().String()
		}
		d.scratch = f.MarshalTo(d.scratch[:0])
		x, err := strconv.ParseInt(bytesString(d.scratch), 10, 64)
		if err != nil {
			return types.Value{}, fmt.Sprintf("expected an integer, got %s", d.scratch)
		}
		if t.Kind == types.KindInteger && (x < math.MinInt32 || x > math.MaxInt32) {
			return types.Value{}, fmt.Sprintf("%d is out of range for INTEGER", x)
		}
		return types.Value{Kind: t.Kind, I: x}, ""
	case types.KindHugeInt:
		if f.Type() == fastjson.TypeString {
			b, _ := f.StringBytes()
			return quotedNumber(b, t)
		}
		if f.Type() != fastjson.TypeNumber {
			return types.Value{}, "expected an integer, got " + f.Type().String()
		}
		d.scratch = f.MarshalTo(d.scratch[:0])
		b, ok := new(big.Int).SetString(string(d.scratch), 10)
		if !ok {
			return types.Value{}, fmt.Sprintf("expected an integer, got %s", d.scratch)
		}
		x, ok := types.Int128FromBig(b)
		if !ok {
			return types.Value{}, fmt.Sprintf("%s is out of range for HUGEINT", d.scratch)
		}
		return types.Huge(x), ""
	case types.KindDecimal:
		if f.Type() != fastjson.TypeNumber && f.Type() != fastjson.TypeString {
			return types.Value{}, "expected a decimal number, got " + f.Type().String()
		}
		if f.Type() == fastjson.TypeString {
			b, _ := f.StringBytes()
			return quotedNumber(b, t)
		}
		d.scratch = f.MarshalTo(d.scratch[:0])
		x, err := types.ParseDecimal(d.scratch, t.Width, t.Scale)
		if err != nil {
			return types.Value{}, err.Error()
		}
		return types.Dec(x, t.Scale), ""
	case types.KindBoolean:
		switch f.Type() {
		case fastjson.TypeTrue:
			return types.Bool(true), ""
		case fastjson.TypeFalse:
			return types.Bool(false), ""
		}
		return types.Value{}, "expected true or false, got " + f.Type().String()
	}
	return types.Value{}, "columns of type " + t.String() + " cannot be read from JSON"
}
