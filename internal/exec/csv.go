package exec

import (
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// csvDecoder reads one CSV record per event (RFC 4180: a delimiter, double
// quotes, "" inside quotes; a quoted field may span lines, so a record is
// whatever the host hands over, see CSVRecordComplete). With a header, the
// first record names the columns and fields map by name; without one they
// map by position. An empty unquoted field is NULL, as in DuckDB's read_csv.
// Cells convert from text exactly as SQL's CAST(text AS type) does.
//
// In message mode (NewMessageDecoder: one record per Kafka record value)
// fields always map by position, no record is "the first", a trailing line
// break is dropped, a line break outside quotes is malformed (the message
// held more than one record), and a record that is the header row (see
// isHeader) is skipped or malformed as the MessageFormat says.
type csvDecoder struct {
	src        *plan.Source
	delim      byte
	header     bool
	gotHeader  bool
	message    bool  // one record per message (NewMessageDecoder)
	skipHeader bool  // message mode: a header record is skipped, not malformed
	colOf      []int // field index -> column ordinal (-1: not declared)
	parsers    []func(string) (types.Value, error)
	fields     []string
	quoted     []bool
	buf        []byte
}

// MessageFormat says how a source whose events arrive one per message (a
// Kafka record value) encodes each event. The zero value is JSON.
type MessageFormat struct {
	// CSV: each message is one CSV record (RFC 4180; a quoted field may
	// hold delimiters, "" and line breaks) whose fields are the source's
	// columns in declared order. Cells convert as a CSV file source's do:
	// an empty unquoted field is NULL, "" is the empty string, text casts
	// as CAST(text AS type). A trailing LF, CRLF or CR is dropped; an empty
	// message, a line break outside quotes or a wrong field count is
	// malformed. false: each message is one JSON object.
	CSV bool
	// Delimiter separates CSV fields. 0 means ','.
	Delimiter byte
	// SkipHeader: a CSV message that is the header row (every field,
	// trimmed, names the column at its position, case-insensitively) is
	// skipped: Decode returns a nil row and no error. Otherwise such a
	// message is malformed, so a header that reached the topic is never
	// read as data nor dropped unseen.
	SkipHeader bool
}

// ParseMessageFormat reads a message format from WITH options (keys
// lowercased): format (json, the default, jsonl, ndjson, or csv), and for
// CSV delimiter (one character other than a double quote, CR or LF; "\t"
// or "tab" for a tab, "space" for a space; default ",") and header (true:
// skip header records; false, the default: they are malformed). Other keys
// are ignored.
func ParseMessageFormat(opts map[string]string) (MessageFormat, error) {
	var f MessageFormat
	switch v := strings.ToLower(opts["format"]); v {
	case "", "jsonl", "json", "ndjson":
		for _, k := range []string{"delimiter", "header"} {
			if _, ok := opts[k]; ok {
				return f, fmt.Errorf("exec: option %s is for format csv, and the format is json", k)
			}
		}
		return f, nil
	case "csv":
		f.CSV = true
	default:
		return f, fmt.Errorf("exec: unknown format %q (want json or csv)", v)
	}
	f.Delimiter = ','
	if v, ok := opts["delimiter"]; ok {
		d, err := parseDelimiter(v)
		if err != nil {
			return f, fmt.Errorf("exec: %w", err)
		}
		f.Delimiter = d
	}
	if v, ok := opts["header"]; ok {
		b, err := parseHeader(v)
		if err != nil {
			return f, fmt.Errorf("exec: %w", err)
		}
		f.SkipHeader = b
	}
	return f, nil
}

// parseDelimiter reads a delimiter option; the file and message CSV
// decoders share it, so both accept the same spellings.
func parseDelimiter(v string) (byte, error) {
	switch strings.ToLower(v) {
	case `\t`, "tab":
		return '\t', nil
	case "space":
		return ' ', nil
	}
	if len(v) != 1 || v[0] == '"' || v[0] == '\n' || v[0] == '\r' {
		return 0, fmt.Errorf("delimiter must be one character other than a quote or newline, got %q", v)
	}
	return v[0], nil
}

func parseHeader(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "yes", "1":
		return true, nil
	case "false", "no", "0":
		return false, nil
	}
	return false, fmt.Errorf("header must be true or false, got %q", v)
}

