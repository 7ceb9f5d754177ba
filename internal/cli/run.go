package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// maxLineBytes bounds one input line; a longer line is reported as
// malformed and skipped, never buffered whole.
const maxLineBytes = 16 << 20

// pollBytes is how much input the run loop reads between two looks at the
// signal and the checkpoint clock, besides every 4096 lines: decoding is
// linear in the input, so this bounds the time between looks.
const pollBytes = 1 << 20

type runFlags struct {
	input      string
	output     string
	outputDir  string
	format     string
	query      string
	strict     bool
	maxBad     string
	statsJSON  string
	noProgress bool
	quiet      bool
	deadLetter string
	lateOutput string
	stateDir   string
	infer      bool
	cpuProfile string
	metrics    string
	threads    int
	joinBuffer int

	checkpointEvery time.Duration
	set             map[string]bool // the flags given on the command line
}

// runTarget is one query of a file run and where its changelog goes.
type runTarget struct {
	pq     *planQuery
	q      *ubik.Query
	out    string // the output path, or "-" for stdout
	w      io.Writer
	outBuf []byte
	bad    int64    // events of this query that were malformed or failed to evaluate, over every input
	badIn  [2]int64 // bad's share of each input, for a query that reads two (summary.Inputs' order)
	limit  string   // the bad-input limit it crossed, if any
	// via is the target whose graph runs this one (run_views.go); q is
	// then nil.
	via *runTarget
}

func runRun(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	f := newRunFlags(fs)
	kf := addKafkaFlags(fs) // run_kafka.go
	setUsage(fs, env, "usage: ubik run QUERY.sql [--input FILE] [--output FILE | --output-dir DIR] [--format tsv|jsonl] [flags]\n\n"+
		"exit status: 0 done, 1 error, 2 usage error, 3 too many bad events (--max-bad), 130 or 143 stopped by SIGINT or SIGTERM (a Kafka run without --until-caught-up: 0)",
		"ubik run examples/merchant_totals.sql --input examples/events.jsonl",
		"ubik run views.sql --input events.jsonl --output-dir out/ --max-bad 1%",
		"ubik run q.sql --input events.jsonl --output totals.tsv --state-dir state/ --dead-letter bad.jsonl")
	sqlPath, limit, err := f.parse(fs, args)
	if err != nil {
		return err
	}
	sqlText, err := os.ReadFile(sqlPath)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		return err
	}
	defer eng.Close()
	if env, err = inferUndeclared(env, eng, f, string(sqlText)); err != nil {
		return err
	}
	prog, pqs, err := compileRun(eng, f, kf, sqlPath, string(sqlText))
	if err != nil {
		return err
	}
	if qs, err := kafkaTargets(prog, pqs, kf); qs != nil || err != nil {
		if err != nil {
			return err
		}
		return runKafka(ctx, env, kf, f, prog, qs)
	}
	r, err := newFileRun(ctx, env, f, limit, eng, prog, pqs, sqlText)
	if err != nil {
		return err
	}
	return r.run()
}

// newRunFlags defines run's flags on fs.
func newRunFlags(fs *flag.FlagSet) *runFlags {
	var f runFlags
	fs.StringVar(&f.input, "input", "", "input file of JSON lines or CSV (- for stdin; default: the source's path option, else stdin)")
	fs.StringVar(&f.output, "output", "", "where the changelog goes (- for stdout; default: the CREATE SINK's path option, else stdout)")
	fs.StringVar(&f.outputDir, "output-dir", "", "run every query of the script, each writing its changelog to DIR/QUERY.tsv (or .jsonl), unless its CREATE SINK names a path")
	fs.StringVar(&f.format, "format", "tsv", "record format: tsv (key<TAB>value) or jsonl (an envelope with the metadata)")
	fs.StringVar(&f.query, "query", "", "which query of the script to run (default: its only query; over Kafka, every query no other reads, side by side; see --output-dir)")
	fs.BoolVar(&f.strict, "strict", false, "stop at the first malformed event or evaluation error (the same as --max-bad 0)")
	fs.StringVar(&f.maxBad, "max-bad", "", "fail the run (exit status 3) when more than N events, or more than P% of the events read, are malformed or fail to evaluate, counted over every input of the run (default: fail only when every event does)")
	fs.StringVar(&f.statsJSON, "stats-json", "", "write the run summary as JSON to this file")
	fs.BoolVar(&f.noProgress, "no-progress", false, "never show the progress bar")
	fs.BoolVar(&f.quiet, "quiet", false, "do not print the summary")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "write each malformed event with its line number and error to this file (JSON lines)")
	fs.StringVar(&f.lateOutput, "late-output", "", "write each late event (its input line, its line number, the key it was for, the reason) to this file (JSON lines)")
	fs.IntVar(&f.threads, "threads", 0, "run each query on N threads: the reading thread, which reads and decodes the input lines in blocks and merges, and N-1 shards, each on its own thread holding the groups whose key hashes to it (a shard with nothing to fold decodes a block instead); the changelog is byte for byte the one-thread changelog. Default (0): 1. A join, and a run of two files, decode record by record on the reading thread and gain little or nothing; CSV input gains nothing. A query with no GROUP BY key (one group), and a run with --strict or --late-output, run on one thread")
	fs.StringVar(&f.stateDir, "state-dir", "", "checkpoint state, input position and output lengths here; rerunning the same command after a crash or a stop resumes")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for performance work)")
	fs.BoolVar(&f.infer, "infer", false, "when the query reads a source the script does not declare, infer it from the first records of --input and print the CREATE SOURCE")
	fs.StringVar(&f.metrics, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464); off by default")
	fs.DurationVar(&f.checkpointEvery, "checkpoint-interval", time.Second, "how often to checkpoint with --state-dir")
	fs.IntVar(&f.joinBuffer, "join-buffer", ubik.DefaultJoinBuffer, "the most rows a join holds: an interval join's rows of both inputs together (ubik explain gives the bytes per row), a temporal join's events waiting for the table's watermark; over Kafka, per partition of the join; one more stops the run with an error")
	return &f
}

