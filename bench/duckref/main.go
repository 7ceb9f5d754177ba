// Command duckref is the batch reference of the ubik benchmark: it runs one
// benchmark query in DuckDB (through its Go binding) over a bench/gen JSON
// lines file and reports the time it took. With --out it also writes the
// result rows as changelog lines in ubik's contract shape, sorted by key, so
// that ubik's final values can be compared with DuckDB's.
//
// It is a separate module so that the main ubik module never depends on
// DuckDB or cgo.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

// Options are duckref's settings.
type Options struct {
	Query   string // a key of queries; required
	Input   string // JSON lines file from bench/gen; required
	Persons string // bench/gen's person file; required by the queries that read it (q3, q8)
	Threads int    // DuckDB threads; default 2 (the machine's cores)
	Out     string // optional: write the result rows here as changelog lines
	Stats   string // optional: write the summary JSON here (else to stdout)
}

// Stats is the summary duckref prints as one JSON object.
type Stats struct {
	Engine           string  `json:"engine"`
	Version          string  `json:"version"`
	Query            string  `json:"query"`
	Input            string  `json:"input"`
	Persons          string  `json:"persons,omitempty"`
	Threads          int     `json:"threads"`
	Rows             int64   `json:"rows"`
	QueryWallSeconds float64 `json:"query_wall_seconds"`
	QueryCPUSeconds  float64 `json:"query_cpu_seconds"`
	OutWallSeconds   float64 `json:"out_wall_seconds,omitempty"`
}

func main() {
	code := 0
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "duckref:", err)
		code = 1
		if errors.Is(err, ErrUsage) {
			code = 2
		}
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := Options{Threads: 2}
	fs := flag.NewFlagSet("duckref", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Query, "query", "", "query: "+strings.Join(queryNames(), ", "))
	fs.StringVar(&o.Input, "input", "", "JSON lines file written by bench/gen")
	fs.StringVar(&o.Persons, "persons", "", "q3, q8: bench/gen's person file (--kind person)")
	fs.IntVar(&o.Threads, "threads", o.Threads, "DuckDB worker threads")
	fs.StringVar(&o.Out, "out", "", "write the result rows as contract changelog lines to this file")
	fs.StringVar(&o.Stats, "stats-json", "", "write the summary JSON to this file instead of stdout")
	printSQL := fs.Bool("print-sql", false, "print the query's DuckDB SQL and exit")
	version := fs.Bool("version", false, "print DuckDB's version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		v, err := duckVersion(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "DuckDB %s (duckdb-go v2)\n", v)
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	q, ok := queries[o.Query]
	if !ok {
		return fmt.Errorf("%w: --query %q: want one of %s", ErrUsage, o.Query, strings.Join(queryNames(), ", "))
	}
	if *printSQL {
		input, persons := o.Input, o.Persons
		if input == "" {
			input = "FILE.jsonl"
		}
		if persons == "" {
			persons = "PERSONS.jsonl"
		}
		_, err := fmt.Fprintln(stdout, fullSQL(q, input, persons)+";")
		return err
	}
	if o.Input == "" {
		return fmt.Errorf("%w: --input is required", ErrUsage)
	}
	if o.Threads < 1 || o.Threads > 256 {
		return fmt.Errorf("%w: --threads %d: want 1 to 256", ErrUsage, o.Threads)
	}
	if _, err := os.Stat(o.Input); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	switch {
	case q.Persons && o.Persons == "":
		return fmt.Errorf("%w: query %s also reads the persons: --persons FILE is required", ErrUsage, q.Name)
	case !q.Persons && o.Persons != "":
		return fmt.Errorf("%w: query %s does not read the persons: drop --persons", ErrUsage, q.Name)
	case q.Persons:
		if _, err := os.Stat(o.Persons); err != nil {
			return fmt.Errorf("persons: %w", err)
		}
	}
	st, err := Run(ctx, q, o)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	b = append(b, '\n')
	if o.Stats == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(o.Stats, b, 0o644)
}

// Run executes q over o.Input in a fresh in-memory DuckDB.
func Run(ctx context.Context, q Query, o Options) (Stats, error) {
	st := Stats{Engine: "duckdb", Query: q.Name, Input: o.Input, Persons: o.Persons, Threads: o.Threads}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return st, fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	// One connection: SET applies per connection in database/sql's pool.
	conn, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("connect duckdb: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET threads = %d", o.Threads)); err != nil {
		return st, fmt.Errorf("set threads: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT version()").Scan(&st.Version); err != nil {
		return st, fmt.Errorf("version: %w", err)
	}

	// The result is materialized into a table so that every aggregate is
	// computed; a count(*) over the query would let the optimizer drop them.
	stmt := fullSQL(q, o.Input, o.Persons)
	t0, c0 := time.Now(), cpuTime()
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return st, fmt.Errorf("query %s: %w", q.Name, err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM result").Scan(&st.Rows); err != nil {
		return st, fmt.Errorf("count result: %w", err)
	}
	st.QueryWallSeconds = time.Since(t0).Seconds()
	st.QueryCPUSeconds = (cpuTime() - c0).Seconds()

	if o.Out != "" {
		t1 := time.Now()
		if err := writeRows(ctx, conn, q, o.Out); err != nil {
			return st, err
		}
		st.OutWallSeconds = time.Since(t1).Seconds()
	}
	return st, nil
}

// writeRows writes the result table as changelog lines sorted by key, each
// cell rendered from DuckDB's own CAST(... AS VARCHAR) text, which is what
// the contract's cells are defined by.
func writeRows(ctx context.Context, conn *sql.Conn, q Query, path string) error {
	rows, err := conn.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE result)")
	if err != nil {
		return fmt.Errorf("describe result: %w", err)
	}
	var names []string
	var kinds []cellKind
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			rows.Close()
			return fmt.Errorf("describe result: %w", err)
		}
		names = append(names, n)
		kinds = append(kinds, kindOf(t))
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("describe result: %w", err)
	}
	keyIdx := make([]int, len(q.Key))
	for i, k := range q.Key {
		keyIdx[i] = -1
		for j, n := range names {
			if n == k {
				keyIdx[i] = j
			}
		}
		if keyIdx[i] < 0 {
			return fmt.Errorf("query %s: key column %q is not in the result %v", q.Name, k, names)
		}
	}
	casts := make([]string, len(names))
	for i, n := range names {
		casts[i] = fmt.Sprintf("CAST(%s AS VARCHAR)", quoteIdent(n))
	}
	order := make([]string, len(q.Key))
	for i, k := range q.Key {
		order[i] = quoteIdent(k)
	}
	rows, err = conn.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM result ORDER BY %s",
		strings.Join(casts, ", "), strings.Join(order, ", ")))
	if err != nil {
		return fmt.Errorf("read result: %w", err)
	}
	defer rows.Close()

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	cells := make([]sql.NullString, len(names))
	dest := make([]any, len(names))
	for i := range cells {
		dest[i] = &cells[i]
	}
	texts := make([]string, len(names))
	valid := make([]bool, len(names))
	var line []byte
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			f.Close()
			return fmt.Errorf("read result: %w", err)
		}
		for i, c := range cells {
			texts[i], valid[i] = c.String, c.Valid
		}
		line = appendRecord(line[:0], names, kinds, texts, valid, keyIdx)
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := rows.Err(); err != nil {
		f.Close()
		return fmt.Errorf("read result: %w", err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func duckVersion(ctx context.Context) (string, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return "", fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", fmt.Errorf("version: %w", err)
	}
	return v, nil
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
