package kafka

import (
	"cmp"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// One transactional loop runs every stage: the repartition stage, the
// aggregating stage (and each segment of a chain), the table stage of a
// join. It knows nothing of what a stage does with its input; a stage is
// a stageWork. The loop owns the rules that make a stage exactly once:
//
//   - a session (session.go) with static membership, read_committed, and
//     rebalances that wait for the transaction to end; its producer is
//     fenced at once so a crashed predecessor's open transaction is
//     aborted before anything waits on it;
//   - one transaction at a time: poll, assignment changes (only between
//     transactions), Begin, the stage's work on every record polled in it,
//     what the stage checkpoints, flush, the produce errors, then End,
//     which commits only if all of that succeeded, the source did not
//     change (ErrSourceChanged) and this instance is still a member of the
//     generation it worked under; fencing is ErrFenced;
//   - after an abort the stage rewinds to its last commit; an error a
//     retry cannot fix (isFatal) ends the stage; an end whose outcome is
//     unknown, or a request that failed in a way that may heal, starts a
//     new session (redo.go), until nothing has committed for
//     Options.GiveUpAfter;
//   - a stop (ctx canceled) ends the open transaction whole and returns
//     nil within seconds; the session is closed promptly and the group
//     left, except before a redo (the next session takes the partitions
//     back).

// stageWork is what a stage does in the transactional loop. The loop
// calls it from one goroutine, in this order for each transaction:
// assigned (when the partitions changed), ready, process for each batch
// polled in the transaction, precommit (if every process succeeded),
// then ended.
type stageWork interface {
	// assigned takes the partitions the session owns now, between
	// transactions, and those revoked or lost since the last call (even
	// if assigned back: another instance may have changed their state).
	assigned(ctx context.Context, owned, dropped map[int32]bool, now time.Time) error
	// ready runs before each transaction begins: what an owned
	// partition needs first (its state restored after an assignment or
	// an abort).
	ready(ctx context.Context) error
	// process applies one polled batch (maybe empty: time passes) in the
	// open transaction, producing through the loop's txn. last reports
	// that the transaction must end now and be the stage's last
	// (UntilCaughtUp: it carries the finals).
	process(fs kgo.Fetches, now time.Time) (last bool, err error)
	// precommit produces what must commit with the transaction's records
	// (watermark markers, state entries), after all of them.
	precommit(now time.Time) error
	// ended tells the stage how the transaction ended. Not committed: it
	// aborted, or its outcome is unknown (the session then ends), and
	// the stage rewinds to its last commit, as the session's consumer
	// does. done reports that the stage is finished (a committed last
	// transaction): the loop returns nil.
	ended(committed bool) (done bool)
}

// loopSpec names a stage's session.
type loopSpec struct {
	name  string // the stage, in logs and errors
	group string
	topic string // the input topic
	// broadcast, if set, is a second input topic, read from its start
	// (a temporal join's table rows, for a join in the source's
	// partitions): partition i of both is one task's, so the group
	// assigns them together (kgo.RangeBalancer: both topics have the
	// same partition count).
	broadcast string
	txnID     string
	reset     kgo.Offset      // where a partition without a committed offset starts
	manual    map[string]bool // topics whose records carry their partition (markers, state entries)
	// records, if set, ends a transaction once it has taken this many
	// input records (1: one poll), as Options.CommitRecords does; the
	// smaller of the two applies.
	records int
}

// maxRecords is how many input records end a transaction (0: the
// interval alone ends it).
func (l *loop) maxRecords() int {
	n, o := l.spec.records, l.p.opts.CommitRecords
	if n == 0 || o > 0 && o < n {
		return o
	}
	return n
}

// txn produces a stage's records into the open transaction. Records are
// produced under a context that a stop does not cancel: a canceled record
// would fail while the transaction still commits the offsets of the input
// it came from. The first produce error aborts the transaction.
type txn struct {
	s       *kgo.GroupTransactSession
	pctx    context.Context
	perr    firstErr
	promise func(*kgo.Record, error)
	counts  txnCounts // what its records counted (settle)
	reports []func()  // what they report (reports.go)
	out     outArena  // records, headers and bytes of what a stage produces
	clock   time.Time // the timestamp of the records produced next (stamp)
}

func newTxn(ctx context.Context, s *kgo.GroupTransactSession) *txn {
	t := &txn{s: s, pctx: context.WithoutCancel(ctx)}
	t.promise = func(_ *kgo.Record, err error) { t.perr.set(err) }
	return t
}

func (t *txn) produce(r *kgo.Record) {
	if r.Timestamp.IsZero() {
		r.Timestamp = t.clock
	}
	t.s.Produce(t.pctx, r, t.promise)
}

// runLoop runs a stage: sessions of spec, each with the stageWork
// newWork builds for it, until a stop, an error, or the stage is done.
func (p *Pipeline) runLoop(ctx context.Context, spec loopSpec, newWork func(*txn) (stageWork, error)) error {
	var doubt *inDoubt // carried from a session to the next
	err := p.redo(ctx, spec.name, spec.group, func(ctx context.Context, committedAt *time.Time) error {
		return p.loopSession(ctx, spec, newWork, committedAt, &doubt)
	})
	p.settleLastDoubt(ctx, spec.group, &doubt)
	return err
}

// loop is one session of a stage's loop.
type loop struct {
	p           *Pipeline
	spec        loopSpec
	s           *kgo.GroupTransactSession
	a           *assignment
	tx          *txn
	w           stageWork
	committedAt *time.Time
	doubt       **inDoubt // a transaction end of unknown outcome (doubt.go)
}

// loopSession is one session: from a new transactional client to a stop,
// a failure, or (a *redoError) a transaction whose end failed, after
// which runLoop starts another.
func (p *Pipeline) loopSession(ctx context.Context, spec loopSpec, newWork func(*txn) (stageWork, error), committedAt *time.Time, doubt **inDoubt) (retErr error) {
	a := &assignment{owned: map[int32]bool{}}
	s, closeSession, err := p.session(spec, a)
	if err != nil {
		return err
	}
	defer func() {
		closeSession()
		if !isRedo(transient(retErr)) {
			p.leave(spec.group) // a redo keeps the membership: the next session takes the same partitions back
		}
	}()
	if err := p.fence(ctx, s, spec.txnID); err != nil {
		return stopped(ctx, err)
	}
	if err := p.resolveDoubt(ctx, spec.group, doubt); err != nil {
		return stopped(ctx, err)
	}
	l := &loop{p: p, spec: spec, s: s, a: a, tx: newTxn(ctx, s), committedAt: committedAt, doubt: doubt}
	if l.w, err = newWork(l.tx); err != nil {
		return err
	}
	for {
		again, err := l.round(ctx)
		if !again {
			return err
		}
	}
}

// stopped is nil at a stop (ctx canceled), else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// round runs one transaction. again is false when the session ends,
// with err (nil: a stop, or the stage is done).
func (l *loop) round(ctx context.Context) (again bool, err error) {
	p, s := l.p, l.s
	began := time.Now()
	fs, err := p.poll(ctx, s)
	if err != nil {
		return false, stopped(ctx, err)
	}
	if owned, ok := l.a.snapshot(); ok {
		if err := l.w.assigned(ctx, owned, l.a.takeDropped(), p.opts.Now()); err != nil {
			return false, stopped(ctx, err)
		}
	}
	if err := l.w.ready(ctx); err != nil {
		return false, stopped(ctx, err)
	}
	if err := s.Begin(); err != nil {
		return false, beginFailed(err)
	}
	now, workErr, pollErr := l.take(ctx, fs, began.Add(p.opts.CommitInterval))
	if workErr == nil {
		l.tx.stamp()
		workErr = l.w.precommit(now)
	}
	if workErr == nil {
		workErr = p.flush(ctx, s)
	}
	if workErr == nil {
		workErr = l.tx.perr.take()
	}
	offsets := s.Client().UncommittedOffsets()
	committed, err := p.end(ctx, s, l.spec.group, workErr == nil)
	l.tx.perr.take()
	if !committed && err != nil && workErr == nil {
		*l.doubt = &inDoubt{counts: l.tx.counts, reports: l.tx.reports, offsets: offsets} // the next session finds out
		l.tx.reports = nil
	}
	l.tx.settle(p, committed)
	return l.ended(ctx, committed, err, workErr, pollErr)
}

// take processes the transaction's input: the first poll's batch and,
// if it held records, the batches polled after it until deadline (the
// commit interval after the first poll began) or maxRecords, a stop, an
// error, or the stage's last batch. A fetcher polls the next batch while
// this goroutine processes the current one (one batch ahead), and
// records are produced asynchronously: the flush before the end waits
// for the last acknowledgements only. Every batch polled is processed in
// this transaction, because its offsets commit with it (the session
// commits what was polled); the assignment cannot change before
// AllowRebalance, so the partitions stay those of the first poll. It
// returns the clock of the last batch processed; a fetch error makes the
// transaction abort and is returned as pollErr, which ends the session
// as an error of the first poll does.
func (l *loop) take(ctx context.Context, fs kgo.Fetches, deadline time.Time) (now time.Time, workErr, pollErr error) {
	now = l.p.opts.Now()
	l.tx.stamp()
	last, workErr := l.w.process(fs, now)
	max := l.maxRecords()
	if fs.NumRecords() == 0 || max > 0 && fs.NumRecords() >= max || last || workErr != nil || ctx.Err() != nil {
		return now, workErr, nil
	}
	hctx, halt := context.WithCancel(ctx)
	defer halt()
	batches := make(chan polled, 1)
	go l.fetch(hctx, deadline, fs.NumRecords(), max, batches)
	for b := range batches {
		if b.err != nil && ctx.Err() == nil && hctx.Err() == nil {
			pollErr, workErr = b.err, cmp.Or(workErr, b.err)
		}
		if workErr != nil || b.fs.NumRecords() == 0 {
			continue // aborting: what is left goes with the transaction
		}
		now = l.p.opts.Now()
		l.tx.stamp()
		if last, workErr = l.w.process(b.fs, now); last || workErr != nil {
			halt() // the batch the fetcher holds, if any, is still processed
		}
	}
	return now, workErr, pollErr
}

// polled is a batch the fetcher hands to the loop, or its error.
type polled struct {
	fs  kgo.Fetches
	err error
}

// fetch polls batches for the open transaction into out, until deadline,
// max input records (taken: those of the first poll; 0: no bound), ctx
// done (a stop, or the loop halting it), or a poll error (the last batch
// out). A poll that returns records is handed over even when ctx ended
// meanwhile: the records are polled, so they are the transaction's.
func (l *loop) fetch(ctx context.Context, deadline time.Time, taken, max int, out chan<- polled) {
	defer close(out)
	for ctx.Err() == nil && (max == 0 || taken < max) {
		wait := time.Until(deadline)
		if wait <= 0 {
			return
		}
		fs, err := l.p.pollFor(ctx, l.s, wait)
		taken += fs.NumRecords()
		if fs.NumRecords() > 0 || err != nil {
			out <- polled{fs: fs, err: err}
		}
		if err != nil {
			return
		}
	}
}

// ended handles the end of a transaction: committed, or not (workErr,
// the work's error, made it abort; err is the end's own).
func (l *loop) ended(ctx context.Context, committed bool, err, workErr, pollErr error) (again bool, _ error) {
	p, s := l.p, l.s
	if serr := p.stop.get(); serr != nil {
		s.AllowRebalance()
		return false, serr // ended aborted: the source changed
	}
	if committed {
		*l.committedAt = time.Now()
	}
	if l.w.ended(committed) {
		return false, nil
	}
	if !committed && workErr != nil && ctx.Err() == nil {
		if isFatal(workErr) {
			s.AllowRebalance()
			return false, workErr // a retry would meet it again
		}
		p.log.Warn("kafka: transaction aborted", "stage", l.spec.name, "err", workErr)
	}
	s.AllowRebalance()
	if err != nil {
		return false, stopped(ctx, endFailed(err))
	}
	if pollErr != nil {
		return false, pollErr
	}
	return ctx.Err() == nil, nil
}