// parse parses args into f and checks the flags: the query file and the
// bad-input limit.
func (f *runFlags) parse(fs *flag.FlagSet, args []string) (sqlPath string, limit badLimit, err error) {
	sqlPath, rest := splitPositional(args)
	if err := parseFlags(fs, rest); err != nil {
		return "", limit, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if sqlPath, err = onePositional(fs, sqlPath); err != nil {
		return "", limit, err
	}
	if sqlPath == "" {
		return "", limit, fmt.Errorf("%w: run needs a query file (ubik run --help shows the flags)", ErrUsage)
	}
	if f.format != "tsv" && f.format != "jsonl" {
		return "", limit, fmt.Errorf("%w: --format must be tsv or jsonl, got %q", ErrUsage, f.format)
	}
	if limit, err = parseMaxBad(f.maxBad); err != nil {
		return "", limit, err
	}
	if err := checkJoinBuffer(f); err != nil {
		return "", limit, err
	}
	if f.strict {
		if f.set["max-bad"] {
			return "", limit, fmt.Errorf("%w: --strict is --max-bad 0; give one of them", ErrUsage)
		}
		limit = badLimit{set: true}
	}
	return sqlPath, limit, nil
}

// startCPUProfile starts --cpuprofile; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// inferUndeclared, with --infer, declares the source the script reads and
// does not declare, inferred from the first records of the input, and
// returns the Env to read the input from (stdin then replays them).
func inferUndeclared(env *Env, eng *ubik.Engine, f *runFlags, sqlText string) (*Env, error) {
	if !f.infer {
		return env, nil
	}
	src := ubik.UndeclaredSource(sqlText)
	if src == "" {
		return env, nil
	}
	var decl string
	var err error
	if f.input == "" || f.input == "-" {
		decl, env, err = inferStdin(env, src, 1000)
	} else {
		decl, err = inferFile(f.input, src, "", 1000, "")
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Stderr, "ubik: inferred source %s (keep it in your script):\n%s", src, decl)
	if err := eng.Exec(decl); err != nil {
		return nil, fmt.Errorf("inferred source: %w", err)
	}
	return env, nil
}

// compileRun compiles the script and picks the queries the run runs.
func compileRun(eng *ubik.Engine, f *runFlags, kf *kafkaFlags, sqlPath, sqlText string) (*ubik.Program, []*planQuery, error) {
	name := f.query
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(sqlPath), filepath.Ext(sqlPath))
	}
	prog, err := eng.CompileViews(sqlText, name)
	if err != nil {
		return nil, nil, inferHint(sqlError(sqlPath, err), sqlText, true)
	}
	resolveScriptPaths(prog, sqlPath)
	pqs, err := pickTargets(prog, f)
	if err != nil {
		qs := kafkaTops(prog, kf, f)
		if qs == nil {
			return nil, nil, err
		}
		pqs = qs // a Kafka run of every query of the script
	}
	return prog, pqs, nil
}

// utf8BOM is the byte order mark some tools write at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// badKind names what went wrong with one event.
func badKind(err error) string {
	if errors.Is(err, ubik.ErrEvaluation) {
		return "evaluation error"
	}
	return "malformed event"
}

