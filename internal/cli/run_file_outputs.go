package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"

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
