// Package infer derives a source schema from the first records of an input
// (JSON lines or CSV) and renders it as a CREATE SOURCE statement the user
// can keep and edit.
package infer

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/internal/types"
)

// Options configure Infer.
type Options struct {
	Name   string // source name; default "events"
	Format string // "jsonl" (default) or "csv"
	Rows   int    // records to read; default 1000
	Path   string // written as the path option when set
}

// Column is one inferred column.
type Column struct {
	Name string
	Type types.Type
	// seen: a non-NULL value was observed.
	seen bool
	// kinds counts the records per narrowest type, with the first line of
	// each, to explain a column that widened to VARCHAR.
	kinds map[types.Type]*kindSeen
	// json: a nested object or array was seen; the column is JSON.
	json bool
	// min, max: the range of an integer column (ints counts its values),
	// to offer one that holds epoch seconds or milliseconds as event time.
	min, max, ints int64
	// intLatest is the largest integer seen so far; intLag the largest
	// amount a later value was behind it, at line intLagLine (an epoch
	// column's disorder, in its unit).
	intLatest, intLag, intLagLine int64
	// latest is the largest TIMESTAMP seen so far; lag the largest amount
	// a later record was behind it, at line lagLine.
	latest       int64
	lag, lagLine int64
	ordered      int // TIMESTAMP values seen
	// intDigits and scale are the most digits before and after the point
	// of the column's numbers: a DECIMAL column's precision and scale.
	intDigits, scale int
}

// int records an integer value read at line.
func (c *Column) int(n, line int64) {
	if c.ints > 0 && n < c.intLatest && c.intLatest-n > c.intLag {
		c.intLag, c.intLagLine = c.intLatest-n, line
	}
	if c.ints == 0 || n > c.intLatest {
		c.intLatest = n
	}
	if c.ints == 0 || n < c.min {
		c.min = n
	}
	if c.ints == 0 || n > c.max {
		c.max = n
	}
	c.ints++
}

// at records a TIMESTAMP value (microseconds) read at line.
func (c *Column) at(us, line int64) {
	if c.ordered > 0 && us < c.latest {
		if d := c.latest - us; d > c.lag {
			c.lag, c.lagLine = d, line
		}
	}
	if c.ordered == 0 || us > c.latest {
		c.latest = us
	}
	c.ordered++
}

// epochs are the units an integer column may count since the epoch: a
// column all of whose values fall in [2000-01-01, 2100-01-01) in one unit
// is offered as an event-time candidate, with the function that reads it.
var epochs = []struct {
	unit      string
	precision int   // TO_TIMESTAMP_LTZ's precision argument for the unit
	us        int64 // microseconds per unit
}{
	{"seconds", 0, 1_000_000},
	{"milliseconds", 3, 1000},
	{"microseconds", 6, 1},
}

const (
	epochLo = 946684800  // 2000-01-01 in seconds
	epochHi = 4102444800 // 2100-01-01 in seconds
)

// epoch returns the unit index of an epoch column, or -1.
func (c *Column) epoch() int {
	if c.json || c.Type.Kind != types.KindBigInt || c.ints == 0 {
		return -1
	}
	for i, e := range epochs {
		lo, hi := epochLo*(1_000_000/e.us), epochHi*(1_000_000/e.us)
		if c.min >= lo && c.max < hi {
			return i
		}
	}
	return -1
}

// oneLine keeps text written into a -- comment on its line: a line break in
// a column name or a bad line's excerpt would end the comment.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\u2028' || r == '\u2029' || r == 0x85 {
			return ' '
		}
		return r
	}, s)
}