// pickTargets chooses the queries a file run runs: --query's, the only
// one, or with --output-dir (or a CREATE SINK path for each) all of them.
func pickTargets(prog *ubik.Program, f *runFlags) ([]*planQuery, error) {
	qs := prog.Queries()
	if f.query != "" || len(qs) <= 1 {
		pq, err := pickProgramQuery(qs, f.query)
		if err != nil {
			return nil, err
		}
		return []*planQuery{pq}, nil
	}
	if f.outputDir != "" {
		return qs, nil
	}
	var names []string
	allPaths := true
	for _, q := range qs {
		names = append(names, q.Name())
		if s := querySink(prog, q); s == nil || s.Option("path") == "" {
			allPaths = false
		}
	}
	if allPaths {
		return qs, nil
	}
	return nil, fmt.Errorf("%w: the script has queries %s; run them all with --output-dir DIR (each to its own file), or choose one with --query", ErrUsage, strings.Join(names, ", "))
}

// outputPath is where a query's changelog goes: --output (one query), the
// path of its CREATE SINK, --output-dir/QUERY.tsv, or stdout.
func outputPath(prog *ubik.Program, pq *planQuery, f *runFlags, n int) string {
	if n == 1 && f.set["output"] {
		return f.output
	}
	if s := querySink(prog, pq); s != nil && s.Option("path") != "" && !strings.EqualFold(s.Option("connector"), "kafka") {
		return s.Option("path")
	}
	if f.outputDir != "" {
		return filepath.Join(f.outputDir, pq.Name()+"."+f.format)
	}
	return "-"
}

// outputConflict refuses --output FILE for a query whose CREATE SINK
// names another file: either would be a silent choice of where the
// changelog goes.
func outputConflict(prog *ubik.Program, pq *planQuery, f *runFlags) error {
	s := querySink(prog, pq)
	if !f.set["output"] || s == nil || s.Option("path") == "" || strings.EqualFold(s.Option("connector"), "kafka") {
		return nil
	}
	if p := s.Option("path"); filepath.Clean(p) != filepath.Clean(f.output) {
		return fmt.Errorf("%w: query %s writes to sink %s WITH (path = '%s'), and --output names %s: a changelog goes to one place; drop --output, or the sink's path", ErrUsage, pq.Name(), s.Name(), p, f.output)
	}
	return nil
}

// badLimit is --max-bad: a count (more than n bad events fail the run, as
// soon as it is crossed) or a percentage of the events read (checked at
// the end of the input). Unset, a run fails only when every event is bad.
type badLimit struct {
	set bool
	pct bool
	n   int64   // a count
	p   float64 // a percentage, 0..100
}

