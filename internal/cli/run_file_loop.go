package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ubiksql/ubik"
)

// openSecond prepares the reading: the CSV header again for a resumed
// run, the second input (an interval join's right stream, a graph's
// second source) with its header, the versioned table of a temporal
// join, and the reader of the first input.
func (r *fileRun) openSecond() error {
	r.lastCkpt = time.Now()
	csvInput := strings.EqualFold(r.input.Option("format"), "csv")
	if csvInput && r.resume.InputOffset > 0 && !strings.EqualFold(r.input.Option("header"), "false") {
		// The header names the columns: read it again from the start.
		hf, err := os.Open(r.inPath)
		if err != nil {
			return err
		}
		hdr, _, _, _ := readRecord(bufio.NewReader(hf), true)
		hf.Close()
		if err := r.q.Push(bytes.TrimPrefix(trimCR(hdr), utf8BOM)); err != nil {
			return fmt.Errorf("resume: CSV header: %w", err)
		}
	}
	if err := r.openRight(); err != nil {
		return err
	}
	r.started = time.Now()
	if jq := graphJoin(r.pqs); jq != nil && !r.resumed {
		// The join's query, or the view of the graph that joins.
		if err := loadTable(r.q, jq, r.onSecondBad, &r.curLineNo); errors.Is(err, ErrBadInput) {
			r.err = err // the table crossed --max-bad: the summary says so, with what was read
		} else if err != nil {
			return err
		}
	}
	r.openReader(csvInput)
	return nil
}

// openRight opens the second input read beside the first, if any.
func (r *fileRun) openRight() error {
	var err error
	if r.ijq != nil {
		left, right, _ := r.ijq.IntervalJoin()
		r.right, err = openRightInput(right, left, r.resume.RightOffset, r.resume.RightLine)
	} else if r.second != nil {
		r.right, err = openRightInput(r.second, r.input, r.resume.RightOffset, r.resume.RightLine)
	}
	if err != nil || r.right == nil {
		return err
	}
	r.onClose(r.right.fh.Close)
	return r.right.csvHeader(r.q, r.resumed, r.right.src.Option("header"))
}

// openReader sets next, the reader of the first input's records.
func (r *fileRun) openReader(csvInput bool) {
	br := bufio.NewReaderSize(r.in, 1<<20)
	r.next = func() ([]byte, int64, int64, error) { return readRecord(br, csvInput) }
	r.lineNo, r.readBytes = r.resume.Line, r.resume.InputOffset
	if r.size != 0 {
		return
	}
	// stdin, a pipe or a FIFO: input can stall for any time, and early
	// emission and output must not wait for the next line.
	stop := make(chan struct{})
	r.onClose(func() error { close(stop); return nil })
	// The first query's early interval paces the ticks; the others tick
	// with it.
	tickAll := func() error {
		for _, t := range r.owners[1:] {
			if err := t.q.Tick(); err != nil {
				return err
			}
		}
		return r.flushAll()
	}
	r.next = liveRecords(r.ctx, br, csvInput, r.owners[0].q, tickAll, stop)
}

// poll publishes the metrics, stops at a signal (a graceful stop
// checkpoints, so the next run resumes here) and checkpoints when
// --checkpoint-interval has passed. It reports whether reading stops.
func (r *fileRun) poll() bool {
	r.publish()
	if r.ctx.Err() != nil {
		r.stopped = true
		if r.ck != nil {
			r.err = r.checkpoint(false)
		}
		return true
	}
	if r.ck != nil && time.Since(r.lastCkpt) >= r.f.checkpointEvery {
		if err := r.checkpoint(false); err != nil {
			r.err = err
			return true
		}
		r.lastCkpt = time.Now()
	}
	return false
}

// loop reads the first input to its end, a signal or the run's error.
func (r *fileRun) loop() {
	lastPoll, lastBar := r.readBytes, int64(0)
	for r.err == nil {
		// A signal and the checkpoint clock are polled every 4096 lines
		// and every pollBytes of input, so a run of long events stops as
		// promptly as a run of short ones.
		if r.lineNo&4095 == 0 || r.readBytes-lastPoll >= pollBytes {
			lastPoll = r.readBytes
			if r.poll() {
				return
			}
		}
		line, nlines, size, rerr := r.next()
		tooLong := rerr != nil && errors.Is(rerr, errTooLong)
		if len(line) == 0 && rerr != nil && !tooLong {
			if errors.Is(rerr, context.Canceled) && r.ctx.Err() != nil {
				r.stopped = true
			} else if rerr != io.EOF {
				r.err = rerr
			}
			return
		}
		atStart := r.readBytes == 0
		r.lineNo += nlines
		r.readBytes += size
		if r.bar != nil && r.readBytes-lastBar > 1<<20 {
			r.bar.Set64(r.readBytes)
			lastBar = r.readBytes
		}
		if tooLong {
			r.tooLong(nlines, size)
			continue
		}
		r.line(line, atStart)
	}
}

// tooLong counts a record longer than a line may be as malformed.
func (r *fileRun) tooLong(nlines, size int64) {
	err := tooLongError(nlines, size)
	for _, t := range r.owners {
		if ferr := t.q.ReportMalformedAt(r.lineNo, err); ferr != nil && r.err == nil {
			r.err = ferr
		}
	}
}

