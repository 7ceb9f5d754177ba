package land

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

// Batch is a group of records that a Source hands out and that is
// committed as one.
type Batch struct {
	Records []changelog.Record
	// Where, when set, names the origin of Records[i] in errors (for Kafka:
	// topic, partition and offset).
	Where func(i int) string
	// Lag is the source's backlog (records not yet handed out) as of this
	// batch, or -1 when unknown.
	Lag int64
	// Skipped is the number of records the source read for this batch and
	// left out of Records because they are not changelog records (a source
	// told to skip bad records). Run counts them when the batch commits.
	Skipped int
	// Token is the source's own bookkeeping (e.g. offsets to commit).
	Token any
}

// Source feeds Run. Next blocks until records are available and returns
// io.EOF when a finite source is exhausted. Commit records that every record
// of b, and of every batch before it, is durably landed; Run calls it in the
// order the batches came from Next. A crash between a landing and its
// Commit replays the batch, which the guard makes harmless.
type Source interface {
	Next(ctx context.Context) (*Batch, error)
	Commit(ctx context.Context, b *Batch) error
}

// RunOptions tune Run. The zero value is valid; zero fields take the
// documented defaults.
type RunOptions struct {
	// MaxInFlight bounds the batches being landed at once (default 1).
	// Batches land concurrently (the guard makes landing commutative) but
	// are committed in source order.
	MaxInFlight int
	// MinBackoff and MaxBackoff bound the exponential, jittered wait between
	// attempts at a failing store or commit (defaults 50ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts per batch; 0 (the default) retries
	// until ctx is done, so a store outage pauses consumption and loses
	// nothing.
	MaxAttempts int
	// Logger receives retries and skipped records (default: discard).
	Logger *slog.Logger
	// OnBadRecord, when set, receives each record that can never land (a
	// bad record, or one the store refuses), which is then left out while
	// the rest of its batch lands; its error stops Run. When nil, such a
	// record stops Run with a *RecordError naming it. A record that does
	// not fit the mode always stops Run: the mode is wrong, not the record.
	OnBadRecord func(BadRecord) error
	// Counters, when set, is updated as Run goes (readable concurrently).
	Counters *Counters
	// OnBatch, when set, is called after each batch is committed.
	OnBatch func(BatchStats)
}

// BatchStats describes one committed batch.
type BatchStats struct {
	Records int
	Skipped int // bad records the source left out (Batch.Skipped)
	// Rejected counts the records Run left out and handed to OnBadRecord.
	Rejected int
	Result   Result
	Retries  int // failed land and commit attempts of this batch that were retried
	Lag      int64
	// StoreTime is the store round trip: how long the Land call that
	// succeeded took (failed attempts and backoff excluded).
	StoreTime time.Duration
	// Elapsed runs from the batch leaving the source to its commit.
	Elapsed time.Duration
}

// Counters are Run's metrics, safe to read while Run runs. The record and
// batch counters move when a batch commits; the error and retry counters
// move at each failed attempt, so an outage shows while it lasts.
type Counters struct {
	Batches    atomic.Int64 // batches committed
	Landed     atomic.Int64
	Duplicate  atomic.Int64
	Superseded atomic.Int64
	Skipped    atomic.Int64 // bad records the source skipped (Batch.Skipped)
	Rejected   atomic.Int64 // records that can never land, left out (OnBadRecord)
	// StoreErrors counts failed Land attempts that were not a property of
	// the records (those stop Run) nor the end of the run's context.
	StoreErrors atomic.Int64
	// CommitErrors counts failed Commit attempts, likewise.
	CommitErrors atomic.Int64
	Retried      atomic.Int64 // failed attempts (land or commit) that were retried
	Lag          atomic.Int64 // the source's last reported backlog, -1 if unknown
}

func (c *Counters) add(s BatchStats) {
	c.Batches.Add(1)
	c.Landed.Add(int64(s.Result.Landed))
	c.Duplicate.Add(int64(s.Result.Duplicate))
	c.Superseded.Add(int64(s.Result.Superseded))
	c.Skipped.Add(int64(s.Skipped))
	c.Rejected.Add(int64(s.Rejected))
	c.Lag.Store(s.Lag)
}

// Permanent reports whether err is a property of the records (bad, of
// the wrong mode, or refused by the store), which no retry can fix.
func Permanent(err error) bool {
	return errors.Is(err, ErrBadRecord) || errors.Is(err, ErrModeMismatch) || errors.Is(err, ErrRefused)
}

// Config reports whether err points at the store's configuration (a
// missing table, grant or credentials): it stops Run at once, whatever
// the batch, and no record is blamed.
func Config(err error) bool { return errors.Is(err, ErrConfig) }

// BadRecord is a record that can never land, handed to
// RunOptions.OnBadRecord.
type BadRecord struct {
	Batch  *Batch
	Index  int    // position in Batch.Records
	Where  string // Batch.Where(Index), when the source names origins
	Record changelog.Record
	Err    error // the lander's or the store's reason
}

func (o RunOptions) withDefaults() (RunOptions, error) {
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 1
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.MaxInFlight < 0:
		return o, fmt.Errorf("land: MaxInFlight %d is negative", o.MaxInFlight)
	case o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff:
		return o, fmt.Errorf("land: backoff bounds %v..%v are not ordered", o.MinBackoff, o.MaxBackoff)
	case o.MaxAttempts < 0:
		return o, fmt.Errorf("land: MaxAttempts %d is negative", o.MaxAttempts)
	}
	return o, nil
}

