package ubik

import (
	"io"
	"strings"

	"github.com/ubiksql/ubik/internal/infer"
	"github.com/ubiksql/ubik/internal/sql/parser"
)

// RedactSecrets returns s, SQL text or a message quoting it, with the
// values of secret options (a password, a SASL secret) replaced, so it
// can be logged or shown.
func RedactSecrets(s string) string { return parser.Redact(s) }

// UndeclaredSource returns the name of a source the script's queries read
// that no CREATE SOURCE in it declares ("" if all are declared, or the
// script does not parse).
func UndeclaredSource(script string) string {
	s, err := parser.Parse(script)
	if err != nil {
		return ""
	}
	declared := map[string]bool{}
	var from []string
	walk := func(sel *parser.Select) {
		switch t := sel.From.(type) {
		case *parser.TableName:
			from = append(from, t.Name.Name)
		case *parser.WindowTVF:
			from = append(from, t.Table.Name)
		}
	}
	for _, st := range s.Stmts {
		switch n := st.(type) {
		case *parser.CreateSource:
			declared[strings.ToLower(n.Name.Name)] = true
		case *parser.CreateView:
			walk(n.Query)
		case *parser.Select:
			walk(n)
		}
	}
	for _, f := range from {
		if !declared[strings.ToLower(f)] {
			return f
		}
	}
	return ""
}

// InferOptions configure InferSource.
type InferOptions struct {
	Name   string // the source's name; default "events"
	Format string // "jsonl" (default) or "csv"
	Rows   int    // records to read; default 1000
	Path   string // written as the path option when set
}

// InferSource reads the first records of r (JSON lines or CSV) and returns
// a CREATE SOURCE statement for their columns and types. Lines that are
// not events are skipped and counted in a comment.
func InferSource(r io.Reader, o InferOptions) (string, error) {
	s, err := infer.Infer(r, infer.Options{Name: o.Name, Format: o.Format, Rows: o.Rows, Path: o.Path})
	if err != nil {
		return "", err
	}
	return s.SQL(), nil
}