func parseMaxBad(s string) (badLimit, error) {
	if s == "" {
		return badLimit{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || v > 100 || v != v {
			return badLimit{}, fmt.Errorf("%w: --max-bad %q: a percentage is 0%% to 100%%", ErrUsage, s)
		}
		return badLimit{set: true, pct: true, p: v}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return badLimit{}, fmt.Errorf("%w: --max-bad %q: want a count (e.g. 100) or a percentage of the events read (e.g. 1%%)", ErrUsage, s)
	}
	return badLimit{set: true, n: n}, nil
}

func (l badLimit) String() string {
	switch {
	case !l.set:
		return "every event was bad"
	case l.pct:
		return fmt.Sprintf("--max-bad %s%%", strconv.FormatFloat(l.p, 'f', -1, 64))
	}
	return fmt.Sprintf("--max-bad %d", l.n)
}

// crossedAtEnd returns the limit that bad of read events crosses at the
// end of the input, or "".
func (l badLimit) crossedAtEnd(bad, read int64) string {
	switch {
	case !l.set:
		if read > 0 && bad == read {
			return "every event was bad"
		}
	case l.pct:
		if read > 0 && float64(bad)*100 > l.p*float64(read) {
			return l.String()
		}
	}
	return ""
}

// splitPositional lets the query file come before the flags, as in
// `ubik run q.sql --input events.jsonl`.
func splitPositional(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func pickProgramQuery(qs []*planQuery, name string) (*planQuery, error) {
	if len(qs) == 0 {
		return nil, ubik.ErrNoQuery
	}
	if name == "" && len(qs) == 1 {
		return qs[0], nil
	}
	var names []string
	for _, q := range qs {
		if q.Name() == name {
			return q, nil
		}
		names = append(names, q.Name())
	}
	if name == "" {
		return nil, fmt.Errorf("%w: the script has queries %s; choose one with --query", ErrUsage, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%w: no query named %q (have %s)", ErrUsage, name, strings.Join(names, ", "))
}

// sqlError renders a positioned SQL error with the line and a caret.
func sqlError(path string, err error) error {
	type caret interface{ Caret() string }
	var c caret
	if errors.As(err, &c) {
		return fmt.Errorf("%s: %v\n%s", path, err, c.Caret())
	}
	return fmt.Errorf("%s: %v", path, err)
}

func openInput(env *Env, flagPath, optPath string) (io.ReadCloser, string, int64, error) {
	p := flagPath
	if p == "" {
		p = optPath
	}
	if p == "" || p == "-" {
		return io.NopCloser(env.Stdin), "stdin", 0, nil
	}
	fh, err := os.Open(p)
	if err != nil {
		return nil, "", 0, err
	}
	var size int64
	if fi, err := fh.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return fh, p, size, nil
}

func openOutput(env *Env, p string) (io.Writer, func() error, error) {
	if p == "" || p == "-" {
		return env.Stdout, func() error { return nil }, nil
	}
	fh, err := os.Create(p)
	if err != nil {
		return nil, nil, err
	}
	return fh, fh.Close, nil
}

// formatRecord renders one record: tsv is key<TAB>value; jsonl is an
// envelope {"key":..., "value":..., "query", "final", "revision",
// "window_start", "window_end", "window_positions"} whose key and value are
// the contract bytes embedded verbatim.
func formatRecord(b []byte, format string, r *changelog.Record) []byte {
	if format == "tsv" {
		b = append(b, r.Key...)
		b = append(b, '\t')
		b = append(b, r.Value...)
		return append(b, '\n')
	}
	b = append(b, `{"key": `...)
	b = append(b, r.Key...)
	b = append(b, `, "value": `...)
	b = append(b, r.Value...)
	b = append(b, `, "query": `...)
	b = changelog.AppendString(b, r.Meta.Query)
	b = append(b, `, "final": `...)
	b = strconv.AppendBool(b, r.Meta.Final)
	b = append(b, `, "revision": `...)
	b = strconv.AppendUint(b, r.Meta.Revision, 10)
	if r.Meta.Windowed {
		b = append(b, `, "window_start": `...)
		b = appendTimestamp(b, r.Meta.WindowStart)
		b = append(b, `, "window_end": `...)
		b = appendTimestamp(b, r.Meta.WindowEnd)
	}
	b = append(b, `, "window_positions": [`...)
	for i, p := range r.Meta.WindowPositions {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return append(b, "]}\n"...)
}

// writeDead writes one dead letter: the input, the query (when a run has
// several), the line, the error and the event's text.
func writeDead(w io.Writer, input, query string, line int64, event []byte, err error) error {
	b := []byte(`{"input": `)
	b = changelog.AppendString(b, input)
	if query != "" {
		b = append(b, `, "query": `...)
		b = changelog.AppendString(b, query)
	}
	b = append(b, `, "line": `...)
	b = strconv.AppendInt(b, line, 10)
	b = append(b, `, "error": `...)
	b = changelog.AppendString(b, cleanMessage(err.Error()))
	b = append(b, `, "event": `...)
	if event == nil {
		b = append(b, "null"...)
	} else {
		b = changelog.AppendString(b, string(event))
	}
	b = append(b, "}\n"...)
	_, werr := w.Write(b)
	return werr
}

// appendLate renders one late event: the query, the contract key of the
// (group, window) it was for, the reason, its event time, the window and
// the watermark, the event's declared columns by name (ubik.LateEvent.Row), and the
// whole input record as read (ev.Event, which the driver
// sets on every host) with its line number when the input has lines (a
// file; 0 for a Kafka source), so the event can be replayed.
func appendLate(b []byte, query string, line int64, ev *ubik.LateEvent) []byte {
	b = append(b, `{"query": `...)
	b = changelog.AppendString(b, query)
	if ev.Windowed {
		// The contract key of the (group, window) the event was for, so a
		// host can match late events to the records they would have changed.
		b = append(b, `, "key": `...)
		b = append(b, ev.Key...)
	}
	b = append(b, `, "reason": `...)
	b = changelog.AppendString(b, ev.Reason)
	b = append(b, `, "event_time": `...)
	b = appendTimestamp(b, ev.EventTime)
	if ev.Windowed {
		b = append(b, `, "window_start": `...)
		b = appendTimestamp(b, ev.WindowStart)
		b = append(b, `, "window_end": `...)
		b = appendTimestamp(b, ev.WindowEnd)
	}
	b = append(b, `, "watermark": `...)
	b = appendTimestamp(b, ev.Watermark)
	b = append(b, `, "row": `...)
	b = append(b, ev.Row...)
	if ev.Event != nil {
		if line > 0 {
			b = append(b, `, "line": `...)
			b = strconv.AppendInt(b, line, 10)
		}
		b = append(b, `, "event": `...)
		b = changelog.AppendString(b, string(ev.Event))
	}
	return append(b, "}\n"...)
}

// appendTimestamp appends a TIMESTAMP cell of a JSON line: its text,
// quoted, as changelog.AppendCell writes one.
func appendTimestamp(b []byte, us int64) []byte {
	return append(changelog.AppendTimestamp(append(b, '"'), us), '"')
}

type planQuery = ubik.Plan

// joinTable is the versioned table of q's temporal join, or nil.
func joinTable(q *planQuery) *ubik.Source {
	_, t, _ := q.TemporalJoin()
	return t
}
