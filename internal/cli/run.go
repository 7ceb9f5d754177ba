package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/kafka"
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
	var f runFlags
	fs.StringVar(&f.input, "input", "", "input file of JSON lines or CSV (- for stdin; default: the source's path option, else stdin)")
	fs.StringVar(&f.output, "output", "-", "where the changelog goes (- for stdout; default: the CREATE SINK's path option, else stdout)")
	fs.StringVar(&f.outputDir, "output-dir", "", "run every query of the script, each writing its changelog to DIR/QUERY.tsv (or .jsonl), unless its CREATE SINK names a path")
	fs.StringVar(&f.format, "format", "tsv", "record format: tsv (key<TAB>value) or jsonl (an envelope with the metadata)")
	fs.StringVar(&f.query, "query", "", "which query of the script to run (default: its only query; see --output-dir)")
	fs.BoolVar(&f.strict, "strict", false, "stop at the first malformed event or evaluation error (the same as --max-bad 0)")
	fs.StringVar(&f.maxBad, "max-bad", "", "fail the run (exit status 3) when more than N events, or more than P% of the events read, are malformed or fail to evaluate, counted over every input of the run (default: fail only when every event does)")
	fs.StringVar(&f.statsJSON, "stats-json", "", "write the run summary as JSON to this file")
	fs.BoolVar(&f.noProgress, "no-progress", false, "never show the progress bar")
	fs.BoolVar(&f.quiet, "quiet", false, "do not print the summary")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "write each malformed event with its line number and error to this file (JSON lines)")
	fs.StringVar(&f.lateOutput, "late-output", "", "write each late event (its input line, its line number, the key it was for, the reason) to this file (JSON lines)")
	fs.IntVar(&f.threads, "threads", 0, "run each query's groups as N shards on their own threads, split by group key, with N threads decoding the input lines in blocks while the reading thread cuts the lines and merges; the changelog is byte for byte the one-thread changelog. Default (0): 1 (on 2 cores, 2 threads measured slower in wall time than 1, for 1.8 times the CPU; try it on more cores; CSV input gains nothing, its reading thread decodes every record itself). A query with no GROUP BY key (one group), a join, a view another query reads, and a run with --strict or --late-output, run on one thread")
	fs.StringVar(&f.stateDir, "state-dir", "", "checkpoint state, input position and output lengths here; rerunning the same command after a crash or a stop resumes")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for performance work)")
	fs.BoolVar(&f.infer, "infer", false, "when the query reads a source the script does not declare, infer it from the first records of --input and print the CREATE SOURCE")
	fs.StringVar(&f.metrics, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464); off by default")
	fs.DurationVar(&f.checkpointEvery, "checkpoint-interval", time.Second, "how often to checkpoint with --state-dir")
	fs.IntVar(&f.joinBuffer, "join-buffer", ubik.DefaultJoinBuffer, "the most rows a join holds: an interval join's rows of both inputs together (ubik explain gives the bytes per row), a temporal join's events waiting for the table's watermark; one more stops the run with an error")
	kf := addKafkaFlags(fs) // run_kafka.go
	setUsage(fs, env, "usage: ubik run QUERY.sql [--input FILE] [--output FILE | --output-dir DIR] [--format tsv|jsonl] [flags]\n\n"+
		"exit status: 0 done, 1 error, 2 usage error, 3 too many bad events (--max-bad), 130 or 143 stopped by SIGINT or SIGTERM (a Kafka run without --until-caught-up: 0)",
		"ubik run examples/merchant_totals.sql --input examples/events.jsonl",
		"ubik run views.sql --input events.jsonl --output-dir out/ --max-bad 1%",
		"ubik run q.sql --input events.jsonl --output totals.tsv --state-dir state/ --dead-letter bad.jsonl")
	sqlPath, rest := splitPositional(args)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	sqlPath, err := onePositional(fs, sqlPath)
	if err != nil {
		return err
	}
	if sqlPath == "" {
		return fmt.Errorf("%w: run needs a query file (ubik run --help shows the flags)", ErrUsage)
	}
	if f.format != "tsv" && f.format != "jsonl" {
		return fmt.Errorf("%w: --format must be tsv or jsonl, got %q", ErrUsage, f.format)
	}
	limit, err := parseMaxBad(f.maxBad)
	if err != nil {
		return err
	}
	if err := checkJoinBuffer(&f); err != nil {
		return err
	}
	if f.strict {
		if f.set["max-bad"] {
			return fmt.Errorf("%w: --strict is --max-bad 0; give one of them", ErrUsage)
		}
		limit = badLimit{set: true}
	}
	sqlText, err := os.ReadFile(sqlPath)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	name := f.query
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(sqlPath), filepath.Ext(sqlPath))
	}
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		return err
	}
	defer eng.Close()
	if f.infer {
		if src := ubik.UndeclaredSource(string(sqlText)); src != "" {
			var decl string
			if f.input == "" || f.input == "-" {
				decl, env, err = inferStdin(env, src, 1000)
			} else {
				decl, err = inferFile(f.input, src, "", 1000, "")
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "ubik: inferred source %s (keep it in your script):\n%s", src, decl)
			if err := eng.Exec(decl); err != nil {
				return fmt.Errorf("inferred source: %w", err)
			}
		}
	}
	prog, err := eng.CompileViews(string(sqlText), name)
	if err != nil {
		return inferHint(sqlError(sqlPath, err), string(sqlText), true)
	}
	resolveScriptPaths(prog, sqlPath)
	pqs, err := pickTargets(prog, &f)
	if err != nil {
		if q := kafkaChain(prog, kf, &f); q != nil {
			pqs, err = []*planQuery{q}, nil // a Kafka run of a script that is one chain of views
		} else {
			return err
		}
	}
	for _, pq := range pqs {
		if !kf.wanted(prog, pq) && !(len(pq.Views()) > 0 && kf.wanted(prog, inputQuery(pq))) {
			continue
		}
		if len(pqs) > 1 {
			// A chain of views runs as one graph: the query that reads
			// the others is the one to name.
			last := pqs[len(pqs)-1]
			for _, o := range pqs[:len(pqs)-1] {
				if !slices.Contains(allViews(last), o) {
					return fmt.Errorf("%w: query %s runs over Kafka, and a Kafka run runs one query, or one query with the views it reads: choose it with --query", ErrUsage, pq.Name())
				}
			}
			pq = last
		}
		if err := kafka.CheckPlan(pq); err != nil {
			return fmt.Errorf("%w: %s", ErrUsage, strings.TrimPrefix(err.Error(), kafka.ErrUnsupported.Error()+": "))
		}
		return runKafka(ctx, env, kf, &f, prog, pq)
	}
	if err := checkRunScope(f.set, false); err != nil {
		return err
	}
	if len(pqs) > 1 {
		for _, pq := range pqs[1:] {
			if a, b := firstInput(pqs[0]), firstInput(pq); a != b && graphSecond(pqs) == nil {
				return fmt.Errorf("%w: queries %s and %s read different sources (%s, %s), and a run reads one input: run each with --query", ErrUsage, pqs[0].Name(), pq.Name(), a.Name(), b.Name())
			}
		}
		if f.stateDir != "" && !readsView(pqs) {
			return fmt.Errorf("%w: --state-dir checkpoints one query, or the queries of one graph of views; choose one with --query", ErrUsage)
		}
		if f.set["output"] {
			return fmt.Errorf("%w: the script runs %d queries; --output-dir DIR gives each its own file (--output is for one query)", ErrUsage, len(pqs))
		}
	}
	if len(pqs) == 1 {
		if err := outputConflict(prog, pqs[0], &f); err != nil {
			return err
		}
	}
	targets := make([]*runTarget, len(pqs))
	for i, pq := range pqs {
		targets[i] = &runTarget{pq: pq, out: outputPath(prog, pq, &f, len(pqs))}
	}
	if f.outputDir != "" {
		if err := os.MkdirAll(f.outputDir, 0o755); err != nil {
			return err
		}
	}
	pq := pqs[0]
	input := inputQuery(pq).Source() // the declared source the run reads (a view's, for a query over views)
	second := graphSecond(pqs)       // a join of two views over two sources: the other source
	if second != nil {
		input = inputQuery(pqs[len(pqs)-1]).Source() // the graph's first input: its primary's
	}
	ijq := streamJoin(pqs) // an interval join of two streams (the query's, or a view's of the graph): its right is the second input
	if ijq != nil {
		input, _, _ = ijq.IntervalJoin()
	}
	if _, _, ok := pq.IntervalJoin(); ok && len(pq.Views()) == 0 && len(pqs) > 1 && !readsView(pqs) {
		return fmt.Errorf("%w: query %s is an interval join of two inputs, which runs alone: choose it with --query", ErrUsage, pq.Name())
	}
	if f.threads <= 0 {
		// One thread unless asked: on the 2-core machines this is
		// measured on, two threads took 1.04 to 1.12 of one thread's
		// wall time for 1.8 to 1.9 times its CPU (bench/results/
		// 2026-12-02-threads-the-default.md), so more threads by default would cost
		// every run CPU and gain it nothing.
		f.threads = 1
	}

	inPath := f.input
	if inPath == "" {
		inPath = input.Option("path")
	}
	var ck *checkpointFile
	if f.stateDir != "" {
		if inPath == "" || inPath == "-" {
			return fmt.Errorf("%w: --state-dir needs an input file to resume from (not stdin)", ErrUsage)
		}
		for _, t := range targets {
			if t.out == "-" {
				return fmt.Errorf("%w: --state-dir needs --output FILE (or --output-dir DIR): a resumed run cuts the output back to its last checkpoint", ErrUsage)
			}
		}
		abs, _ := filepath.Abs(inPath)
		if ck, err = newCheckpointFile(f.stateDir, string(sqlText), targetNames(targets), abs); err != nil {
			return err
		}
		defer ck.close()
	}

	// The dead-letter and late outputs. The hooks write through these
	// variables, which are set before the first event; a write error is
	// kept in sideErr and stops the run, as an error of the changelog does.
	var dead, lateW io.Writer
	var lateBuf []byte
	var sideErr error
	var curLineNo int64 // the line of the input record being pushed, for the late output
	var lateHook func(string, *ubik.LateEvent)
	if f.lateOutput != "" {
		lateHook = func(query string, ev *ubik.LateEvent) {
			lateBuf = appendLate(lateBuf[:0], query, curLineNo, ev)
			if _, err := lateW.Write(lateBuf); err != nil && sideErr == nil {
				sideErr = fmt.Errorf("--late-output %s: %w", f.lateOutput, err)
			}
		}
	}
	var onBad func(t *runTarget, lineNo int64, event []byte, err error) // set below, before the first line
	owners, err := startTargets(eng, targets, &f, lateHook,
		func(t *runTarget, lineNo int64, event []byte, err error) { onBad(t, lineNo, event, err) }, env.Stderr)
	if err != nil {
		return err
	}
	q := owners[0].q
	var resume ckptHeader
	resumed := false // the state came from a checkpoint (a join's table with it)
	if ck != nil {
		h, err := ck.load(q)
		if err != nil {
			return err
		}
		if h != nil {
			resumed = true
			if h.Finished {
				fmt.Fprintf(env.Stderr, "ubik: %s: the run checkpointed in %s already completed; remove the state dir to run again\n", pq.Name(), f.stateDir)
				// --stats-json still gets the completed run's summary, from
				// the checkpoint's counters: a run killed after its last
				// checkpoint may have left the file empty or absent.
				var sums []summary
				for _, t := range targets {
					sums = append(sums, newSummary(t.pq.Name(), t.stats(), 0, t.inputNames(input, second)))
				}
				return writeStatsJSON(f.statsJSON, sums)
			}
			resume = *h
			fmt.Fprintf(env.Stderr, "ubik: %s: resuming from line %d of %s\n", pq.Name(), h.Line, inPath)
		}
	}

	in, inName, size, err := openInput(env, inPath, "")
	if err != nil {
		return err
	}
	defer in.Close()
	if resume.InputOffset > 0 {
		if size > 0 && resume.InputOffset > size {
			return fmt.Errorf("resume: the checkpoint in %s is at byte %d of %s, which has %d bytes: the input is not the one the run read; remove the state dir to start over", f.stateDir, resume.InputOffset, inPath, size)
		}
		if _, err := in.(io.Seeker).Seek(resume.InputOffset, io.SeekStart); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	var files [3]*resumableFile // with --state-dir: changelog, dead letters, late events
	var extra []*resumableFile  // with --state-dir: the other changelogs of a graph of views
	var finish []func() error   // flush and close every output, at the end
	var liveFlush []func() error
	if ck != nil {
		paths := [3]string{targets[0].out, f.deadLetter, f.lateOutput}
		for i, p := range paths {
			if p == "" {
				continue
			}
			if files[i], err = openResumable(p, resume.Outputs[i]); err != nil {
				return err
			}
			defer files[i].Close()
		}
		targets[0].w = files[0]
		for i, t := range targets[1:] { // the further outputs of a graph of views
			var keep int64
			if i < len(resume.Extra) {
				keep = resume.Extra[i]
			}
			rf, err := openResumable(t.out, keep)
			if err != nil {
				return err
			}
			defer rf.Close()
			t.w = rf
			extra = append(extra, rf)
			finish = append(finish, func() error { _, err := rf.sync(); return err })
			liveFlush = append(liveFlush, rf.w.Flush)
		}
		if files[1] != nil {
			dead = files[1]
		}
		if files[2] != nil {
			lateW = files[2]
		}
		finish = append(finish, func() error { _, err := files[0].sync(); return err })
		liveFlush = append(liveFlush, files[0].w.Flush)
	} else {
		for _, t := range targets {
			out, closeOut, err := openOutput(env, t.out)
			if err != nil {
				return err
			}
			bw := bufio.NewWriterSize(out, 256<<10)
			t.w = bw
			liveFlush = append(liveFlush, bw.Flush)
			finish = append(finish, func() error {
				err := bw.Flush()
				if cerr := closeOut(); err == nil {
					err = cerr
				}
				return err
			})
		}
		for _, o := range []struct {
			path, flag string
			dst        *io.Writer
		}{{f.deadLetter, "--dead-letter", &dead}, {f.lateOutput, "--late-output", &lateW}} {
			if o.path == "" {
				continue
			}
			fh, err := os.Create(o.path)
			if err != nil {
				return err
			}
			defer fh.Close()
			bw := bufio.NewWriter(fh)
			*o.dst = bw
			flagName, path := o.flag, o.path
			finish = append(finish, func() error {
				err := bw.Flush()
				if cerr := fh.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", flagName, path, err)
				}
				return nil
			})
		}
	}
	flushAll := func() error {
		for _, fl := range liveFlush {
			if err := fl(); err != nil {
				return err
			}
		}
		return nil
	}

	// Without --dead-letter, the first few bad events are reported on
	// stderr with their line numbers; the summary counts all of them.
	const reportMalformed = 10
	reported := 0
	report := func(t *runTarget, lineNo int64, err error) {
		if dead != nil {
			return
		}
		who := ""
		if len(owners) > 1 { // a graph reads its input once: its bad events are the input's
			who = t.pq.Name() + ": "
		}
		if reported < reportMalformed {
			fmt.Fprintf(env.Stderr, "ubik: %s%s:%d: %s: %s\n", who, inName, lineNo, badKind(err), cleanMessage(err.Error()))
		} else if reported == reportMalformed {
			fmt.Fprintf(env.Stderr, "ubik: more bad events follow; --dead-letter FILE records every one\n")
		}
		reported++
	}
	writeDeadLetter := func(t *runTarget, lineNo int64, event []byte, err error) {
		if dead == nil {
			return
		}
		query := ""
		if len(owners) > 1 {
			query = t.pq.Name()
		}
		if werr := writeDead(dead, inName, query, lineNo, event, err); werr != nil && sideErr == nil {
			sideErr = fmt.Errorf("--dead-letter %s: %w", f.deadLetter, werr)
		}
	}

	// countBad counts one bad event of input i (0 the first, 1 a second
	// input: a join's table or right stream, a graph's second source) at
	// path:lineNo and returns the error that stops the run when the event
	// crosses --max-bad (or --strict). The limit is on the run's total
	// over every input, as the summary's malformed count is.
	names := owners[0].inputNames(input, second)
	countBad := func(t *runTarget, i int, path string, lineNo int64, err error) error {
		t.bad++
		t.badIn[i]++
		if !limit.set || limit.pct || t.bad <= limit.n {
			return nil
		}
		t.limit = limit.String()
		at := fmt.Sprintf("%s:%d", path, lineNo)
		if len(names) == 2 {
			at += " (input " + names[i] + ")"
		}
		if f.strict {
			return fmt.Errorf("%w: %s: %s (--strict stops at the first bad event)", ErrBadInput, at, cleanMessage(err.Error()))
		}
		if len(names) == 2 {
			return fmt.Errorf("%w: %s: more than %d events were malformed or failed to evaluate over its inputs (--max-bad %s counts every input: %s %d, %s %d); the last at %s: %s",
				ErrBadInput, t.pq.Name(), limit.n, f.maxBad, names[0], t.badIn[0], names[1], t.badIn[1], at, cleanMessage(err.Error()))
		}
		return fmt.Errorf("%w: %s: more than %d events were malformed or failed to evaluate (--max-bad %s); the last at %s: %s",
			ErrBadInput, t.pq.Name(), limit.n, f.maxBad, at, cleanMessage(err.Error()))
	}
	// onSecondBad takes a bad record of the second input (path:lineNo):
	// to --dead-letter or stderr (the first ten), and into the count.
	secondReported := 0
	onSecondBad := func(path string, lineNo int64, event []byte, err error) error {
		t := owners[0]
		if dead != nil {
			if werr := writeDead(dead, path, t.pq.Name(), lineNo, event, err); werr != nil {
				return fmt.Errorf("--dead-letter %s: %w", f.deadLetter, werr)
			}
		} else {
			if secondReported < reportMalformed {
				fmt.Fprintf(env.Stderr, "ubik: %s:%d: %s: %s\n", path, lineNo, badKind(err), cleanMessage(err.Error()))
			}
			secondReported++
		}
		return countBad(t, 1, path, lineNo, err)
	}

	var bar *progressbar.ProgressBar
	if env.IsTerminal && !f.noProgress && size > 0 {
		bar = newProgressBar(env.Stderr, size)
	}

	var metrics []*queryMetrics
	publish := func() {
		for i, m := range metrics {
			m.publish(targets[i].stats())
		}
	}
	if f.metrics != "" {
		for _, t := range targets {
			m := newQueryMetrics(t.pq.Name())
			m.setInputs(t.inputNames(input, second))
			metrics = append(metrics, m)
		}
		publish()
		stop, bound, err := serveMetrics(ctx, env.Stderr, f.metrics, metrics...)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(env.Stderr, "ubik: metrics on http://%s/metrics\n", bound)
	}

	var right *rightInput // an interval join's right input
	var firstErr error    // the run's error: it stops reading
	// checkpoint makes the outputs durable, then records their lengths with
	// the state and the input position in one atomic file.
	checkpoint := func(pos, line int64, finished bool) error {
		h := ckptHeader{Finished: finished, InputOffset: pos, Line: line}
		if right != nil {
			h.Right, h.RightOffset, h.RightLine = true, right.offset, right.line
		}
		// Every record of the events read so far reaches the outputs
		// before their lengths are taken.
		if err := q.Flush(); err != nil {
			return err
		}
		if firstErr != nil {
			return firstErr // a bad line the flush reported crossed --max-bad
		}
		for i, rf := range files {
			if rf == nil {
				continue
			}
			n, err := rf.sync()
			if err != nil {
				return err
			}
			h.Outputs[i] = n
		}
		for _, rf := range extra {
			n, err := rf.sync()
			if err != nil {
				return err
			}
			h.Extra = append(h.Extra, n)
		}
		return ck.save(q, h)
	}
	lastCkpt := time.Now()

	csvInput := strings.EqualFold(input.Option("format"), "csv")
	if csvInput && resume.InputOffset > 0 && !strings.EqualFold(input.Option("header"), "false") {
		// The header names the columns: read it again from the start.
		hf, err := os.Open(inPath)
		if err != nil {
			return err
		}
		hdr, _, _, _ := readRecord(bufio.NewReader(hf), true)
		hf.Close()
		if err := q.Push(bytes.TrimPrefix(trimCR(hdr), utf8BOM)); err != nil {
			return fmt.Errorf("resume: CSV header: %w", err)
		}
	}

	if ijq != nil {
		left, r, _ := ijq.IntervalJoin()
		if right, err = openRightInput(r, left, resume.RightOffset, resume.RightLine); err != nil {
			return err
		}
	} else if second != nil {
		if right, err = openRightInput(second, input, resume.RightOffset, resume.RightLine); err != nil {
			return err
		}
	}
	if right != nil {
		defer right.fh.Close()
		if err := right.csvHeader(q, resumed, right.src.Option("header")); err != nil {
			return err
		}
	}
	started := time.Now()
	if jq := graphJoin(pqs); jq != nil && !resumed {
		// The join's query, or the view of the graph that joins.
		if err := loadTable(q, jq, onSecondBad, &curLineNo); errors.Is(err, ErrBadInput) {
			firstErr = err // the table crossed --max-bad: the summary says so, with what was read
		} else if err != nil {
			return err
		}
	}
	br := bufio.NewReaderSize(in, 1<<20)
	next := func() ([]byte, int64, int64, error) { return readRecord(br, csvInput) }
	if size == 0 {
		// stdin, a pipe or a FIFO: input can stall for any time, and early
		// emission and output must not wait for the next line.
		stop := make(chan struct{})
		defer close(stop)
		// The first query's early interval paces the ticks; the others
		// tick with it.
		tickAll := func() error {
			for _, t := range owners[1:] {
				if err := t.q.Tick(); err != nil {
					return err
				}
			}
			return flushAll()
		}
		next = liveRecords(ctx, br, csvInput, owners[0].q, tickAll, stop)
	}
	lineNo := resume.Line
	readBytes := resume.InputOffset
	var lastBar int64
	stopped := false
	onBad = func(t *runTarget, lineNo int64, event []byte, err error) {
		if firstErr != nil {
			return // the run stopped at an earlier line: this one was read ahead, not taken
		}
		writeDeadLetter(t, lineNo, event, err)
		report(t, lineNo, err)
		if e := countBad(t, 0, inName, lineNo, err); e != nil {
			firstErr = e
		}
	}
	lastPoll := readBytes
	for firstErr == nil {
		// A signal and the checkpoint clock are polled every 4096 lines
		// and every pollBytes of input, so a run of long events stops as
		// promptly as a run of short ones.
		if lineNo&4095 == 0 || readBytes-lastPoll >= pollBytes {
			lastPoll = readBytes
			publish()
			if ctx.Err() != nil {
				stopped = true
				if ck != nil {
					// A graceful stop checkpoints, so the next run resumes here.
					firstErr = checkpoint(readBytes, lineNo, false)
				}
				break
			}
			if ck != nil && time.Since(lastCkpt) >= f.checkpointEvery {
				if err := checkpoint(readBytes, lineNo, false); err != nil {
					firstErr = err
					break
				}
				lastCkpt = time.Now()
			}
		}
		line, nlines, size, rerr := next()
		tooLong := errors.Is(rerr, errTooLong)
		if len(line) == 0 && rerr != nil && !tooLong {
			if errors.Is(rerr, context.Canceled) && ctx.Err() != nil {
				stopped = true
			} else if rerr != io.EOF {
				firstErr = rerr
			}
			break
		}
		atStart := readBytes == 0
		lineNo += nlines
		readBytes += size
		if bar != nil && readBytes-lastBar > 1<<20 {
			bar.Set64(readBytes)
			lastBar = readBytes
		}
		if tooLong {
			err := tooLongError(nlines, size)
			for _, t := range owners {
				if ferr := t.q.ReportMalformedAt(lineNo, err); ferr != nil && firstErr == nil {
					firstErr = ferr
				}
			}
			continue
		}
		line = trimCR(line)
		if atStart {
			line = bytes.TrimPrefix(line, utf8BOM) // a UTF-8 byte order mark is not data
		}
		if blankLine(line) {
			continue // an empty or blank line is no event
		}
		for right != nil && firstErr == nil && right.behind(q) {
			firstErr = right.pushOne(q, onSecondBad, &curLineNo)
		}
		if firstErr != nil {
			break
		}
		curLineNo = lineNo
		// A bad line reaches onBad, in input order (on several threads
		// perhaps during a later line's Feed).
		for _, t := range owners {
			err := t.q.Feed(line, lineNo)
			if firstErr != nil {
				break
			}
			if err == nil {
				continue
			}
			if errors.Is(err, ubik.ErrCSVHeader) {
				err = fmt.Errorf("%s:%d: %w", inName, lineNo, err)
			}
			firstErr = err
			break
		}
		if firstErr == nil && sideErr != nil {
			firstErr = sideErr
		}
	}
	if right != nil && firstErr == nil && !stopped && !right.done {
		// The first file ended before the second: its input ends now, so
		// the join holds no row of the rest of the second for it (without
		// this, every one of them would be held until the end).
		firstErr = q.EndInput(input.Name())
	}
	// The rest of the second file: stopped by a signal and checkpointed
	// as the main loop is, so a long rest is not read again after a crash.
	for n := 1; right != nil && firstErr == nil && !stopped && !right.done; n++ {
		if n&4095 == 0 {
			publish()
			if ctx.Err() != nil {
				stopped = true
				if ck != nil {
					firstErr = checkpoint(readBytes, lineNo, false)
				}
				break
			}
			if ck != nil && time.Since(lastCkpt) >= f.checkpointEvery {
				if firstErr = checkpoint(readBytes, lineNo, false); firstErr != nil {
					break
				}
				lastCkpt = time.Now()
			}
		}
		firstErr = right.pushOne(q, onSecondBad, &curLineNo)
	}
	if firstErr == nil && stopped {
		// Stopped: the records of every line read are delivered.
		for _, t := range owners {
			if err := t.q.Flush(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr == nil && !stopped {
		for _, t := range owners {
			if err := t.q.Close(); err != nil && firstErr == nil {
				firstErr = err
			}
			if firstErr != nil {
				break
			}
		}
		if firstErr == nil && sideErr != nil {
			firstErr = sideErr
		}
		if firstErr == nil && ck != nil {
			firstErr = checkpoint(readBytes, lineNo, true)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	for _, fin := range finish {
		if err := fin(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	elapsed := time.Since(started)
	publish()
	var sums []summary
	for _, t := range targets {
		st := t.stats()
		if firstErr == nil && !stopped {
			read := st.EventsIn
			if len(t.inputNames(input, second)) == 2 {
				read += st.Table.RowsIn // the second input's rows: the limit is over every input
			}
			if lim := limit.crossedAtEnd(t.bad, read); lim != "" {
				t.limit = lim
				firstErr = fmt.Errorf("%w: %s: %d of %d events were malformed or failed to evaluate (%s)", ErrBadInput, t.pq.Name(), t.bad, read, lim)
			}
		}
		sum := newSummary(t.pq.Name(), st, elapsed, t.inputNames(input, second))
		sum.BadInputLimit = t.limit
		if stopped {
			sum.Stopped = stopCause(ctx).Error()
			sum.StoppedAtLine = lineNo
		}
		sums = append(sums, sum)
		if !f.quiet {
			sum.print(env.Stderr)
		}
	}
	if err := writeStatsJSON(f.statsJSON, sums); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr == nil && stopped {
		return stopCause(ctx)
	}
	return joinBoundError(firstErr, &f, ijq)
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
	return f.output
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

// kafkaChain returns, for a Kafka run without --query, the script's last
// query when it reads every other one (the script is one chain of views,
// which a Kafka run runs whole), else nil.
func kafkaChain(prog *ubik.Program, kf *kafkaFlags, f *runFlags) *planQuery {
	qs := prog.Queries()
	if f.query != "" || len(qs) < 2 {
		return nil
	}
	last := qs[len(qs)-1]
	if !kf.wanted(prog, inputQuery(last)) && !kf.wanted(prog, last) {
		return nil
	}
	ups := allViews(last) // both sides of a join of two views too
	for _, q := range qs[:len(qs)-1] {
		if !slices.Contains(ups, q) {
			return nil
		}
	}
	return last
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

// ErrBadInput marks a run that crossed its bad-input limit (exit status 3).
var ErrBadInput = errors.New("bad input")

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

// liveRecords reads records on a goroutine of its own and hands them over
// through a bounded channel, so that while the input is quiet the run loop
// still ticks the query's early emission and flushes its output every
// 100 ms (or the query's early interval, if shorter). The query itself is
// only ever touched by the run loop.
func liveRecords(ctx context.Context, br *bufio.Reader, csv bool, q *ubik.Query, flush func() error, stop <-chan struct{}) func() ([]byte, int64, int64, error) {
	type rec struct {
		line    []byte
		n, size int64
		err     error
	}
	ch := make(chan rec, 256)
	go func() {
		for {
			line, n, size, err := readRecord(br, csv)
			r := rec{append([]byte(nil), line...), n, size, err} // the reader reuses its buffer
			select {
			case ch <- r:
			case <-stop:
				return
			}
			if err != nil && !errors.Is(err, errTooLong) {
				return
			}
		}
	}()
	every := 100 * time.Millisecond
	if e := q.Plan().EarlyEvery(); e > 0 && e < every {
		every = e
	}
	ticker := time.NewTicker(every)
	return func() ([]byte, int64, int64, error) {
		for {
			select {
			case r := <-ch:
				return r.line, r.n, r.size, r.err
			case <-ticker.C:
				if err := q.Tick(); err != nil {
					return nil, 0, 0, err
				}
				if err := flush(); err != nil {
					return nil, 0, 0, err
				}
			case <-ctx.Done():
				ticker.Stop()
				return nil, 0, 0, ctx.Err()
			}
		}
	}
}

// errTooLong marks a record longer than maxLineBytes (consumed, not kept).
var errTooLong = errors.New("record too long")

// tooLongError words an oversized record of n lines and size bytes, for
// the dead letter.
func tooLongError(n, size int64) error {
	if n == 1 {
		return fmt.Errorf("line longer than %d bytes", maxLineBytes)
	}
	return fmt.Errorf("record longer than %d bytes (%d bytes over %d lines)", maxLineBytes, size, n)
}

// readRecord returns the next event without its final newline, how many
// lines it spanned (one line, or for CSV as many lines as it takes to close
// every quoted field) and how many bytes of input it took, newlines
// included (the input offset a checkpoint resumes from). The error is
// io.EOF for a last line without a newline (or nothing left), errTooLong
// for an oversized record (consumed to its end, not kept: rec is nil).
// Each line is scanned once: a record is complete when its count of '"' is
// even, and that parity is kept line by line, so a quoted field over many
// lines costs time linear in its size.
func readRecord(br *bufio.Reader, csv bool) (rec []byte, lines, size int64, err error) {
	line, open, tooLong, size, err := readLine(br, csv)
	if !csv || !open || err != nil {
		if tooLong {
			return nil, 1, size, errTooLong
		}
		return line, 1, size, err
	}
	if !tooLong {
		rec = append([]byte(nil), line...)
	}
	lines = 1
	for open {
		next, odd, nextTooLong, n, rerr := readLine(br, true)
		size += n
		err = rerr
		if len(next) == 0 && err != nil && !nextTooLong {
			break
		}
		lines++
		open = open != odd
		if !tooLong && (nextTooLong || len(rec)+1+len(next) > maxLineBytes) {
			tooLong, rec = true, nil // keep reading to the record's end, keeping nothing
		}
		if !tooLong {
			rec = append(append(rec, '\n'), next...)
		}
		if err != nil {
			break
		}
	}
	if tooLong {
		return nil, lines, size, errTooLong
	}
	return rec, lines, size, err
}

// quoteParity reports whether b holds an odd number of '"'.
func quoteParity(b []byte) bool {
	return bytes.Count(b, []byte{'"'})%2 == 1
}

// readLine returns the next line without its newline, how many bytes it
// took (its newline included) and, when quotes is set (CSV), whether it
// holds an odd number of '"' (counted as it is read, over the whole line; a
// JSON line skips the count, a pass over every byte). A line longer than
// maxLineBytes is consumed and reported with tooLong set (and line nil).
func readLine(br *bufio.Reader, quotes bool) (line []byte, odd, tooLong bool, size int64, err error) {
	line, err = br.ReadSlice('\n')
	odd = quotes && quoteParity(line)
	size = int64(len(line))
	if err == nil {
		return line[:len(line)-1], odd, false, size, nil
	}
	if err != bufio.ErrBufferFull {
		return line, odd, false, size, err
	}
	buf := append([]byte(nil), line...)
	for {
		line, err = br.ReadSlice('\n')
		odd = odd != (quotes && quoteParity(line))
		size += int64(len(line))
		if len(buf)+len(line) > maxLineBytes {
			tooLong, buf = true, nil
		} else if !tooLong {
			buf = append(buf, line...)
		}
		if err == nil {
			if tooLong {
				return nil, odd, true, size, nil
			}
			return buf[:len(buf)-1], odd, false, size, nil
		}
		if err != bufio.ErrBufferFull {
			if tooLong {
				return nil, odd, true, size, nil
			}
			return buf, odd, false, size, err
		}
	}
}

// blankLine reports whether line is empty or all white space (Unicode's,
// as bytes.TrimSpace). An event line starts with '{' or a CSV field: a
// first byte that is printable ASCII decides, and only a line that starts
// with ASCII white space or a non-ASCII byte is trimmed.
func blankLine(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' && line[0] < 0x80 {
		return false
	}
	return len(bytes.TrimSpace(line)) == 0
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
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

// summary is what a run reports at the end: the text line on stderr and
// --stats-json use the same names (docs/operations.md, "What `ubik run` prints"), and the
// Prometheus metrics are ubik_<name>_total for the counters.
type summary struct {
	Query              string  `json:"query"`
	EventsRead         int64   `json:"events_read"`
	Malformed          int64   `json:"malformed"`
	EvalErrors         int64   `json:"eval_errors"`
	Filtered           int64   `json:"filtered"`
	Late               int64   `json:"late"`
	Duplicates         int64   `json:"duplicates"`
	DedupLate          int64   `json:"dedup_late"`
	DedupKeys          int64   `json:"dedup_keys"`
	RecordsEmitted     int64   `json:"records_emitted"`
	HavingSuppressed   int64   `json:"having_suppressed"`
	Unchanged          int64   `json:"unchanged_suppressed"`
	WindowsFinalized   int64   `json:"windows_finalized"`
	WallSeconds        float64 `json:"wall_seconds"`
	EventsPerSecond    float64 `json:"events_per_second"`
	EmitLatencyP50Ms   float64 `json:"emit_latency_p50_ms"`
	EmitLatencyP99Ms   float64 `json:"emit_latency_p99_ms"`
	StateBytes         int64   `json:"state_bytes"`
	StateBytesPeak     int64   `json:"state_bytes_peak"`
	LiveGroupsPeak     int64   `json:"live_groups_peak"`
	StateBytesPerGroup float64 `json:"state_bytes_per_group"`
	Watermark          string  `json:"watermark,omitempty"`
	BadInputLimit      string  `json:"bad_input_limit_crossed,omitempty"`
	Stopped            string  `json:"stopped,omitempty"`
	StoppedAtLine      int64   `json:"stopped_at_line,omitempty"`
	// Inputs are the counters of each input of a query that reads two (a
	// join: a stream and its versioned table, two streams, or two views
	// over two sources), first the one --input names; EventsRead,
	// Malformed and Late are then their sums.
	Inputs   []inputSummary   `json:"inputs,omitempty"`
	Join     *joinSummary     `json:"join,omitempty"`
	Interval *intervalSummary `json:"interval_join,omitempty"`
}

// inputSummary is one input's part of the run summary.
type inputSummary struct {
	Input      string `json:"input"`
	EventsRead int64  `json:"events_read"`
	Malformed  int64  `json:"malformed"`
	Late       int64  `json:"late"`
}

// inputNames names the two inputs of the target's query when it reads
// two (first the one read from --input), else nil. first and second are
// the run's inputs for a graph of views (second nil with one source).
func (t *runTarget) inputNames(first, second *ubik.Source) []string {
	switch pq := t.pq; {
	case t.via != nil:
		return nil // a query inside a graph: its own counters
	case joinTable(pq) != nil:
		return []string{pq.Source().Name(), joinTable(pq).Name()}
	case graphJoin([]*planQuery{pq}) != nil:
		j := graphJoin([]*planQuery{pq})
		return []string{j.Source().Name(), joinTable(j).Name()}
	case streamJoin([]*planQuery{pq}) != nil:
		left, right, _ := streamJoin([]*planQuery{pq}).IntervalJoin()
		return []string{left.Name(), right.Name()}
	case second != nil:
		return []string{first.Name(), second.Name()}
	}
	return nil
}

type planQuery = ubik.Plan

// joinTable is the versioned table of q's temporal join, or nil.
func joinTable(q *planQuery) *ubik.Source {
	_, t, _ := q.TemporalJoin()
	return t
}

// newSummary makes the summary of a query's counters; inputs names its
// two inputs when it reads two (Stats: the first's counters, Table the
// second's), nil for one.
func newSummary(name string, st ubik.Stats, elapsed time.Duration, inputs []string) summary {
	s := summary{
		Query:            name,
		EventsRead:       st.EventsIn,
		Malformed:        st.Malformed,
		EvalErrors:       st.EvalErrors,
		Filtered:         st.Filtered,
		Late:             st.Late,
		Duplicates:       st.Duplicates,
		DedupLate:        st.DedupLate,
		DedupKeys:        st.DedupKeys,
		RecordsEmitted:   st.RecordsOut,
		HavingSuppressed: st.HavingSuppressed,
		Unchanged:        st.UnchangedSuppressed,
		WindowsFinalized: st.WindowsFinalized,
		WallSeconds:      elapsed.Seconds(),
		EmitLatencyP50Ms: st.LatencyP50 / 1e6,
		EmitLatencyP99Ms: st.LatencyP99 / 1e6,
		StateBytes:       st.StateBytes,
		StateBytesPeak:   st.StateBytesPeak,
		LiveGroupsPeak:   st.LiveGroupsPeak,
	}
	if len(inputs) == 2 {
		s.Inputs = []inputSummary{
			{Input: inputs[0], EventsRead: st.EventsIn, Malformed: st.Malformed, Late: st.Late},
			{Input: inputs[1], EventsRead: st.Table.RowsIn, Malformed: st.Table.Malformed, Late: st.Table.Late},
		}
		s.EventsRead += st.Table.RowsIn
		s.Malformed += st.Table.Malformed
		s.Late += st.Table.Late
	}
	if elapsed > 0 {
		s.EventsPerSecond = float64(s.EventsRead) / elapsed.Seconds()
	}
	if st.LiveGroupsPeak > 0 {
		s.StateBytesPerGroup = float64(st.StateBytesPeak) / float64(st.LiveGroupsPeak)
	}
	if st.Watermark != minInt64 {
		s.Watermark = string(changelog.AppendTimestamp(nil, st.Watermark))
	}
	if st.Interval.LeftRows > 0 || st.Interval.RightRows > 0 {
		s.Interval = newIntervalSummary(st)
	} else if st.Table.RowsIn > 0 || st.Join.Events > 0 {
		s.Join = newJoinSummary(st)
	}
	return s
}

const minInt64 = -1 << 63

// writeStatsJSON writes the run summary to path (--stats-json; nothing for
// ""): one object, or an array for a graph's queries. It writes a
// temporary file and renames it, so a reader never sees a half-written
// summary, even of a run killed while writing it.
func writeStatsJSON(path string, sums []summary) error {
	if path == "" {
		return nil
	}
	var v any = sums
	if len(sums) == 1 {
		v = sums[0]
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("--stats-json %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--stats-json: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--stats-json: %w", err)
	}
	return nil
}

func (s summary) print(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "ubik: %s: ", s.Query)
	if s.Stopped != "" {
		fmt.Fprintf(&b, "stopped (%s) after line %d: ", s.Stopped, s.StoppedAtLine)
	}
	// Each input's share follows the total: "15000 events read (person
	// 5000, auction 10000)"; a zero malformed or late count has none.
	each := func(v func(*inputSummary) int64) string {
		var sum int64
		for i := range s.Inputs {
			sum += v(&s.Inputs[i])
		}
		if len(s.Inputs) == 0 || sum == 0 {
			return ""
		}
		parts := make([]string, len(s.Inputs))
		for i := range s.Inputs {
			parts[i] = fmt.Sprintf("%s %d", s.Inputs[i].Input, v(&s.Inputs[i]))
		}
		return " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(&b, "%d events read%s, %d malformed%s, %d eval errors, %d late%s",
		s.EventsRead, each(func(i *inputSummary) int64 { return i.EventsRead }),
		s.Malformed, each(func(i *inputSummary) int64 { return i.Malformed }),
		s.EvalErrors, s.Late, each(func(i *inputSummary) int64 { return i.Late }))
	if s.Duplicates+s.DedupLate > 0 {
		fmt.Fprintf(&b, ", %d duplicates, %d dedup late", s.Duplicates, s.DedupLate)
	}
	fmt.Fprintf(&b, ", %d records emitted", s.RecordsEmitted)
	if s.Unchanged > 0 {
		fmt.Fprintf(&b, ", %d unchanged suppressed", s.Unchanged)
	}
	fmt.Fprintf(&b, ", %d windows finalized, %s, %.0f events/s",
		s.WindowsFinalized, formatWall(s.WallSeconds), s.EventsPerSecond)
	if s.Interval != nil {
		b.WriteString(s.Interval.text())
	}
	if s.Join != nil {
		b.WriteString(s.Join.text())
	}
	if s.BadInputLimit != "" {
		fmt.Fprintf(&b, "; failed: %s", s.BadInputLimit)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// formatWall prints a duration with three significant digits in a unit
// that fits (12.3µs, 4.56ms, 1.23s), never a bare 0.000s.
func formatWall(sec float64) string {
	d := time.Duration(sec * 1e9)
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return strconv.FormatFloat(sec*1e6, 'f', 1, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(sec*1e3, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(sec, 'f', 2, 64) + "s"
}
