package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ubiksql/ubik"
)

// fileRun is one `ubik run` over files, its lifecycle in steps: open the
// state (--state-dir), start the targets' queries, resume, open the
// inputs and the outputs, read (loop), drain the second input, finish
// (close the queries, the last checkpoint, flush the outputs) and
// summarize. Each step returns the error that ends the run; once reading
// starts, the run's error is err, which stops reading but not the
// finishing steps, so the outputs and the summary account for what was
// read.
type fileRun struct {
	ctx     context.Context
	env     *Env
	f       *runFlags
	limit   badLimit
	sqlText []byte

	eng     *ubik.Engine
	pqs     []*planQuery
	targets []*runTarget
	owners  []*runTarget // the targets that own a ubik.Query (startTargets)
	q       *ubik.Query  // owners[0]'s: the one the input is read into
	input   *ubik.Source // the declared source --input feeds
	second  *ubik.Source // a graph's second source (a join of two views over two), or nil
	ijq     *planQuery   // an interval join of two streams, whose right is the second input, or nil
	names   []string     // the two inputs' names when the run reads two
	inPath  string

	ck      *checkpointFile // with --state-dir
	resume  ckptHeader      // where a resumed run starts
	resumed bool            // the state came from a checkpoint (a join's table with it)

	in     io.ReadCloser
	inName string
	size   int64 // the input's size; 0 for stdin, a pipe or a FIFO
	right  *rightInput
	next   func() ([]byte, int64, int64, error) // the next input record

	outputs   // run_file_outputs.go
	badEvents // run_file_bad.go
	bar       *progressbar.ProgressBar
	metrics   []*queryMetrics
	closers   []func() error // closed at the end, last first, as defers are
	lineNo    int64          // input lines read
	readBytes int64
	curLineNo int64 // the line of the input record being pushed, for the late output
	lastCkpt  time.Time
	started   time.Time
	stopped   bool  // stopped by a signal
	err       error // the run's error: it stops reading
}

// newFileRun checks that the queries pqs of prog can run over files as
// flags f ask, and makes their run.
func newFileRun(ctx context.Context, env *Env, f *runFlags, limit badLimit, eng *ubik.Engine, prog *ubik.Program, pqs []*planQuery, sqlText []byte) (*fileRun, error) {
	if err := checkFileTargets(prog, pqs, f); err != nil {
		return nil, err
	}
	r := &fileRun{ctx: ctx, env: env, f: f, limit: limit, sqlText: sqlText, eng: eng, pqs: pqs}
	r.targets = make([]*runTarget, len(pqs))
	for i, pq := range pqs {
		r.targets[i] = &runTarget{pq: pq, out: outputPath(prog, pq, f, len(pqs))}
	}
	if f.outputDir != "" {
		if err := os.MkdirAll(f.outputDir, 0o755); err != nil {
			return nil, err
		}
	}
	pq := pqs[0]
	r.input = inputQuery(pq).Source() // the declared source the run reads (a view's, for a query over views)
	r.second = graphSecond(pqs)       // a join of two views over two sources: the other source
	if r.second != nil {
		r.input = inputQuery(pqs[len(pqs)-1]).Source() // the graph's first input: its primary's
	}
	r.ijq = streamJoin(pqs) // an interval join of two streams (the query's, or a view's of the graph): its right is the second input
	if r.ijq != nil {
		r.input, _, _ = r.ijq.IntervalJoin()
	}
	if _, _, ok := pq.IntervalJoin(); ok && len(pq.Views()) == 0 && len(pqs) > 1 && !readsView(pqs) {
		return nil, fmt.Errorf("%w: query %s is an interval join of two inputs, which runs alone: choose it with --query", ErrUsage, pq.Name())
	}
	if f.threads <= 0 {
		// One thread unless asked: a second thread costs 1.1 to 1.2
		// times the CPU for its 1.6 times the events per second on an
		// idle machine (bench/results/2026-12-06-threads-10m-idle.md),
		// gains nothing for a join or two files, and on a busy machine
		// costs more than it gives.
		f.threads = 1
	}
	r.inPath = f.input
	if r.inPath == "" {
		r.inPath = r.input.Option("path")
	}
	return r, nil
}

// checkFileTargets refuses queries that one file run cannot run together.
func checkFileTargets(prog *ubik.Program, pqs []*planQuery, f *runFlags) error {
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
		return outputConflict(prog, pqs[0], f)
	}
	return nil
}

