// Command report turns the raw measurements of bench/run into the results
// table (results.md) and results.json, and compares a ubik changelog's final
// values with the DuckDB reference's.
//
//	report summarize --runs DIR/runs.tsv --out-dir DIR [--meta key=value ...]
//	report compare --ref REF.jsonl --got UBIK.jsonl [--rel-tol 1e-9]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "report:", err)
		if errors.Is(err, ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type metaFlag map[string]string

func (m metaFlag) String() string { return fmt.Sprint(map[string]string(m)) }

func (m metaFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	m[k] = v
	return nil
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: report summarize|compare [flags]", ErrUsage)
	}
	fs := flag.NewFlagSet("report "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "summarize":
		runsPath := fs.String("runs", "", "runs.tsv written by bench/run")
		outDir := fs.String("out-dir", "", "where to write results.json and results.md (default: the runs file's folder)")
		meta := metaFlag{}
		fs.Var(meta, "meta", "key=value to record in the results (repeatable)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *runsPath == "" {
			return fmt.Errorf("%w: summarize needs --runs", ErrUsage)
		}
		if *outDir == "" {
			*outDir = filepath.Dir(*runsPath)
		}
		f, err := os.Open(*runsPath)
		if err != nil {
			return err
		}
		runs, err := readRuns(f)
		f.Close()
		if err != nil {
			return err
		}
		res, err := summarize(runs, filepath.Dir(*runsPath))
		if err != nil {
			return err
		}
		if len(meta) > 0 {
			res.Meta = meta
		}
		js, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*outDir, "results.json"), append(js, '\n'), 0o644); err != nil {
			return err
		}
		md, err := os.Create(filepath.Join(*outDir, "results.md"))
		if err != nil {
			return err
		}
		if err := writeMarkdown(io.MultiWriter(md, stdout), res); err != nil {
			md.Close()
			return err
		}
		return md.Close()
	case "compare":
		ref := fs.String("ref", "", "reference changelog (duckref --out)")
		got := fs.String("got", "", "changelog to check (ubik run --output)")
		tol := fs.Float64("rel-tol", 1e-9, "relative tolerance for numbers that are not textually equal")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *ref == "" || *got == "" {
			return fmt.Errorf("%w: compare needs --ref and --got", ErrUsage)
		}
		return runCompare(*ref, *got, *tol, stdout)
	}
	return fmt.Errorf("%w: unknown subcommand %q: want summarize or compare", ErrUsage, args[0])
}
