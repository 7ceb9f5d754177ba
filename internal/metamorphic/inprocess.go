package metamorphic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ubiksql/ubik/internal/handle"
	"sort"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Config is one in-process configuration of the root API.
type Config struct {
	// Batch events are pushed between early emissions (EmitEarly) and
	// drains (Next).
	Batch int
	// MaxPending is Options.MaxPendingRecords (0: the default). Pulled
	// with Next; with Callback set records go to OnRecord instead.
	MaxPending int
	Callback   bool
	// RestoreAt lists event indexes (ascending) before which the query is
	// checkpointed, dropped, and a new one started and restored from the
	// checkpoint entries.
	RestoreAt []int
	// Incremental makes every checkpoint after a restore's first an
	// incremental one (only changed entries, nil deletes), applied to the
	// host's copy of the state.
	Incremental bool
	// Crash: after a restore point's checkpoint the query goes on for a
	// few events, then the host crashes: it forgets the records it took
	// since the checkpoint, and a new query restored from the checkpoint
	// replays the input from there (as `ubik run --state-dir` does after
	// kill -9). The replay must give the same records.
	Crash bool
	// Threads > 1 runs the query on that many shards (QueryOptions.Threads;
	// with Callback). Each restore starts the new query on another count
	// (Threads, then 1, 3, 2, 4, ... in turn), so a checkpoint of one
	// count restores into another.
	Threads int
	// FixedClock stops the processing clock (Options.Now), so early
	// emission happens only at the harness's EmitEarly calls and two
	// runs can be compared record by record.
	FixedClock bool
	// Feed > 0 hands the events over with Query.Feed (their outcomes by
	// QueryOptions.OnEventError, which must come in input order) and
	// cuts them into blocks of Feed events for the decoding threads
	// (QueryOptions.BlockEvents): the block boundaries, like the batch
	// sizes, must not change a record.
	Feed int
}

// threadsAt is the thread count of the query started after n restores.
func (c Config) threadsAt(n int) int {
	if c.Threads <= 1 {
		return c.Threads
	}
	if n == 0 {
		return c.Threads
	}
	return []int{1, 3, 2, 4}[(n-1)%4]
}

func (c Config) String() string {
	s := fmt.Sprintf("batch=%d", c.Batch)
	if c.Callback {
		s += " callback"
	} else if c.MaxPending > 0 {
		s += fmt.Sprintf(" max_pending=%d", c.MaxPending)
	}
	if c.Threads > 1 {
		s += fmt.Sprintf(" threads=%d", c.Threads)
	}
	if c.Feed > 0 {
		s += fmt.Sprintf(" feed_blocks=%d", c.Feed)
	}
	if len(c.RestoreAt) > 0 {
		s += fmt.Sprintf(" restore_at=%v", c.RestoreAt)
		if c.Incremental {
			s += " incremental"
		}
		if c.Crash {
			s += " crash-and-replay"
		}
	}
	return s
}

// entry is one checkpoint entry of the host's copy; seq orders the last
// writes.
type entry struct {
	val []byte
	seq int
}

// inProc is one run's host: the engine, the live query, the host's copy
// of the checkpoint entries, and the records taken so far.
type inProc struct {
	c      *Case
	cfg    Config
	eng    *ubik.Engine
	q      *ubik.Query
	state  map[string]entry
	seq    int
	ckpts  int
	starts int
	res    Result
	// With Feed: the tag of the last outcome reported (-1: none since
	// the query started), and an outcome out of input order.
	lastTag  int64
	badOrder error
}

