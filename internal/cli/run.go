package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	name := f.query
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(sqlPath), filepath.Ext(sqlPath))
	}
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		return err
	}
	defer eng.Close()
	prog, err := eng.Compile(string(sqlText), name)
	if err != nil {
		return sqlError(sqlPath, err)
	}
	pq, err := pickProgramQuery(prog.Queries, f.query)
	if err != nil {
		return err
	}

	in, inName, size, err := openInput(env, f.input, pq.Source.Options["path"])
	if err != nil {
		return err
	}
	defer in.Close()
	out, closeOut, err := openOutput(env, f.output)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 256<<10)

	var dead, lateW *bufio.Writer
	if f.deadLetter != "" {
		df, err := os.Create(f.deadLetter)
		if err != nil {
			return err
		}
		defer df.Close()
		dead = bufio.NewWriter(df)
		defer dead.Flush()
	}
	var lateBuf []byte
	var lateHook func(*exec.LateEvent)
	if f.lateOutput != "" {
		lf, err := os.Create(f.lateOutput)
		if err != nil {
			return err
		}
		defer lf.Close()
		lateW = bufio.NewWriter(lf)
		defer lateW.Flush()
		lateHook = func(ev *exec.LateEvent) {
			lateBuf = appendLate(lateBuf[:0], pq.Name, ev)
			lateW.Write(lateBuf)
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

	var outBuf []byte
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

	var bar *progressbar.ProgressBar
	if env.IsTerminal && !f.noProgress && size > 0 {
		bar = progressbar.NewOptions64(size, progressbar.OptionSetWriter(env.Stderr),
			progressbar.OptionShowBytes(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetDescription("ubik run"))
	}

	started := time.Now()
	br := bufio.NewReaderSize(in, 1<<20)
	var lineNo int64
	var readBytes, lastBar int64
	var firstErr error
	for {
		if lineNo&4095 == 0 && ctx.Err() != nil {
			firstErr = ctx.Err()
			break
		}
		line, tooLong, rerr := readLine(br)
		if len(line) == 0 && rerr != nil {
			if rerr != io.EOF {
				firstErr = rerr
			}
			break
		}
		lineNo++
		readBytes += int64(len(line)) + 1
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
	}
	if bar != nil {
		bar.Finish()
	}
	if err := w.Flush(); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := closeOut(); err != nil && firstErr == nil {
		firstErr = err
	}
	elapsed := time.Since(started)
	st := q.Stats()
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

// readLine returns the next line without its newline. A line longer than
// maxLineBytes is consumed and reported with tooLong set.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	line, err = br.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], false, nil
	}
	if err != bufio.ErrBufferFull {
		return line, false, err
	}
	buf := append([]byte(nil), line...)
	for {
		line, err = br.ReadSlice('\n')
		if len(buf)+len(line) > maxLineBytes {
			tooLong = true
		} else {
			buf = append(buf, line...)
		}
		if err == nil {
			if !tooLong {
				buf = buf[:len(buf)-1]
			}
			return buf, tooLong, nil
		}
		if err != bufio.ErrBufferFull {
			if tooLong {
				return []byte{0}, true, nil
			}
			return buf, false, err
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

func writeDead(w *bufio.Writer, input string, line int64, event []byte, err error) {
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
	b = append(b, `, "reason": `...)
	b = changelog.AppendCell(b, types.Str(ev.Reason))
	b = append(b, `, "event_time": `...)
	b = changelog.AppendCell(b, types.TS(ev.EventTime))
	b = append(b, `, "window_start": `...)
	b = changelog.AppendCell(b, types.TS(ev.WindowStart))
	b = append(b, `, "window_end": `...)
	b = changelog.AppendCell(b, types.TS(ev.WindowEnd))
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
	fmt.Fprintf(w, "ubik: %s: %d events read, %d malformed, %d late, %d records emitted, %d windows finalized, %.3fs, %.0f events/s\n",
		s.Query, s.EventsRead, s.Malformed+s.EvalErrors, s.Late, s.RecordsEmitted, s.WindowsFinalized, s.WallSeconds, s.EventsPerSecond)
}