func fmtTS(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.999999") }

type kindSeen struct {
	n    int
	line int
}

// Schema is an inferred source.
type Schema struct {
	Name    string
	Format  string
	Path    string
	Columns []Column
	TimeCol int // -1 when no TIMESTAMP column
	// EpochCol, when there is no TIMESTAMP column, is the integer column of
	// epoch seconds, milliseconds or microseconds that SQL turns into the
	// event time with a computed column; -1 when none.
	EpochCol int
	Records  int
	// Skipped counts the lines that were not events; FirstBad describes
	// the first of them.
	Skipped  int
	FirstBad string
}

// rank orders the types a column widens through: a column takes the
// widest type any of its values needs.
func widen(a, b types.Type) types.Type {
	if a.Kind == types.KindNull {
		return b
	}
	if b.Kind == types.KindNull || a == b {
		return a
	}
	num := func(t types.Type) bool {
		return t.Kind == types.KindBigInt || t.Kind == types.KindDouble || t.Kind == types.KindDecimal
	}
	if num(a) && num(b) {
		if a.Kind == types.KindDouble || b.Kind == types.KindDouble {
			return types.Double
		}
		return types.Decimal(0, 0) // its precision and scale are the column's digits (decimalColumns)
	}
	if (a.Kind == types.KindDate && b.Kind == types.KindTimestamp) || (a.Kind == types.KindTimestamp && b.Kind == types.KindDate) {
		return types.Timestamp
	}
	return types.Varchar
}

// maxDecimalDigits is the widest DECIMAL precision.
const maxDecimalDigits = 38

// decimalText reports whether s is plain decimal text (an optional minus,
// digits, a point, digits; no exponent) within 38 digits, and its digits
// before and after the point. Money and quantities are written so, and a
// DECIMAL keeps them exact where a DOUBLE would not (0.1 + 0.2).
func decimalText(s string) (intDigits, scale int, ok bool) {
	s = strings.TrimPrefix(s, "-")
	whole, frac, found := strings.Cut(s, ".")
	if !found || whole == "" || frac == "" || len(whole)+len(frac) > maxDecimalDigits {
		return 0, 0, false
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, 0, false
			}
		}
	}
	return len(whole), len(frac), true
}

// numberType is the type of a number's text: BIGINT for an integer, a
// DECIMAL for plain decimal text, else DOUBLE; ok is false for text that
// is no number.
func numberType(s string) (t types.Type, ok bool) {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.BigInt, true
	}
	if w, sc, ok := decimalText(s); ok {
		return types.Decimal(uint8(w+sc), uint8(sc)), true
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXnN") {
		return types.Double, true
	}
	return types.Type{}, false
}

// textType is the narrowest type a text cell parses as.
func textType(s string) types.Type {
	if t, ok := numberType(s); ok {
		return t
	}
	switch strings.ToLower(s) {
	case "true", "false":
		return types.Boolean
	}
	if _, err := types.ParseDate([]byte(s)); err == nil {
		return types.Date
	}
	if _, err := types.ParseTimestamp([]byte(s)); err == nil {
		return types.Timestamp
	}
	return types.Varchar
}

// stringType: a JSON string is a timestamp or date if it parses as one.
func stringType(s string) types.Type {
	if _, err := types.ParseDate([]byte(s)); err == nil {
		return types.Date
	}
	if _, err := types.ParseTimestamp([]byte(s)); err == nil {
		return types.Timestamp
	}
	return types.Varchar
}