// RunInProcess puts c through the root package API under cfg.
func RunInProcess(c *Case, cfg Config) (*Result, error) {
	opts := ubik.DefaultOptions()
	if cfg.MaxPending > 0 {
		opts.MaxPendingRecords = cfg.MaxPending
	}
	if cfg.FixedClock {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		opts.Now = func() time.Time { return at }
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	h := &inProc{c: c, cfg: cfg, eng: eng, state: map[string]entry{}, res: Result{Path: "in-process " + cfg.String()}}
	if err := h.start(); err != nil {
		return nil, err
	}
	restores := cfg.RestoreAt
	batch := max(cfg.Batch, 1)
	type crashPoint struct {
		at, pos, recs int
		st            ubik.Stats
	}
	var crash *crashPoint
	for i := 0; i < len(c.Lines); i++ {
		if crash != nil && i == crash.at {
			h.res.Recs = h.res.Recs[:crash.recs]
			if err := h.restore(crash.pos, crash.st); err != nil {
				return nil, fmt.Errorf("%s: restore after a crash before event %d: %w", h.res.Path, i, err)
			}
			i, crash = crash.pos, nil
		} else if len(restores) > 0 && restores[0] == i {
			restores = restores[1:]
			st, err := h.checkpoint(i)
			if err != nil {
				return nil, fmt.Errorf("%s: checkpoint before event %d: %w", h.res.Path, i, err)
			}
			// Crash before the next restore point, a few events on.
			at := i + 1 + i%17
			if len(restores) > 0 {
				at = min(at, restores[0])
			}
			if cfg.Crash && at < len(c.Lines) {
				crash = &crashPoint{at: at, pos: i, recs: len(h.res.Recs), st: st}
			} else if err := h.restore(i, st); err != nil {
				return nil, fmt.Errorf("%s: restore before event %d: %w", h.res.Path, i, err)
			}
		}
		if err := h.pushSecond(i); err != nil {
			return nil, err
		}
		line := c.Lines[i]
		if err := h.push(line, i); err != nil {
			return nil, fmt.Errorf("%s: event %d %q: %w", h.res.Path, i, line, err)
		}
		if (i+1)%batch == 0 {
			if err := h.q.EmitEarly(); err != nil {
				return nil, fmt.Errorf("%s: early emission after event %d: %w", h.res.Path, i, err)
			}
			h.drain()
		}
	}
	if err := h.pushSecond(len(c.Lines)); err != nil {
		return nil, err
	}
	if err := h.q.Close(); err != nil {
		return nil, fmt.Errorf("%s: close: %w", h.res.Path, err)
	}
	h.drain()
	if h.badOrder != nil {
		return nil, fmt.Errorf("%s: %w", h.res.Path, h.badOrder)
	}
	st := h.q.Stats()
	h.res.Malformed, h.res.Duplicates = st.Malformed, st.Duplicates
	h.res.TableLate, h.res.Stats = st.Join.LateTableRows, &st
	if st.Pending != 0 || st.Queued {
		return nil, fmt.Errorf("%s: after the last Next %d records are pending (queued: %v)", h.res.Path, st.Pending, st.Queued)
	}
	return &h.res, nil
}

func (h *inProc) start() error {
	qo := ubik.QueryOptions{Name: QueryName, Threads: h.cfg.threadsAt(h.starts)}
	h.starts++
	h.lastTag = -1
	if h.cfg.Feed > 0 {
		qo.BlockEvents = h.cfg.Feed
		qo.OnEventError = func(tag int64, _ []byte, err *ubik.EventError) {
			if tag <= h.lastTag && h.badOrder == nil {
				h.badOrder = fmt.Errorf("the outcome of event %d (%v) was reported after event %d's", tag, err, h.lastTag)
			}
			h.lastTag = tag
		}
	}
	if h.cfg.Callback {
		qo.OnRecord = func(r changelog.Record) error {
			h.take(r)
			return nil
		}
	}
	q, err := h.eng.Start(h.c.SQL, qo)
	if err != nil {
		return err
	}
	// Every shape (a query, a join, a graph of views) must really run on
	// the threads configured, or the comparison with one thread would
	// prove nothing; only a graph none of whose queries has a GROUP BY key
	// (one group each) has nothing to split.
	if qo.Threads > 1 && q.Threads() != qo.Threads && anySharded(handle.Query(q.Plan())) {
		return fmt.Errorf("the query runs on %d threads, configured %d", q.Threads(), qo.Threads)
	}
	h.q = q
	return nil
}

func (h *inProc) take(r changelog.Record) {
	h.res.Recs = append(h.res.Recs, Rec{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...),
		Final: r.Meta.Final, Revision: r.Meta.Revision})
}

// drain takes every pending record and holds the bound: never more than
// MaxPendingRecords are pending.
func (h *inProc) drain() int {
	n := 0
	for {
		if st := h.q.Stats(); h.cfg.MaxPending > 0 && st.Pending > h.cfg.MaxPending {
			panic(fmt.Sprintf("%s: %d records pending, over MaxPendingRecords %d", h.res.Path, st.Pending, h.cfg.MaxPending))
		}
		r, ok := h.q.Next()
		if !ok {
			return n
		}
		h.take(r)
		n++
	}
}