// run runs the steps, then closes what they opened.
func (r *fileRun) run() error {
	defer r.close()
	if err := r.checkPaths(); err != nil {
		return err
	}
	if err := r.openState(); err != nil {
		return err
	}
	if err := r.start(); err != nil {
		return err
	}
	if done, err := r.resumeState(); done || err != nil {
		return err
	}
	for _, step := range []func() error{r.openInput, r.openOutputs, r.startProgress, r.openSecond} {
		if err := step(); err != nil {
			return err
		}
	}
	r.loop()
	r.drain()
	r.finish()
	return r.summarize()
}

// onClose registers c to run when the run ends.
func (r *fileRun) onClose(c func() error) { r.closers = append(r.closers, c) }

func (r *fileRun) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// openState opens --state-dir's checkpoint file.
func (r *fileRun) openState() error {
	if r.f.stateDir == "" {
		return nil
	}
	if r.inPath == "" || r.inPath == "-" {
		return fmt.Errorf("%w: --state-dir needs an input file to resume from (not stdin)", ErrUsage)
	}
	for _, t := range r.targets {
		if t.out == "-" {
			return fmt.Errorf("%w: --state-dir needs --output FILE (or --output-dir DIR): a resumed run cuts the output back to its last checkpoint", ErrUsage)
		}
	}
	abs, _ := filepath.Abs(r.inPath)
	ck, err := newCheckpointFile(r.f.stateDir, string(r.sqlText), targetNames(r.targets), abs)
	if err != nil {
		return err
	}
	r.ck = ck
	r.onClose(func() error { ck.close(); return nil })
	return nil
}

// start starts the targets' queries.
func (r *fileRun) start() error {
	var lateHook func(string, *ubik.LateEvent)
	if r.f.lateOutput != "" {
		lateHook = r.late
	}
	owners, err := startTargets(r.eng, r.targets, r.f, lateHook, r.onBad, r.env.Stderr)
	if err != nil {
		return err
	}
	r.owners, r.q = owners, owners[0].q
	r.names = owners[0].inputNames(r.input, r.second)
	return nil
}

// resumeState loads the checkpoint, if any. done: the checkpointed run
// had completed, and this one ends here.
func (r *fileRun) resumeState() (done bool, err error) {
	if r.ck == nil {
		return false, nil
	}
	h, err := r.ck.load(r.q)
	if err != nil || h == nil {
		return false, err
	}
	r.resumed = true
	name := r.pqs[0].Name()
	if h.Finished {
		fmt.Fprintf(r.env.Stderr, "ubik: %s: the run checkpointed in %s already completed; remove the state dir to run again\n", name, r.f.stateDir)
		// --stats-json still gets the completed run's summary, from
		// the checkpoint's counters: a run killed after its last
		// checkpoint may have left the file empty or absent.
		var sums []summary
		for _, t := range r.targets {
			sums = append(sums, newSummary(t.pq.Name(), t.stats(), 0, t.inputNames(r.input, r.second)))
		}
		return true, writeStatsJSON(r.f.statsJSON, sums)
	}
	r.resume = *h
	fmt.Fprintf(r.env.Stderr, "ubik: %s: resuming from line %d of %s\n", name, h.Line, r.inPath)
	return false, nil
}

// openInput opens --input (or the source's path, or stdin) at the
// resumed position.
func (r *fileRun) openInput() error {
	in, inName, size, err := openInput(r.env, r.inPath, "")
	if err != nil {
		return err
	}
	r.in, r.inName, r.size = in, inName, size
	r.onClose(in.Close)
	if off := r.resume.InputOffset; off > 0 {
		if size > 0 && off > size {
			return fmt.Errorf("resume: the checkpoint in %s is at byte %d of %s, which has %d bytes: the input is not the one the run read; remove the state dir to start over", r.f.stateDir, off, r.inPath, size)
		}
		if _, err := in.(io.Seeker).Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	return nil
}

// startProgress starts the progress bar and the metrics endpoint.
func (r *fileRun) startProgress() error {
	if r.env.IsTerminal && !r.f.noProgress && r.size > 0 {
		r.bar = newProgressBar(r.env.Stderr, r.size)
	}
	if r.f.metrics == "" {
		return nil
	}
	for _, t := range r.targets {
		m := newQueryMetrics(t.pq.Name())
		m.setInputs(t.inputNames(r.input, r.second))
		r.metrics = append(r.metrics, m)
	}
	r.publish()
	stop, bound, err := serveMetrics(r.ctx, r.env.Stderr, r.f.metrics, r.metrics...)
	if err != nil {
		return err
	}
	r.onClose(func() error { stop(); return nil })
	fmt.Fprintf(r.env.Stderr, "ubik: metrics on http://%s/metrics\n", bound)
	return nil
}

// publish updates the metrics with the queries' counters.
func (r *fileRun) publish() {
	for i, m := range r.metrics {
		m.publish(r.targets[i].stats())
	}
}
