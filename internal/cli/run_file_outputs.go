package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ubiksql/ubik"
)

// outputs are where a file run writes: the targets' changelogs, the dead
// letters and the late events. With --state-dir they are resumable files,
// cut back to the checkpoint's lengths; else buffered, created afresh.
type outputs struct {
	files     [3]*resumableFile // with --state-dir: changelog, dead letters, late events
	extra     []*resumableFile  // with --state-dir: the other changelogs of a graph of views
	finishers []func() error    // flush and close every output, at the end
	liveFlush []func() error    // flush every changelog (live input, between lines)
	// The hooks write the dead letters and late events through these,
	// which are set before the first event; a write error is kept in
	// sideErr and stops the run, as an error of the changelog does.
	dead, lateW io.Writer
	lateBuf     []byte
	sideErr     error
}

// openOutputs opens the outputs.
func (r *fileRun) openOutputs() error {
	if r.ck != nil {
		return r.openResumable()
	}
	for _, t := range r.targets {
		out, closeOut, err := openOutput(r.env, t.out)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(out, 256<<10)
		t.w = bw
		r.liveFlush = append(r.liveFlush, bw.Flush)
		r.finishers = append(r.finishers, func() error {
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
	}{{r.f.deadLetter, "--dead-letter", &r.dead}, {r.f.lateOutput, "--late-output", &r.lateW}} {
		if o.path == "" {
			continue
		}
		fh, err := os.Create(o.path)
		if err != nil {
			return err
		}
		r.onClose(fh.Close)
		bw := bufio.NewWriter(fh)
		*o.dst = bw
		flagName, path := o.flag, o.path
		r.finishers = append(r.finishers, func() error {
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
	return nil
}

// openResumable opens the outputs of a run with --state-dir at the
// lengths the checkpoint recorded.
func (r *fileRun) openResumable() error {
	paths := [3]string{r.targets[0].out, r.f.deadLetter, r.f.lateOutput}
	for i, p := range paths {
		if p == "" {
			continue
		}
		rf, err := openResumable(p, r.resume.Outputs[i])
		if err != nil {
			return err
		}
		r.files[i] = rf
		r.onClose(rf.Close)
	}
	r.targets[0].w = r.files[0]
	for i, t := range r.targets[1:] { // the further outputs of a graph of views
		var keep int64
		if i < len(r.resume.Extra) {
			keep = r.resume.Extra[i]
		}
		rf, err := openResumable(t.out, keep)
		if err != nil {
			return err
		}
		r.onClose(rf.Close)
		t.w = rf
		r.extra = append(r.extra, rf)
		r.finishers = append(r.finishers, func() error { _, err := rf.sync(); return err })
		r.liveFlush = append(r.liveFlush, rf.w.Flush)
	}
	if r.files[1] != nil {
		r.dead = r.files[1]
	}
	if r.files[2] != nil {
		r.lateW = r.files[2]
	}
	r.finishers = append(r.finishers, func() error { _, err := r.files[0].sync(); return err })
	r.liveFlush = append(r.liveFlush, r.files[0].w.Flush)
	return nil
}

// flushAll flushes every changelog.
func (r *fileRun) flushAll() error {
	for _, fl := range r.liveFlush {
		if err := fl(); err != nil {
			return err
		}
	}
	return nil
}

// late writes one late event to --late-output.
func (r *fileRun) late(query string, ev *ubik.LateEvent) {
	r.lateBuf = appendLate(r.lateBuf[:0], query, r.curLineNo, ev)
	if _, err := r.lateW.Write(r.lateBuf); err != nil && r.sideErr == nil {
		r.sideErr = fmt.Errorf("--late-output %s: %w", r.f.lateOutput, err)
	}
}

// checkPaths refuses a run two of whose outputs are one file (each would
// truncate the other's records), or that would write over one of its
// inputs, before anything is opened.
func (r *fileRun) checkPaths() error {
	type named struct{ what, path string }
	var outs []named
	for _, t := range r.targets {
		if t.out != "" && t.out != "-" {
			outs = append(outs, named{"the output of query " + t.pq.Name(), t.out})
		}
	}
	for _, o := range []named{{"--dead-letter", r.f.deadLetter}, {"--late-output", r.f.lateOutput}} {
		if o.path != "" {
			outs = append(outs, o)
		}
	}
	for i, a := range outs {
		for _, b := range outs[:i] {
			if samePath(a.path, b.path) {
				return fmt.Errorf("%w: %s and %s are both %s: each output needs a file of its own", ErrUsage, b.what, a.what, a.path)
			}
		}
		for _, in := range r.inputPaths() {
			if samePath(a.path, in) {
				return fmt.Errorf("%w: %s is %s, which the run reads: an output would overwrite its input", ErrUsage, a.what, in)
			}
		}
	}
	return nil
}

// inputPaths are the files the run reads: its input, the second input
// of a join of two inputs, a temporal join's table.
func (r *fileRun) inputPaths() []string {
	var ins []string
	if r.inPath != "" && r.inPath != "-" {
		ins = append(ins, r.inPath)
	}
	if r.ijq != nil {
		_, right, _ := r.ijq.IntervalJoin()
		ins = append(ins, right.Option("path"))
	} else if r.second != nil {
		ins = append(ins, r.second.Option("path"))
	}
	if jq := graphJoin(r.pqs); jq != nil {
		_, t, _ := jq.TemporalJoin()
		ins = append(ins, t.Option("path"))
	}
	return ins
}

// samePath reports whether a and b name one regular file: the same file
// when both exist, else the same absolute path. A device or a pipe
// (/dev/null, say) may take several outputs.
func samePath(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return sa.Mode().IsRegular() && os.SameFile(sa, sb)
	}
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == ab
}