// push pushes one event, draining while the query reports backpressure.
// A malformed event is counted by the query (Stats) and is not an error
// here: the comparison of counts across paths judges it.
func (h *inProc) push(line []byte, i int) error {
	for tries := 0; ; tries++ {
		var err error
		if h.cfg.Feed > 0 {
			err = h.q.Feed(line, int64(i))
		} else {
			err = h.q.Push(line)
		}
		if errors.Is(err, ubik.ErrBackpressure) {
			if h.cfg.Callback {
				return fmt.Errorf("backpressure with a callback: %w", err)
			}
			if h.drain() == 0 && tries > 0 {
				return fmt.Errorf("backpressure twice with nothing to take: %w", err)
			}
			continue
		}
		var ee *ubik.EventError
		if errors.As(err, &ee) {
			return nil
		}
		return err
	}
}

// pushSecond pushes the second input's rows placed before event i (a
// join case), draining while the query reports backpressure. A
// malformed row is counted by the query, as an event is.
func (h *inProc) pushSecond(i int) error {
	c := h.c
	j := sort.SearchInts(c.SecondAt, i)
	for ; j < len(c.SecondAt) && c.SecondAt[j] == i; j++ {
		for tries := 0; ; tries++ {
			err := h.q.PushInput(c.Second, c.SecondLines[j])
			if errors.Is(err, ubik.ErrBackpressure) && !h.cfg.Callback {
				if h.drain() == 0 && tries > 0 {
					return fmt.Errorf("%s: %s row %d: backpressure twice with nothing to take: %w", h.res.Path, c.Second, j, err)
				}
				continue
			}
			var ee *ubik.EventError
			if err != nil && !errors.As(err, &ee) {
				return fmt.Errorf("%s: %s row %d %q: %w", h.res.Path, c.Second, j, c.SecondLines[j], err)
			}
			break
		}
	}
	return nil
}

// checkpoint writes the query's state into the host's copy, with the index
// of the next event as the position, and returns the counters then.
func (h *inProc) checkpoint(next int) (ubik.Stats, error) {
	h.drain()
	full := !h.cfg.Incremental || h.ckpts == 0
	pos := binary.AppendUvarint(nil, uint64(next))
	target := h.state
	if full {
		// A full checkpoint replaces the host's copy.
		target = map[string]entry{}
	}
	err := h.q.Checkpoint(full, pos, func(k, v []byte) error {
		h.seq++
		if v == nil {
			delete(target, string(k))
		} else {
			target[string(k)] = entry{val: append([]byte(nil), v...), seq: h.seq}
		}
		return nil
	})
	if err != nil {
		return ubik.Stats{}, err
	}
	h.state = target
	h.ckpts++
	return h.q.Stats(), nil
}

// restore drops the query, starts a new one and restores it from the
// host's copy; the position must be next, and the counters st.
func (h *inProc) restore(next int, st ubik.Stats) error {
	// Dropped without Close: nothing finalizes; the new query takes over.
	if err := h.start(); err != nil {
		return err
	}
	keys := make([]string, 0, len(h.state))
	for k := range h.state {
		keys = append(keys, k)
	}
	// In the order of each entry's last write, as a compacted state topic
	// gives them back.
	sort.Slice(keys, func(i, j int) bool { return h.state[keys[i]].seq < h.state[keys[j]].seq })
	var got []byte
	var meta string
	for _, k := range keys {
		p, err := h.q.Restore([]byte(k), h.state[k].val)
		if err != nil {
			return fmt.Errorf("restore entry %q: %w", k, err)
		}
		if p != nil {
			got, meta = p, k
		}
	}
	if meta == "" {
		return fmt.Errorf("the checkpoint of %d entries has no meta entry", len(keys))
	}
	if err := h.q.FinishRestore(); err != nil {
		return err
	}
	if v, n := binary.Uvarint(got); n <= 0 || v != uint64(next) {
		return fmt.Errorf("restored position %x, want event %d", got, next)
	}
	if st2 := h.q.Stats(); st2.EventsIn != st.EventsIn || st2.Malformed != st.Malformed {
		return fmt.Errorf("restored counters: %d events in, %d malformed; checkpointed %d, %d", st2.EventsIn, st2.Malformed, st.EventsIn, st.Malformed)
	}
	return nil
}

// anySharded reports whether q or a view it reads has a GROUP BY key, so
// that its groups split among threads.
func anySharded(q *plan.Query) bool {
	if exec.Sharded(q) {
		return true
	}
	for _, v := range q.Views() {
		if anySharded(v) {
			return true
		}
	}
	return false
}
