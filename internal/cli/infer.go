package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ubiksql/ubik/internal/infer"
	"github.com/ubiksql/ubik/sql/parser"
)

// runInfer prints a CREATE SOURCE statement inferred from an input file.
func runInfer(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("infer", flag.ContinueOnError)
	setUsage(fs, env, "usage: ubik infer FILE [--name NAME] [--format jsonl|csv] [--rows N]\n\nprints a CREATE SOURCE statement for the columns and types of the first records of FILE",
		"ubik infer examples/events.jsonl --name events",
		"ubik infer orders.csv --name orders --rows 10000",
		"ubik infer events.jsonl > source.sql")
	name := fs.String("name", "events", "source name")
	format := fs.String("format", "", "jsonl or csv (default: from the file extension)")
	rows := fs.Int("rows", 1000, "records to read")
	path, rest := splitPositional(args)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	path, err := onePositional(fs, path)
	if err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("%w: infer needs an input file", ErrUsage)
	}
	s, err := inferFile(path, *name, *format, *rows)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(env.Stdout, s.SQL())
	return err
}

func formatOf(path, format string) string {
	if format != "" {
		return format
	}
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		return "csv"
	}
	return "jsonl"
}

func inferFile(path, name, format string, rows int) (*infer.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return infer.Infer(f, infer.Options{Name: name, Format: formatOf(path, format), Rows: rows, Path: path})
}

// undeclaredSource returns the name of the source the script's queries read
// that no CREATE SOURCE in it declares ("" if all are declared).
func undeclaredSource(script string) string {
	s, err := parser.Parse(script)
	if err != nil {
		return ""
	}
	declared := map[string]bool{}
	var from []string
	var walk func(sel *parser.Select)
	walk = func(sel *parser.Select) {
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
