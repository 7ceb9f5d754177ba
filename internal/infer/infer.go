// Package infer derives a source schema from the first records of an input
// (JSON lines or CSV) and renders it as a CREATE SOURCE statement the user
// can keep and edit.
package infer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/types"
)

// ErrNoRecords is returned when the input holds no record to infer from.
var ErrNoRecords = errors.New("infer: no records to infer a schema from")

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
}

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
	Records int
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
	num := func(t types.Type) bool { return t.Kind == types.KindBigInt || t.Kind == types.KindDouble }
	if num(a) && num(b) {
		return types.Double
	}
	if (a.Kind == types.KindDate && b.Kind == types.KindTimestamp) || (a.Kind == types.KindTimestamp && b.Kind == types.KindDate) {
		return types.Timestamp
	}
	return types.Varchar
}

// textType is the narrowest type a text cell parses as.
func textType(s string) types.Type {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.BigInt
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXnN") {
		return types.Double
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
	s := &Schema{Name: opts.Name, Format: opts.Format, Path: opts.Path, TimeCol: -1}
	idx := map[string]int{}
	line := 0
	observe := func(name string, t types.Type, null bool) {
		i, ok := idx[name]
		if !ok {
			i = len(s.Columns)
			idx[name] = i
			s.Columns = append(s.Columns, Column{Name: name, Type: types.Null})
		}
		if !null {
			c := &s.Columns[i]
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
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var header []string
	var p fastjson.Parser
	for s.Records < opts.Rows {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return nil, err
		}
		line++
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
					observe(strings.TrimSpace(header[i]), textType(f), f == "")
				}
			}
		case "jsonl":
			v, err := p.ParseBytes(b)
			if err != nil {
				return nil, fmt.Errorf("infer: line %d: %v", line, err)
			}
			o, err := v.Object()
			if err != nil {
				return nil, fmt.Errorf("infer: line %d: an event must be a JSON object", line)
			}
			o.Visit(func(k []byte, f *fastjson.Value) {
				switch f.Type() {
				case fastjson.TypeNull:
					observe(string(k), types.Null, true)
				case fastjson.TypeTrue, fastjson.TypeFalse:
					observe(string(k), types.Boolean, false)
				case fastjson.TypeNumber:
					t := types.Double
					if _, err := strconv.ParseInt(string(f.MarshalTo(nil)), 10, 64); err == nil {
						t = types.BigInt
					}
					observe(string(k), t, false)
				case fastjson.TypeString:
					sb, _ := f.StringBytes()
					observe(string(k), stringType(string(sb)), false)
				default:
					observe(string(k), types.Varchar, false)
				}
			})
		default:
			return nil, fmt.Errorf("infer: unknown format %q (want jsonl or csv)", opts.Format)
		}
		s.Records++
	}
	if s.Records == 0 {
		return nil, ErrNoRecords
	}
	for i := range s.Columns {
		if !s.Columns[i].seen {
			s.Columns[i].Type = types.Varchar // only NULLs: nothing to go on
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
		if n := strings.ToLower(c.Name); strings.Contains(n, "time") || n == "ts" || strings.HasSuffix(n, "_at") {
			s.TimeCol = i
			break
		}
	}
	return s, nil
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
// is a starting point (5 seconds) to adjust to the input's disorder.
func (s *Schema) SQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- inferred from %d records; check the types and the watermark delay\n", s.Records)
	fmt.Fprintf(&b, "CREATE SOURCE %s (\n", ident(s.Name))
	for i, c := range s.Columns {
		sep := ","
		if i == len(s.Columns)-1 && s.TimeCol < 0 {
			sep = ""
		}
		note := ""
		if c.Type.Kind == types.KindVarchar && len(c.kinds) > 1 {
			var parts []string
			for t, k := range c.kinds {
				parts = append(parts, fmt.Sprintf("%s in %d (first at line %d)", t, k.n, k.line))
			}
			sort.Strings(parts)
			note = " -- mixed: " + strings.Join(parts, ", ")
		}
		fmt.Fprintf(&b, "  %s %s%s%s\n", ident(c.Name), c.Type, sep, note)
	}
	if s.TimeCol >= 0 {
		n := ident(s.Columns[s.TimeCol].Name)
		fmt.Fprintf(&b, "  WATERMARK FOR %s AS %s - INTERVAL '5' SECOND\n", n, n)
	}
	opts := []string{"format = " + quote(s.Format)}
	if s.Path != "" {
		opts = append(opts, "path = "+quote(s.Path))
	}
	fmt.Fprintf(&b, ") WITH (%s);\n", strings.Join(opts, ", "))
	return b.String()
}