func newCSVDecoder(src *plan.Source) (*csvDecoder, error) {
	d := &csvDecoder{src: src, delim: ',', header: true}
	if v, ok := src.Options["delimiter"]; ok {
		delim, err := parseDelimiter(v)
		if err != nil {
			return nil, fmt.Errorf("exec: source %s: %w", src.Name, err)
		}
		d.delim = delim
	}
	if v, ok := src.Options["header"]; ok {
		h, err := parseHeader(v)
		if err != nil {
			return nil, fmt.Errorf("exec: source %s: %w", src.Name, err)
		}
		d.header = h
	}
	if err := d.init(); err != nil {
		return nil, err
	}
	return d, nil
}

// newCSVMessageDecoder reads one record per message, fields by position.
func newCSVMessageDecoder(src *plan.Source, f MessageFormat) (*csvDecoder, error) {
	d := &csvDecoder{src: src, delim: f.Delimiter, message: true, skipHeader: f.SkipHeader}
	if d.delim == 0 {
		d.delim = ','
	}
	if _, err := parseDelimiter(string(d.delim)); err != nil {
		return nil, fmt.Errorf("exec: source %s: %w", src.Name, err)
	}
	if err := d.init(); err != nil {
		return nil, err
	}
	return d, nil
}

// init sets up the cell parsers and, without a header, the positional
// field-to-column map.
func (d *csvDecoder) init() error {
	src := d.src
	for _, c := range src.Columns {
		p, ok := plan.TextParser(c.Type)
		if !ok {
			return fmt.Errorf("exec: source %s: column %s of type %s cannot be read from CSV", src.Name, c.Name, c.Type)
		}
		d.parsers = append(d.parsers, p)
	}
	if !d.header {
		for i := range src.Columns {
			d.colOf = append(d.colOf, i)
		}
	}
	return nil
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
				if d.message && (rec[i] == '\n' || rec[i] == '\r') {
					// A file's reader ends a record at a line break
					// outside quotes; a message holds one record.
					return fmt.Errorf("field %d: a line break outside quotes (a record value holds one CSV record; quote a field that contains a line break)", len(starts)+1)
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
	if d.message {
		// A trailing LF, CRLF or CR ends the record, as a file's reader
		// drops them. It cannot be inside quotes unless a quote is left
		// open, which is malformed either way.
		if n := len(rec); n > 0 && rec[n-1] == '\n' {
			rec = rec[:n-1]
		}
		if n := len(rec); n > 0 && rec[n-1] == '\r' {
			rec = rec[:n-1]
		}
		if len(rec) == 0 {
			return nil, &DecodeError{Msg: "empty CSV record"}
		}
	}
	if err := d.split(rec); err != nil {
		return nil, &DecodeError{Msg: "bad CSV: " + err.Error()}
	}
	if d.message && d.isHeader() {
		if d.skipHeader {
			return nil, nil
		}
		return nil, &DecodeError{Msg: "a CSV header record (its fields name the columns), not data; header = 'true' skips such records"}
	}
	if d.header && !d.gotHeader {
		d.gotHeader = true
		d.colOf = d.colOf[:0]
		seen := map[int]bool{}
		for _, name := range d.fields {
			i := d.src.ColumnIndex(strings.TrimSpace(name))
			if i >= 0 && seen[i] {
				return nil, &HeaderError{Msg: fmt.Sprintf("the CSV header names column %q twice", name)}
			}
			seen[i] = true
			d.colOf = append(d.colOf, i)
		}
		for i, c := range d.src.Columns {
			if !seen[i] {
				return nil, &HeaderError{Msg: fmt.Sprintf("the CSV header has no column %q%s (it has %s); declare only the columns the file has, or set header = 'false' to map fields by position",
					c.Name, plan.Suggest(c.Name, d.fields), strings.Join(d.fields, ", "))}
			}
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
		if v.Kind == types.KindVarchar && !v.Null {
			v.S = repairString(v.S) // invalid UTF-8 becomes U+FFFD, as on the JSON paths
		}
		row[ci] = v
	}
	if tc := d.src.TimeCol; tc >= 0 && row[tc].Null {
		return nil, &DecodeError{Column: d.src.Columns[tc].Name, Msg: "missing event time"}
	}
	return row, nil
}

// isHeader reports whether the split record is the header row: as many
// fields as columns, each naming (trimmed, case-insensitively, as a file
// header is matched) the column at its position. A source with a TIMESTAMP
// event time can never take such a record for data; an all-VARCHAR one
// could, which is why a header is recognized before any cast.
func (d *csvDecoder) isHeader() bool {
	if len(d.fields) != len(d.src.Columns) {
		return false
	}
	for i, f := range d.fields {
		if d.src.ColumnIndex(strings.TrimSpace(f)) != i {
			return false
		}
	}
	return true
}
