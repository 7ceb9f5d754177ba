package exec

import (
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// csvDecoder reads one CSV record per event (RFC 4180: a delimiter, double
// quotes, "" inside quotes; a quoted field may span lines, so a record is
// whatever the host hands over, see CSVRecordComplete). With a header, the
// first record names the columns and fields map by name; without one they
// map by position. An empty unquoted field is NULL, as in DuckDB's read_csv.
// Cells convert from text exactly as SQL's CAST(text AS type) does.
type csvDecoder struct {
	src       *plan.Source
	delim     byte
	header    bool
	gotHeader bool
	colOf     []int // field index -> column ordinal (-1: not declared)
	parsers   []func(string) (types.Value, error)
	fields    []string
	quoted    []bool
	buf       []byte
}

func newCSVDecoder(src *plan.Source) (*csvDecoder, error) {
	d := &csvDecoder{src: src, delim: ',', header: true}
	if v, ok := src.Options["delimiter"]; ok {
		if v == `\t` || v == "tab" {
			v = "\t"
		}
		if len(v) != 1 || v[0] == '"' || v[0] == '\n' || v[0] == '\r' {
			return nil, fmt.Errorf("exec: source %s: delimiter must be one character other than a quote or newline, got %q", src.Name, v)
		}
		d.delim = v[0]
	}
	if v, ok := src.Options["header"]; ok {
		switch strings.ToLower(v) {
		case "true", "yes", "1":
		case "false", "no", "0":
			d.header = false
		default:
			return nil, fmt.Errorf("exec: source %s: header must be true or false, got %q", src.Name, v)
		}
	}
	for _, c := range src.Columns {
		p, ok := plan.TextParser(c.Type)
		if !ok {
			return nil, fmt.Errorf("exec: source %s: column %s of type %s cannot be read from CSV", src.Name, c.Name, c.Type)
		}
		d.parsers = append(d.parsers, p)
	}
	if !d.header {
		for i := range src.Columns {
			d.colOf = append(d.colOf, i)
		}
	}
	return d, nil
}

// CSVRecordComplete reports whether b holds a whole CSV record: an even
// number of double quotes, so no quoted field is still open.
func CSVRecordComplete(b []byte) bool {
	n := 0
	for _, c := range b {
		if c == '"' {
			n++
		}
	}
	return n%2 == 0
}

// split parses one record into d.fields (aliasing d.buf).
func (d *csvDecoder) split(rec []byte) error {
	d.fields, d.quoted, d.buf = d.fields[:0], d.quoted[:0], d.buf[:0]
	starts := make([]int, 0, 16) // offsets of each field in buf
	i := 0
	for {
		start := len(d.buf)
		quoted := false
		if i < len(rec) && rec[i] == '"' {
			quoted = true
			i++
			for {
				if i >= len(rec) {
					return fmt.Errorf("unterminated quoted field %d", len(starts)+1)
				}
				if rec[i] == '"' {
					if i+1 < len(rec) && rec[i+1] == '"' {
						d.buf = append(d.buf, '"')
						i += 2
						continue
					}
					i++
					break
				}
				d.buf = append(d.buf, rec[i])
				i++
			}
			if i < len(rec) && rec[i] != d.delim {
				return fmt.Errorf("field %d: text after a closing quote", len(starts)+1)
			}
		} else {
			for i < len(rec) && rec[i] != d.delim {
				if rec[i] == '"' {
					return fmt.Errorf("field %d: a quote inside an unquoted field", len(starts)+1)
				}
				d.buf = append(d.buf, rec[i])
				i++
			}
		}
		starts = append(starts, start)
		d.quoted = append(d.quoted, quoted)
		if i >= len(rec) {
			break
		}
		i++ // the delimiter
	}
	for k, s := range starts {
		end := len(d.buf)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		d.fields = append(d.fields, bytesString(d.buf[s:end]))
	}
	return nil
}

// decode returns the row, or nil and no error for the header record.
func (d *csvDecoder) decode(rec []byte, row []types.Value) ([]types.Value, error) {
	if err := d.split(rec); err != nil {
		return nil, &DecodeError{Msg: "bad CSV: " + err.Error()}
	}
	if d.header && !d.gotHeader {
		d.gotHeader = true
		d.colOf = d.colOf[:0]
		seen := map[int]bool{}
		for _, name := range d.fields {
			i := d.src.ColumnIndex(strings.TrimSpace(name))
			if i >= 0 && seen[i] {
				return nil, &DecodeError{Msg: fmt.Sprintf("CSV header names column %q twice", name)}
			}
			seen[i] = true
			d.colOf = append(d.colOf, i)
		}
		if tc := d.src.TimeCol; tc >= 0 && !seen[tc] {
			return nil, &DecodeError{Column: d.src.Columns[tc].Name, Msg: "the CSV header has no event-time column"}
		}
		return nil, nil
	}
	if len(d.fields) != len(d.colOf) {
		return nil, &DecodeError{Msg: fmt.Sprintf("CSV record has %d fields, expected %d", len(d.fields), len(d.colOf))}
	}
	for i, c := range d.src.Columns {
		row[i] = types.NullOf(c.Type)
	}
	for f, ci := range d.colOf {
		if ci < 0 {
			continue
		}
		text := d.fields[f]
		if text == "" && !d.quoted[f] {
			continue // NULL
		}
		v, err := d.parsers[ci](text)
		if err != nil {
			return nil, &DecodeError{Column: d.src.Columns[ci].Name, Msg: err.Error()}
		}
		row[ci] = v
	}
	if tc := d.src.TimeCol; tc >= 0 && row[tc].Null {
		return nil, &DecodeError{Column: d.src.Columns[tc].Name, Msg: "missing event time"}
	}
	return row, nil
}
