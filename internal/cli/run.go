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
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/exec"
	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// maxLineBytes bounds one input line; a longer line is reported as
// malformed and skipped, never buffered whole.
const maxLineBytes = 16 << 20

type runFlags struct {
	input      string
	output     string
	format     string
	query      string
	strict     bool
	statsJSON  string
	noProgress bool
	quiet      bool
	deadLetter string
	lateOutput string
	stateDir   string
	infer      bool
	cpuProfile string
	metrics    string

	checkpointEvery time.Duration
}

func runRun(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var f runFlags
	fs.StringVar(&f.input, "input", "", "input file of JSON lines (- for stdin; default: the source's path option, else stdin)")
	fs.StringVar(&f.output, "output", "-", "where the changelog goes (- for stdout)")
	fs.StringVar(&f.format, "format", "tsv", "record format: tsv (key<TAB>value) or jsonl (an envelope with the metadata)")
	fs.StringVar(&f.query, "query", "", "which query of the script to run (default: its only query)")
	fs.BoolVar(&f.strict, "strict", false, "stop at the first malformed event")
	fs.StringVar(&f.statsJSON, "stats-json", "", "write the run summary as JSON to this file")
	fs.BoolVar(&f.noProgress, "no-progress", false, "never show the progress bar")
	fs.BoolVar(&f.quiet, "quiet", false, "do not print the summary")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "write each malformed event with its line number and error to this file (JSON lines)")
	fs.StringVar(&f.lateOutput, "late-output", "", "write each late event, keyed by the same contract, with the reason, to this file (JSON lines)")
	fs.StringVar(&f.stateDir, "state-dir", "", "checkpoint state, input position and output lengths here; rerunning the same command after a crash resumes")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file (for performance work)")
	fs.BoolVar(&f.infer, "infer", false, "when the query reads a source the script does not declare, infer it from the first records of --input and print the CREATE SOURCE")
	fs.StringVar(&f.metrics, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464); off by default")
	fs.DurationVar(&f.checkpointEvery, "checkpoint-interval", time.Second, "how often to checkpoint with --state-dir")
	kf := addKafkaFlags(fs) // run_kafka.go
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: ubik run QUERY.sql [--input FILE] [--format tsv|jsonl] [flags]")
		fs.PrintDefaults()
	}
	sqlPath, rest := splitPositional(args)
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if sqlPath == "" && fs.NArg() > 0 {
		sqlPath = fs.Arg(0)
	}
	if sqlPath == "" {
		fs.Usage()
		return fmt.Errorf("%w: run needs a query file", ErrUsage)
	}
	if f.format != "tsv" && f.format != "jsonl" {
		return fmt.Errorf("%w: --format must be tsv or jsonl, got %q", ErrUsage, f.format)
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
		if src := undeclaredSource(string(sqlText)); src != "" {
			if f.input == "" || f.input == "-" {
				return fmt.Errorf("%w: --infer needs --input FILE to read the first records from", ErrUsage)
			}
			s, err := inferFile(f.input, src, "", 1000)
			if err != nil {
				return err
			}
			s.Path = ""
			decl := s.SQL()
			fmt.Fprintf(env.Stderr, "ubik: inferred source %s (keep it in your script):\n%s", src, decl)
			if err := eng.Exec(decl); err != nil {
				return fmt.Errorf("inferred source: %w", err)
			}
		}
	}
	prog, err := eng.Compile(string(sqlText), name)
	if err != nil {
		return sqlError(sqlPath, err)
	}
	pq, err := pickProgramQuery(prog.Queries, f.query)
	if err != nil {
		return err
	}
	if kf.wanted(prog, pq) {
		return runKafka(ctx, env, kf, &f, prog, pq)
	}

	inPath := f.input
	if inPath == "" {
		inPath = pq.Source.Options["path"]
	}
	var ck *checkpointFile
	if f.stateDir != "" {
		if inPath == "" || inPath == "-" {
			return fmt.Errorf("%w: --state-dir needs an input file to resume from (not stdin)", ErrUsage)
		}
		if f.output == "" || f.output == "-" {
			return fmt.Errorf("%w: --state-dir needs --output FILE: a resumed run cuts the output back to its last checkpoint", ErrUsage)
		}
		abs, _ := filepath.Abs(inPath)
		if ck, err = newCheckpointFile(f.stateDir, string(sqlText), pq.Name, abs); err != nil {
			return err
		}
	}

	// The changelog, dead-letter and late outputs. OnRecord and the hooks
	// write through these variables, which are set before the first event.
	var w, dead, lateW io.Writer
	var lateBuf, outBuf []byte
	var lateHook func(*exec.LateEvent)
	if f.lateOutput != "" {
		lateHook = func(ev *exec.LateEvent) {
			lateBuf = appendLate(lateBuf[:0], pq.Name, ev)
			lateW.Write(lateBuf)
		}
	}
	qo := ubik.QueryOptions{
		Name:   pq.Name,
		Strict: f.strict,
		OnLate: lateHook,
		OnRecord: func(r changelog.Record) error {
			outBuf = formatRecord(outBuf[:0], f.format, &r)
			_, err := w.Write(outBuf)
			return err
		},
	}
	q, err := eng.StartPlan(pq, qo)
	if err != nil {
		return err
	}
	var resume ckptHeader
	if ck != nil {
		h, err := ck.load(q)
		if err != nil {
			return err
		}
		if h != nil {
			if h.Finished {
				fmt.Fprintf(env.Stderr, "ubik: %s: the run checkpointed in %s already completed; remove the state dir to run again\n", pq.Name, f.stateDir)
				return nil
			}
			resume = *h
			fmt.Fprintf(env.Stderr, "ubik: %s: resuming from line %d of %s\n", pq.Name, h.Line, inPath)
		}
	}

	in, inName, size, err := openInput(env, inPath, "")
	if err != nil {
		return err
	}
	defer in.Close()
	if resume.InputOffset > 0 {
		if _, err := in.(io.Seeker).Seek(resume.InputOffset, io.SeekStart); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	var files [3]*resumableFile // with --state-dir: changelog, dead letters, late events
	var flushOut func() error
	var liveFlush func() error // makes the records written so far visible downstream
	if ck != nil {
		paths := [3]string{f.output, f.deadLetter, f.lateOutput}
		for i, p := range paths {
			if p == "" {
				continue
			}
			if files[i], err = openResumable(p, resume.Outputs[i]); err != nil {
				return err
			}
			defer files[i].Close()
		}
		w = files[0]
		if files[1] != nil {
			dead = files[1]
		}
		if files[2] != nil {
			lateW = files[2]
		}
		flushOut = func() error { _, err := files[0].sync(); return err }
		liveFlush = files[0].w.Flush
	} else {
		out, closeOut, err := openOutput(env, f.output)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(out, 256<<10)
		w = bw
		liveFlush = bw.Flush
		flushOut = func() error {
			err := bw.Flush()
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			return err
		}
		for _, o := range []struct {
			path string
			dst  *io.Writer
		}{{f.deadLetter, &dead}, {f.lateOutput, &lateW}} {
			if o.path == "" {
				continue
			}
			fh, err := os.Create(o.path)
			if err != nil {
				return err
			}
			bw := bufio.NewWriter(fh)
			*o.dst = bw
			defer fh.Close()
			defer bw.Flush()
		}
	}

	// Without --dead-letter, the first few malformed events are reported on
	// stderr with their line numbers; the summary counts all of them.
	const reportMalformed = 10
	reported := 0
	report := func(lineNo int64, err error) {
		if dead != nil {
			return
		}
		if reported < reportMalformed {
			fmt.Fprintf(env.Stderr, "ubik: %s:%d: malformed event: %v\n", inName, lineNo, err)
		} else if reported == reportMalformed {
			fmt.Fprintf(env.Stderr, "ubik: more malformed events follow; --dead-letter FILE records every one\n")
		}
		reported++
	}

	var bar *progressbar.ProgressBar
	if env.IsTerminal && !f.noProgress && size > 0 {
		bar = progressbar.NewOptions64(size, progressbar.OptionSetWriter(env.Stderr),
			progressbar.OptionShowBytes(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetDescription("ubik run"))
	}

	var metrics *queryMetrics
	if f.metrics != "" {
		metrics = newQueryMetrics(pq.Name)
		metrics.publish(q.Stats())
		stop, bound, err := serveMetrics(ctx, f.metrics, metrics)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(env.Stderr, "ubik: metrics on http://%s/metrics\n", bound)
	}

	// checkpoint makes the outputs durable, then records their lengths with
	// the state and the input position in one atomic file.
	checkpoint := func(pos, line int64, finished bool) error {
		h := ckptHeader{Finished: finished, InputOffset: pos, Line: line}
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
		return ck.save(q, h)
	}
	lastCkpt := time.Now()

	csvInput := strings.EqualFold(pq.Source.Options["format"], "csv")
	if csvInput && resume.InputOffset > 0 && !strings.EqualFold(pq.Source.Options["header"], "false") {
		// The header names the columns: read it again from the start.
		hf, err := os.Open(inPath)
		if err != nil {
			return err
		}
		hdr, _, _ := readRecord(bufio.NewReader(hf), true)
		hf.Close()
		if err := q.Push(trimCR(hdr)); err != nil {
			return fmt.Errorf("resume: CSV header: %w", err)
		}
	}

	started := time.Now()
	br := bufio.NewReaderSize(in, 1<<20)
	next := func() ([]byte, int64, error) { return readRecord(br, csvInput) }
	if size == 0 {
		// stdin, a pipe or a FIFO: input can stall for any time, and early
		// emission and output must not wait for the next line.
		stop := make(chan struct{})
		defer close(stop)
		next = liveRecords(ctx, br, csvInput, q, liveFlush, stop)
	}
	lineNo := resume.Line
	readBytes := resume.InputOffset
	var lastBar int64
	var firstErr error
	for {
		if lineNo&4095 == 0 {
			if metrics != nil {
				metrics.publish(q.Stats())
			}
			if ctx.Err() != nil {
				firstErr = ctx.Err()
				if ck != nil {
					// A graceful stop checkpoints, so the next run resumes here.
					if err := checkpoint(readBytes, lineNo, false); err != nil {
						firstErr = err
					}
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
		line, nlines, rerr := next()
		if len(line) == 0 && rerr != nil {
			if rerr != io.EOF {
				firstErr = rerr
			}
			break
		}
		tooLong := errors.Is(rerr, errTooLong)
		lineNo += nlines
		readBytes += int64(len(line)) + nlines
		if rerr != nil && !tooLong {
			readBytes-- // the last line had no newline
		}
		if bar != nil && readBytes-lastBar > 1<<20 {
			bar.Set64(readBytes)
			lastBar = readBytes
		}
		if tooLong {
			err := fmt.Errorf("line longer than %d bytes", maxLineBytes)
			q.ReportMalformed()
			report(lineNo, err)
			if dead != nil {
				writeDead(dead, inName, lineNo, nil, err)
			}
			if f.strict {
				firstErr = fmt.Errorf("%s:%d: %v", inName, lineNo, err)
				break
			}
			continue
		}
		line = trimCR(line)
		if len(line) == 0 {
			continue
		}
		if err := q.Push(line); err != nil {
			var ee *ubik.EventError
			if errors.As(err, &ee) {
				report(lineNo, ee.Err)
				if dead != nil {
					writeDead(dead, inName, lineNo, line, ee.Err)
				}
				if f.strict {
					firstErr = fmt.Errorf("%s:%d: %v", inName, lineNo, ee.Err)
					break
				}
				continue
			}
			firstErr = err
			break
		}
	}
	if firstErr == nil {
		firstErr = q.Close()
		if firstErr == nil && ck != nil {
			firstErr = checkpoint(readBytes, lineNo, true)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if err := flushOut(); err != nil && firstErr == nil {
		firstErr = err
	}
	elapsed := time.Since(started)
	st := q.Stats()
	if metrics != nil {
		metrics.publish(st)
	}
	sum := newSummary(pq.Name, st, elapsed)
	if !f.quiet {
		sum.print(env.Stderr)
	}
	if f.statsJSON != "" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(f.statsJSON, append(b, '\n'), 0o644); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
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
		if q.Name == name {
			return q, nil
		}
		names = append(names, q.Name)
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
func liveRecords(ctx context.Context, br *bufio.Reader, csv bool, q *ubik.Query, flush func() error, stop <-chan struct{}) func() ([]byte, int64, error) {
	type rec struct {
		line []byte
		n    int64
		err  error
	}
	ch := make(chan rec, 256)
	go func() {
		for {
			line, n, err := readRecord(br, csv)
			r := rec{append([]byte(nil), line...), n, err} // the reader reuses its buffer
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
	if e := time.Duration(q.Plan().Emit.EarlyEvery) * time.Microsecond; e > 0 && e < every {
		every = e
	}
	ticker := time.NewTicker(every)
	return func() ([]byte, int64, error) {
		for {
			select {
			case r := <-ch:
				return r.line, r.n, r.err
			case <-ticker.C:
				if err := q.Tick(); err != nil {
					return nil, 0, err
				}
				if err := flush(); err != nil {
					return nil, 0, err
				}
			case <-ctx.Done():
				ticker.Stop()
				return nil, 0, ctx.Err()
			}
		}
	}
}

// errTooLong marks a record longer than maxLineBytes (consumed, not kept).
var errTooLong = errors.New("record too long")

// readRecord returns the next event without its final newline, and how many
// lines it spanned: one line, or for CSV as many lines as it takes to close
// every quoted field. The error is io.EOF for a last line without a newline
// (or nothing left), errTooLong for an oversized record (consumed to its
// end, not kept). Each line is scanned once: a record is complete when its
// count of '"' is even, and that parity is kept line by line, so a quoted
// field over many lines costs time linear in its size.
func readRecord(br *bufio.Reader, csv bool) ([]byte, int64, error) {
	line, open, tooLong, err := readLine(br)
	if !csv {
		if tooLong {
			return line, 1, errTooLong
		}
		return line, 1, err
	}
	if !open || err != nil {
		if tooLong {
			return line, 1, errTooLong
		}
		return line, 1, err
	}
	var rec []byte
	if !tooLong {
		rec = append([]byte(nil), line...)
	}
	n := int64(1)
	for open {
		var next []byte
		var odd, nextTooLong bool
		next, odd, nextTooLong, err = readLine(br)
		if len(next) == 0 && err != nil {
			if tooLong {
				return nil, n, errTooLong
			}
			return rec, n, err
		}
		n++
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
		return nil, n, errTooLong
	}
	return rec, n, err
}

// quoteParity reports whether b holds an odd number of '"'.
func quoteParity(b []byte) bool {
	return bytes.Count(b, []byte{'"'})%2 == 1
}

// readLine returns the next line without its newline, and whether it holds
// an odd number of '"' (counted as it is read, over the whole line). A line
// longer than maxLineBytes is consumed and reported with tooLong set.
func readLine(br *bufio.Reader) (line []byte, odd, tooLong bool, err error) {
	line, err = br.ReadSlice('\n')
	odd = quoteParity(line)
	if err == nil {
		return line[:len(line)-1], odd, false, nil
	}
	if err != bufio.ErrBufferFull {
		return line, odd, false, err
	}
	buf := append([]byte(nil), line...)
	for {
		line, err = br.ReadSlice('\n')
		odd = odd != quoteParity(line)
		if len(buf)+len(line) > maxLineBytes {
			tooLong = true
		} else {
			buf = append(buf, line...)
		}
		if err == nil {
			if !tooLong {
				buf = buf[:len(buf)-1]
			}
			return buf, odd, tooLong, nil
		}
		if err != bufio.ErrBufferFull {
			if tooLong {
				return []byte{0}, odd, true, nil
			}
			return buf, odd, false, err
		}
	}
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
	b = changelog.AppendCell(b, types.Str(r.Meta.Query))
	b = append(b, `, "final": `...)
	b = strconv.AppendBool(b, r.Meta.Final)
	b = append(b, `, "revision": `...)
	b = strconv.AppendUint(b, r.Meta.Revision, 10)
	if r.Meta.Windowed {
		b = append(b, `, "window_start": `...)
		b = changelog.AppendCell(b, types.TS(r.Meta.WindowStart))
		b = append(b, `, "window_end": `...)
		b = changelog.AppendCell(b, types.TS(r.Meta.WindowEnd))
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

func writeDead(w io.Writer, input string, line int64, event []byte, err error) {
	b := []byte(`{"input": `)
	b = changelog.AppendCell(b, types.Str(input))
	b = append(b, `, "line": `...)
	b = strconv.AppendInt(b, line, 10)
	b = append(b, `, "error": `...)
	b = changelog.AppendCell(b, types.Str(err.Error()))
	b = append(b, `, "event": `...)
	if event == nil {
		b = append(b, "null"...)
	} else {
		b = changelog.AppendCell(b, types.Str(string(event)))
	}
	b = append(b, "}\n"...)
	w.Write(b)
}

func appendLate(b []byte, query string, ev *exec.LateEvent) []byte {
	b = append(b, `{"query": `...)
	b = changelog.AppendCell(b, types.Str(query))
	if ev.Windowed {
		// The contract key of the (group, window) the event was for, so a
		// host can match late events to the records they would have changed.
		b = append(b, `, "key": `...)
		b = changelog.AppendKey(b, ev.Key)
	}
	b = append(b, `, "reason": `...)
	b = changelog.AppendCell(b, types.Str(ev.Reason))
	b = append(b, `, "event_time": `...)
	b = changelog.AppendCell(b, types.TS(ev.EventTime))
	if ev.Windowed {
		b = append(b, `, "window_start": `...)
		b = changelog.AppendCell(b, types.TS(ev.WindowStart))
		b = append(b, `, "window_end": `...)
		b = changelog.AppendCell(b, types.TS(ev.WindowEnd))
	}
	b = append(b, `, "watermark": `...)
	b = changelog.AppendCell(b, types.TS(ev.Watermark))
	b = append(b, `, "row": `...)
	b = changelog.AppendKey(b, ev.Row)
	return append(b, "}\n"...)
}

// summary is what a run reports at the end (stderr, and --stats-json).
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
}

type planQuery = plan.Query

func newSummary(name string, st ubik.Stats, elapsed time.Duration) summary {
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
		WindowsFinalized: st.WindowsFinalized,
		WallSeconds:      elapsed.Seconds(),
		EmitLatencyP50Ms: st.LatencyP50 / 1e6,
		EmitLatencyP99Ms: st.LatencyP99 / 1e6,
		StateBytes:       st.StateBytes,
		StateBytesPeak:   st.StateBytesPeak,
		LiveGroupsPeak:   st.LiveGroupsPeak,
	}
	if elapsed > 0 {
		s.EventsPerSecond = float64(st.EventsIn) / elapsed.Seconds()
	}
	if st.LiveGroupsPeak > 0 {
		s.StateBytesPerGroup = float64(st.StateBytesPeak) / float64(st.LiveGroupsPeak)
	}
	if st.Watermark != minInt64 {
		s.Watermark = string(changelog.AppendCell(nil, types.TS(st.Watermark)))
	}
	return s
}

const minInt64 = -1 << 63

func (s summary) print(w io.Writer) {
	dups := ""
	if s.Duplicates+s.DedupLate > 0 {
		dups = fmt.Sprintf(", %d duplicates dropped, %d beyond the dedup horizon", s.Duplicates, s.DedupLate)
	}
	fmt.Fprintf(w, "ubik: %s: %d events read, %d malformed, %d late%s, %d records emitted, %d windows finalized, %.3fs, %.0f events/s\n",
		s.Query, s.EventsRead, s.Malformed+s.EvalErrors, s.Late, dups, s.RecordsEmitted, s.WindowsFinalized, s.WallSeconds, s.EventsPerSecond)
}