// Run lands every batch of src into l until src is exhausted (then it
// returns nil), ctx is done, or a batch fails permanently (a bad record, a
// store configuration error (ErrConfig), or MaxAttempts spent). A batch is committed only after the store
// acknowledged all of its records.
func Run(ctx context.Context, src Source, l Lander, opts RunOptions) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	stop := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	type pending struct {
		b     *Batch
		start time.Time
		done  chan struct{}
		stats BatchStats
		err   error
	}
	queue := make(chan *pending, o.MaxInFlight)
	// slots bounds the batches between Next and their commit.
	slots := make(chan struct{}, o.MaxInFlight)
	var wg sync.WaitGroup
	pollErr := make(chan error, 1)

	// The poller hands batches to landing goroutines; the queue's capacity
	// bounds the batches in flight.
	go func() {
		defer close(queue)
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				pollErr <- context.Cause(ctx)
				return
			}
			b, err := src.Next(ctx)
			if err != nil {
				pollErr <- err
				return
			}
			p := &pending{b: b, start: time.Now(), done: make(chan struct{})}
			select {
			case queue <- p:
			case <-ctx.Done():
				pollErr <- context.Cause(ctx)
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(p.done)
				p.stats, p.err = landBatch(ctx, l, p.b, o)
			}()
		}
	}()

	var runErr error
	commit := func(p *pending) {
		<-p.done
		if runErr != nil {
			return // draining after a failure
		}
		if p.err != nil {
			runErr = p.err
			cancel(p.err)
			return
		}
		var failed *atomic.Int64
		if o.Counters != nil {
			failed = &o.Counters.CommitErrors
		}
		// A batch the store acknowledged is committed even if the caller
		// stopped the run while it landed: a clean stop should leave no
		// landed batch to replay. The commit gets commitGrace past the stop.
		cctx, ccancel := graceContext(stop, commitGrace)
		retries, err := retry(cctx, o, "commit", failed, func() error { return src.Commit(cctx, p.b) })
		ccancel()
		if err != nil {
			runErr = fmt.Errorf("land: committing a landed batch: %w", err)
			cancel(runErr)
			return
		}
		p.stats.Retries += retries
		p.stats.Elapsed = time.Since(p.start)
		if o.Counters != nil {
			o.Counters.add(p.stats)
		}
		if o.OnBatch != nil {
			o.OnBatch(p.stats)
		}
	}
	for p := range queue {
		commit(p)
		<-slots
	}
	wg.Wait()
	perr := <-pollErr
	if runErr != nil {
		return runErr
	}
	if errors.Is(perr, io.EOF) {
		return nil
	}
	return perr
}

// commitGrace is how long a commit of a landed batch may run past a stop.
const commitGrace = 3 * time.Second

// graceContext is a context that ends grace after ctx does.
func graceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return g, func() { stop(); cancel() }
}

// retry calls f until it succeeds, fails permanently or for the store's
// configuration, runs out of attempts or ctx is done. It returns the number
// of retries. failed, when set, counts the failures that were none of
// those.
func retry(ctx context.Context, o RunOptions, what string, failed *atomic.Int64, f func() error) (int, error) {
	delay := o.MinBackoff
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return attempt - 1, nil
		}
		if Permanent(err) || Config(err) || ctx.Err() != nil {
			return attempt - 1, err
		}
		if failed != nil {
			failed.Add(1)
		}
		if o.MaxAttempts > 0 && attempt >= o.MaxAttempts {
			return attempt - 1, fmt.Errorf("%s: giving up after %d attempts: %w", what, attempt, err)
		}
		// Full jitter keeps racing landers from retrying in lockstep.
		wait := delay/2 + rand.N(delay/2+1)
		o.Logger.Warn("land: retrying", "op", what, "attempt", attempt, "wait", wait, "err", err)
		if o.Counters != nil {
			o.Counters.Retried.Add(1)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt - 1, err
		case <-t.C:
		}
		delay = min(delay*2, o.MaxBackoff)
	}
}

// SliceSource is a finite Source over in-memory batches, for hosts that land
// records from the in-process iterator and for tests. Commit records the
// number of committed batches.
type SliceSource struct {
	mu        sync.Mutex
	batches   [][]changelog.Record
	next      int
	committed int
}

// NewSliceSource returns a Source that hands out batches in order.
func NewSliceSource(batches ...[]changelog.Record) *SliceSource {
	return &SliceSource{batches: batches}
}

// Next implements Source.
func (s *SliceSource) Next(ctx context.Context) (*Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.batches) {
		return nil, io.EOF
	}
	i := s.next
	s.next++
	return &Batch{Records: s.batches[i], Lag: int64(len(s.batches) - s.next), Token: i}, nil
}

// Commit implements Source.
func (s *SliceSource) Commit(_ context.Context, b *Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := b.Token.(int)
	if i != s.committed {
		return fmt.Errorf("land: batch %d committed out of order (expected %d)", i, s.committed)
	}
	s.committed++
	return nil
}

// Committed is the number of batches committed so far.
func (s *SliceSource) Committed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}