// Infer reads up to opts.Rows records from r.
func Infer(r io.Reader, opts Options) (*Schema, error) {
	if opts.Name == "" {
		opts.Name = "events"
	}
	if opts.Rows <= 0 {
		opts.Rows = 1000
	}
	if opts.Format == "" {
		opts.Format = "jsonl"
	}
	s := &Schema{Name: opts.Name, Format: opts.Format, Path: opts.Path, TimeCol: -1, EpochCol: -1}
	idx := map[string]int{}
	line := 0
	col := func(name string) *Column {
		i, ok := idx[name]
		if !ok {
			i = len(s.Columns)
			idx[name] = i
			s.Columns = append(s.Columns, Column{Name: name, Type: types.Null})
		}
		return &s.Columns[i]
	}
	observe := func(name string, t types.Type, null bool) *Column {
		c := col(name)
		if !null {
			c.Type = widen(c.Type, t)
			c.seen = true
			if c.kinds == nil {
				c.kinds = map[types.Type]*kindSeen{}
			}
			if k := c.kinds[t]; k != nil {
				k.n++
			} else {
				c.kinds[t] = &kindSeen{n: 1, line: line}
			}
		}
		return c
	}
	// cell records a text value (a CSV field or a JSON string) with the
	// integer range and timestamp order it carries.
	cell := func(name string, t types.Type, v string, null bool) {
		c := observe(name, t, null)
		switch t.Kind {
		case types.KindBigInt:
			n, _ := strconv.ParseInt(v, 10, 64)
			c.int(n, int64(line))
			c.intDigits = max(c.intDigits, len(strings.TrimPrefix(v, "-")))
		case types.KindDecimal:
			c.intDigits = max(c.intDigits, int(t.Width-t.Scale))
			c.scale = max(c.scale, int(t.Scale))
		case types.KindTimestamp:
			us, _ := types.ParseTimestamp([]byte(v))
			c.at(us, int64(line))
		}
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var header []string
	var p fastjson.Parser
	bad := func(why string) {
		if s.Skipped == 0 {
			s.FirstBad = why
		}
		s.Skipped++
	}
	for s.Records < opts.Rows {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return nil, err
		}
		line++
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xEF\xBB\xBF")) // a UTF-8 byte order mark
		}
		b = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		switch opts.Format {
		case "csv":
			fields := splitCSV(string(b))
			if header == nil {
				header = fields
				for _, h := range header {
					observe(strings.TrimSpace(h), types.Null, true)
				}
				continue
			}
			for i, f := range fields {
				if i < len(header) {
					cell(strings.TrimSpace(header[i]), textType(f), f, f == "")
				}
			}
		case "jsonl":
			v, err := p.ParseBytes(b)
			if err != nil {
				bad(fmt.Sprintf("line %d: %v", line, err))
				continue
			}
			o, err := v.Object()
			if err != nil {
				bad(fmt.Sprintf("line %d: an event must be a JSON object, not %s", line, v.Type()))
				continue
			}
			o.Visit(func(k []byte, f *fastjson.Value) {
				switch f.Type() {
				case fastjson.TypeNull:
					observe(string(k), types.Null, true)
				case fastjson.TypeTrue, fastjson.TypeFalse:
					observe(string(k), types.Boolean, false)
				case fastjson.TypeNumber:
					text := string(f.MarshalTo(nil))
					t, ok := numberType(text)
					if !ok {
						t = types.Double
					}
					cell(string(k), t, text, false)
				case fastjson.TypeString:
					sb, _ := f.StringBytes()
					cell(string(k), stringType(string(sb)), string(sb), false)
				default: // an object or an array
					observe(string(k), types.Varchar, false).json = true
				}
			})
		default:
			return nil, fmt.Errorf("unknown format %q (want jsonl or csv)", opts.Format)
		}
		s.Records++
	}
	if s.Records == 0 {
		if s.Skipped > 0 {
			return nil, fmt.Errorf("%w: %d lines, none of them an event (first: %s)", ErrNoRecords, s.Skipped, s.FirstBad)
		}
		return nil, ErrNoRecords
	}
	for i := range s.Columns {
		c := &s.Columns[i]
		if !c.seen {
			c.Type = types.Varchar // only NULLs: nothing to go on
		}
		if c.Type.Kind == types.KindDecimal {
			// Every number was an integer or plain decimal text: the
			// DECIMAL that holds the widest of each side of the point,
			// DOUBLE when that passes 38 digits.
			c.Type = types.Double
			if p := c.intDigits + c.scale; p <= maxDecimalDigits {
				c.Type = types.Decimal(uint8(p), uint8(c.scale))
			}
		}
	}
	// The event-time column: the first TIMESTAMP named like one (…time…,
	// ts, …_at), else the first TIMESTAMP.
	for i, c := range s.Columns {
		if c.Type.Kind != types.KindTimestamp {
			continue
		}
		if s.TimeCol < 0 {
			s.TimeCol = i
		}
		if timeLike(c.Name) {
			s.TimeCol = i
			break
		}
	}
	// Without one, an epoch column (named like a time, else the first)
	// becomes the event time through a computed column.
	if s.TimeCol < 0 {
		for i := range s.Columns {
			if s.Columns[i].epoch() < 0 {
				continue
			}
			if s.EpochCol < 0 {
				s.EpochCol = i
			}
			if timeLike(s.Columns[i].Name) {
				s.EpochCol = i
				break
			}
		}
	}
	return s, nil
}

// timeLike reports whether a column name reads as an event time: …time…,
// ts…, …_at, …_ms.
func timeLike(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "time") || strings.HasPrefix(n, "ts") || strings.HasSuffix(n, "_at") || strings.HasSuffix(n, "_ms")
}

