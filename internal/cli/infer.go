package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ubiksql/ubik"
)

// runInfer prints a CREATE SOURCE statement inferred from an input file.
func runInfer(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("infer", flag.ContinueOnError)
	setUsage(fs, env, "usage: ubik infer [FILE|-] [--name NAME] [--format jsonl|csv] [--rows N]\n\nprints a CREATE SOURCE statement for the columns and types of the first records of FILE (default: stdin); lines that are not events are skipped and counted",
		"ubik infer examples/events.jsonl --name events",
		"head -1000 events.jsonl | ubik infer --name events",
		"ubik infer orders.csv --name orders --rows 10000")
	name := fs.String("name", "events", "source name")
	format := fs.String("format", "", "jsonl or csv (default: from the file extension)")
	rows := fs.Int("rows", 1000, "records to read")
	path, rest := splitPositional(args)
	if len(args) > 0 && args[0] == "-" { // stdin, named
		path, rest = "-", args[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	path, err := onePositional(fs, path)
	if err != nil {
		return err
	}
	var decl string
	if path == "" || path == "-" {
		decl, err = ubik.InferSource(env.Stdin, ubik.InferOptions{Name: *name, Format: formatOf("", *format), Rows: *rows})
		if err != nil {
			err = fmt.Errorf("stdin: %w", err)
		}
	} else {
		decl, err = inferFile(path, *name, *format, *rows, path)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(env.Stdout, decl)
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

// inferFile infers a source from the first records of the file at path;
// its CREATE SOURCE names optPath as its path ("" none).
func inferFile(path, name, format string, rows int, optPath string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	decl, err := ubik.InferSource(f, ubik.InferOptions{Name: name, Format: formatOf(path, format), Rows: rows, Path: optPath})
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return decl, nil
}

// inferStdin infers a source from the first records of env.Stdin and
// returns an Env whose Stdin replays what inference read before the rest.
func inferStdin(env *Env, name string, rows int) (string, *Env, error) {
	var seen bytes.Buffer
	decl, err := ubik.InferSource(io.TeeReader(env.Stdin, &seen), ubik.InferOptions{Name: name, Rows: rows})
	if err != nil {
		return "", nil, fmt.Errorf("stdin: %w", err)
	}
	e := *env
	e.Stdin = io.MultiReader(&seen, env.Stdin)
	return decl, &e, nil
}

// inferHint adds to err, when it is the script's unknown source that no
// CREATE SOURCE declares, how to get a declaration: run's --infer (withRun)
// or ubik infer. A name close to a declared one (the error suggests it)
// is a typo, not a missing declaration.
func inferHint(err error, script string, withRun bool) error {
	src := ubik.UndeclaredSource(script)
	unknown := fmt.Sprintf("unknown source %q", src)
	if src == "" || !strings.Contains(err.Error(), unknown) || strings.Contains(err.Error(), unknown+" (did you mean") {
		return err
	}
	if withRun {
		return fmt.Errorf("%w\nno CREATE SOURCE declares %s: add --infer to infer it from the first records of the input (and print its CREATE SOURCE), or run ubik infer FILE --name %s", err, src, src)
	}
	return fmt.Errorf("%w\nno CREATE SOURCE declares %s: ubik infer FILE --name %s prints one inferred from a file's first records", err, src, src)
}