// line feeds one line of the first input to the queries, after the
// second input's records it must follow.
func (r *fileRun) line(line []byte, atStart bool) {
	line = trimCR(line)
	if atStart {
		line = bytes.TrimPrefix(line, utf8BOM) // a UTF-8 byte order mark is not data
	}
	if blankLine(line) {
		return // an empty or blank line is no event
	}
	for r.right != nil && r.err == nil && r.right.behind(r.q) {
		r.err = r.right.pushOne(r.q, r.onSecondBad, &r.curLineNo)
	}
	if r.err != nil {
		return
	}
	r.curLineNo = r.lineNo
	// A bad line reaches onBad, in input order (on several threads
	// perhaps during a later line's Feed).
	for _, t := range r.owners {
		err := t.q.Feed(line, r.lineNo)
		if r.err != nil {
			break
		}
		if err == nil {
			continue
		}
		if errors.Is(err, ubik.ErrCSVHeader) {
			err = fmt.Errorf("%s:%d: %w", r.inName, r.lineNo, err)
		}
		r.err = err
		break
	}
	if r.err == nil && r.sideErr != nil {
		r.err = r.sideErr
	}
}

// drain reads the rest of the second input once the first has ended:
// stopped by a signal and checkpointed as the main loop is, so a long
// rest is not read again after a crash.
func (r *fileRun) drain() {
	if r.right == nil || r.err != nil || r.stopped || r.right.done {
		return
	}
	// The first file ended before the second: its input ends now, so the
	// join holds no row of the rest of the second for it (without this,
	// every one of them would be held until the end).
	r.err = r.q.EndInput(r.input.Name())
	for n := 1; r.err == nil && !r.right.done; n++ {
		if n&4095 == 0 && r.poll() {
			return
		}
		r.err = r.right.pushOne(r.q, r.onSecondBad, &r.curLineNo)
	}
}

// finish delivers the records of every line read: all of them, closing
// the queries, at the end of the input (with the last checkpoint), else
// those of the lines read; then it flushes and closes the outputs.
func (r *fileRun) finish() {
	if r.err == nil && r.stopped {
		for _, t := range r.owners {
			if err := t.q.Flush(); err != nil && r.err == nil {
				r.err = err
			}
		}
	}
	if r.err == nil && !r.stopped {
		r.closeQueries()
	}
	if r.bar != nil {
		r.bar.Finish()
	}
	for _, fin := range r.finishers {
		if err := fin(); err != nil && r.err == nil {
			r.err = err
		}
	}
}

// closeQueries ends the input of every query and takes the last
// checkpoint.
func (r *fileRun) closeQueries() {
	for _, t := range r.owners {
		err := t.q.Close()
		switch {
		case err == nil || r.err != nil:
		case errors.Is(err, ubik.ErrEvaluation):
			// A window whose HAVING or SELECT fails as the input ends is
			// a bad record, as one a later event's watermark closes is:
			// reported at the end of the input and counted toward
			// --max-bad, not an error of the run.
			r.onBad(t, r.lineNo, nil, err)
		default:
			r.err = err
		}
		if r.err != nil {
			break
		}
	}
	if r.err == nil && r.sideErr != nil {
		r.err = r.sideErr
	}
	if r.err == nil && r.ck != nil {
		r.err = r.checkpoint(true)
	}
}

// checkpoint makes the outputs durable, then records their lengths with
// the state and the input position in one atomic file.
func (r *fileRun) checkpoint(finished bool) error {
	h := ckptHeader{Finished: finished, InputOffset: r.readBytes, Line: r.lineNo}
	if r.right != nil {
		h.Right, h.RightOffset, h.RightLine = true, r.right.offset, r.right.line
	}
	// Every record of the events read so far reaches the outputs before
	// their lengths are taken.
	if err := r.q.Flush(); err != nil {
		return err
	}
	if r.err != nil {
		return r.err // a bad line the flush reported crossed --max-bad
	}
	for i, rf := range r.files {
		if rf == nil {
			continue
		}
		n, err := rf.sync()
		if err != nil {
			return err
		}
		h.Outputs[i] = n
	}
	for _, rf := range r.extra {
		n, err := rf.sync()
		if err != nil {
			return err
		}
		h.Extra = append(h.Extra, n)
	}
	return r.ck.save(r.q, h)
}

// summarize prints each target's summary (unless --quiet), writes
// --stats-json, and returns the run's error: a bad-input limit crossed
// at the end counts as one.
func (r *fileRun) summarize() error {
	elapsed := time.Since(r.started)
	r.publish()
	var sums []summary
	for _, t := range r.targets {
		st := t.stats()
		inputs := t.inputNames(r.input, r.second)
		if r.err == nil && !r.stopped {
			read := st.EventsIn
			if len(inputs) == 2 {
				read += st.Table.RowsIn // the second input's rows: the limit is over every input
			}
			if lim := r.limit.crossedAtEnd(t.bad, read); lim != "" {
				t.limit = lim
				r.err = fmt.Errorf("%w: %s: %d of %d events were malformed or failed to evaluate (%s)", ErrBadInput, t.pq.Name(), t.bad, read, lim)
			}
		}
		sum := newSummary(t.pq.Name(), st, elapsed, inputs)
		sum.BadInputLimit = t.limit
		if r.stopped {
			sum.Stopped = stopCause(r.ctx).Error()
			sum.StoppedAtLine = r.lineNo
		}
		sums = append(sums, sum)
		if !r.f.quiet {
			sum.print(r.env.Stderr)
		}
	}
	if err := writeStatsJSON(r.f.statsJSON, sums); err != nil && r.err == nil {
		r.err = err
	}
	if r.err == nil && r.stopped {
		return stopCause(r.ctx)
	}
	return joinBoundError(r.err, r.f, r.ijq)
}