func splitCSV(line string) []string {
	var out []string
	var b strings.Builder
	inq := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inq && c == '"' && i+1 < len(line) && line[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			inq = !inq
		case c == ',' && !inq:
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}

func ident(name string) string {
	ok := name != ""
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			ok = false
		}
	}
	if ok {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// SQL renders the schema as a CREATE SOURCE statement. The watermark delay
// covers the largest disorder the records showed in the event-time column
// (at least one second). An integer column of epoch seconds, milliseconds
// or microseconds is offered as event time in a comment, with the
// TO_TIMESTAMP_LTZ call that reads it; without a TIMESTAMP column, the
// first such column (one named like a time first) becomes the event time
// through a computed column, event_time AS TO_TIMESTAMP_LTZ(col, p), with
// the WATERMARK on it.
func (s *Schema) SQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- inferred from %d records; check the types and the watermark delay\n", s.Records)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, "-- skipped %d malformed lines (first at %s)\n", s.Skipped, oneLine(s.FirstBad))
	}
	evName := ""
	if s.EpochCol >= 0 {
		evName = s.computedName()
	}
	for i, c := range s.Columns {
		if u := c.epoch(); u >= 0 {
			e := epochs[u]
			n := oneLine(ident(c.Name))
			fmt.Fprintf(&b, "-- event-time candidate: %s holds epoch %s (%s to %s); TO_TIMESTAMP_LTZ(%s, %d) reads it as a TIMESTAMP",
				n, e.unit, fmtTS(c.min*e.us), fmtTS(c.max*e.us), n, e.precision)
			if i == s.EpochCol {
				fmt.Fprintf(&b, ", as the computed column %s does", ident(evName))
			}
			b.WriteString("\n")
		}
	}
	delay := int64(1)
	disorder := func(name string, lag, line int64) {
		if lag > 0 {
			delay = (lag + 999_999) / 1_000_000
			fmt.Fprintf(&b, "-- the largest disorder seen in %s: %s behind the latest before it (line %d)\n", oneLine(name), time.Duration(lag)*time.Microsecond, line)
		} else {
			fmt.Fprintf(&b, "-- %s was in order in these records; the watermark delay is the smallest, raise it if later input is out of order\n", oneLine(name))
		}
	}
	switch {
	case s.TimeCol >= 0:
		c := s.Columns[s.TimeCol]
		disorder(ident(c.Name), c.lag, c.lagLine)
	case s.EpochCol >= 0:
		c := s.Columns[s.EpochCol]
		disorder(ident(c.Name), c.intLag*epochs[c.epoch()].us, c.intLagLine)
	}
	fmt.Fprintf(&b, "CREATE SOURCE %s (\n", ident(s.Name))
	for i, c := range s.Columns {
		sep := ","
		if i == len(s.Columns)-1 && s.TimeCol < 0 && s.EpochCol < 0 {
			sep = ""
		}
		note := ""
		if !c.json && c.Type.Kind == types.KindVarchar && len(c.kinds) > 1 {
			var parts []string
			for t, k := range c.kinds {
				parts = append(parts, fmt.Sprintf("%s in %d (first at line %d)", t, k.n, k.line))
			}
			sort.Strings(parts)
			note = " -- mixed: " + strings.Join(parts, ", ")
		}
		typ := c.Type.String()
		if c.json {
			typ = "JSON"
		}
		fmt.Fprintf(&b, "  %s %s%s%s\n", ident(c.Name), typ, sep, note)
	}
	if s.EpochCol >= 0 {
		c := s.Columns[s.EpochCol]
		fmt.Fprintf(&b, "  %s AS TO_TIMESTAMP_LTZ(%s, %d),\n", ident(evName), ident(c.Name), epochs[c.epoch()].precision)
	}
	wm := ""
	switch {
	case s.TimeCol >= 0:
		wm = ident(s.Columns[s.TimeCol].Name)
	case s.EpochCol >= 0:
		wm = ident(evName)
	}
	if wm != "" {
		fmt.Fprintf(&b, "  WATERMARK FOR %s AS %s - INTERVAL '%d' SECOND\n", wm, wm, delay)
	}
	opts := []string{"format = " + quote(s.Format)}
	if s.Path != "" {
		opts = append(opts, "path = "+quote(s.Path))
	}
	fmt.Fprintf(&b, ") WITH (%s);\n", strings.Join(opts, ", "))
	return b.String()
}

// computedName names the computed event-time column: event_time, or, if a
// column has that name, event_time_2, event_time_3, ...
func (s *Schema) computedName() string {
	taken := func(n string) bool {
		for _, c := range s.Columns {
			if strings.EqualFold(c.Name, n) {
				return true
			}
		}
		return false
	}
	name := "event_time"
	for i := 2; taken(name); i++ {
		name = fmt.Sprintf("event_time_%d", i)
	}
	return name
}
