package cli

import "fmt"

// reportMalformed is how many bad events of an input a run without
// --dead-letter reports on stderr, with their line numbers; the summary
// counts all of them.
const reportMalformed = 10

// badEvents counts the events reported on stderr, of the first input and
// of the second.
type badEvents struct {
	reported, secondReported int
}

// onBad takes a bad line of the first input (QueryOptions.OnEventError,
// in input order): to --dead-letter or stderr, and into the count.
func (r *fileRun) onBad(t *runTarget, lineNo int64, event []byte, err error) {
	if r.err != nil {
		return // the run stopped at an earlier line: this one was read ahead, not taken
	}
	r.writeDeadLetter(t, lineNo, event, err)
	r.report(t, lineNo, err)
	if e := r.countBad(t, 0, r.inName, lineNo, err); e != nil {
		r.err = e
	}
}

// report reports a bad event of the first input on stderr, without
// --dead-letter.
func (r *fileRun) report(t *runTarget, lineNo int64, err error) {
	if r.dead != nil {
		return
	}
	who := ""
	if len(r.owners) > 1 { // a graph reads its input once: its bad events are the input's
		who = t.pq.Name() + ": "
	}
	if r.reported < reportMalformed {
		fmt.Fprintf(r.env.Stderr, "ubik: %s%s:%d: %s: %s\n", who, r.inName, lineNo, badKind(err), cleanMessage(err.Error()))
	} else if r.reported == reportMalformed {
		fmt.Fprintf(r.env.Stderr, "ubik: more bad events follow; --dead-letter FILE records every one\n")
	}
	r.reported++
}

// writeDeadLetter writes a bad event of the first input to --dead-letter.
func (r *fileRun) writeDeadLetter(t *runTarget, lineNo int64, event []byte, err error) {
	if r.dead == nil {
		return
	}
	query := ""
	if len(r.owners) > 1 {
		query = t.pq.Name()
	}
	if werr := writeDead(r.dead, r.inName, query, lineNo, event, err); werr != nil && r.sideErr == nil {
		r.sideErr = fmt.Errorf("--dead-letter %s: %w", r.f.deadLetter, werr)
	}
}

// countBad counts one bad event of input i (0 the first, 1 a second
// input: a join's table or right stream, a graph's second source) at
// path:lineNo and returns the error that stops the run when the event
// crosses --max-bad (or --strict). The limit is on the run's total over
// every input, as the summary's malformed count is.
func (r *fileRun) countBad(t *runTarget, i int, path string, lineNo int64, err error) error {
	t.bad++
	t.badIn[i]++
	limit, names := r.limit, r.names
	if !limit.set || limit.pct || t.bad <= limit.n {
		return nil
	}
	t.limit = limit.String()
	at := fmt.Sprintf("%s:%d", path, lineNo)
	if len(names) == 2 {
		at += " (input " + names[i] + ")"
	}
	if r.f.strict {
		return fmt.Errorf("%w: %s: %s (--strict stops at the first bad event)", ErrBadInput, at, cleanMessage(err.Error()))
	}
	if len(names) == 2 {
		return fmt.Errorf("%w: %s: more than %d events were malformed or failed to evaluate over its inputs (--max-bad %s counts every input: %s %d, %s %d); the last at %s: %s",
			ErrBadInput, t.pq.Name(), limit.n, r.f.maxBad, names[0], t.badIn[0], names[1], t.badIn[1], at, cleanMessage(err.Error()))
	}
	return fmt.Errorf("%w: %s: more than %d events were malformed or failed to evaluate (--max-bad %s); the last at %s: %s",
		ErrBadInput, t.pq.Name(), limit.n, r.f.maxBad, at, cleanMessage(err.Error()))
}

// onSecondBad takes a bad record of the second input (path:lineNo): to
// --dead-letter or stderr (the first ten), and into the count.
func (r *fileRun) onSecondBad(path string, lineNo int64, event []byte, err error) error {
	t := r.owners[0]
	if r.dead != nil {
		if werr := writeDead(r.dead, path, t.pq.Name(), lineNo, event, err); werr != nil {
			return fmt.Errorf("--dead-letter %s: %w", r.f.deadLetter, werr)
		}
	} else {
		if r.secondReported < reportMalformed {
			fmt.Fprintf(r.env.Stderr, "ubik: %s:%d: %s: %s\n", path, lineNo, badKind(err), cleanMessage(err.Error()))
		}
		r.secondReported++
	}
	return r.countBad(t, 1, path, lineNo, err)
}
