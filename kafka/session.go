package kafka

// The transactional group session every stage's loop (loop.go) runs on:
// its options (static membership, read_committed, rebalances that wait
// for the loop), fencing a predecessor, polling, the flush and end of a
// transaction with the membership check before a commit, and the prompt
// close and leave of a stop.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// assignment collects the group callbacks' changes for the processing loop,
// which applies them between transactions.
type assignment struct {
	mu      sync.Mutex
	owned   map[int32]bool
	changed bool
	// dropped are the partitions revoked or lost since the last
	// takeDropped, even if assigned back since: another instance may
	// have owned one in between (this one paused past its session
	// timeout, then rejoined) and changed its state, so whatever this
	// instance holds in memory for it is stale.
	dropped map[int32]bool
}

func (a *assignment) assign(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ps := range m {
		for _, x := range ps {
			a.owned[x] = true
		}
	}
	a.changed = true
}

func (a *assignment) revoke(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ps := range m {
		for _, x := range ps {
			delete(a.owned, x)
			if a.dropped == nil {
				a.dropped = map[int32]bool{}
			}
			a.dropped[x] = true
		}
	}
	a.changed = true
}

// takeDropped returns the partitions revoked or lost since the last call.
func (a *assignment) takeDropped() map[int32]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.dropped
	a.dropped = nil
	return d
}

// snapshot returns the owned partitions if they changed since the last call.
func (a *assignment) snapshot() (map[int32]bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.changed {
		return nil, false
	}
	a.changed = false
	out := make(map[int32]bool, len(a.owned))
	for k := range a.owned {
		out[k] = true
	}
	return out, true
}

// session opens a transactional group session. Rebalances wait for the
// loop to finish its transaction (BlockRebalanceOnPoll + AllowRebalance), so
// a healthy rebalance aborts nothing; a lost session still aborts.
//
// The returned close ends the session (see closeSession); call it once the
// last transaction has ended.
func (p *Pipeline) session(spec loopSpec, a *assignment) (*kgo.GroupTransactSession, func(), error) {
	group, topic, reset := spec.group, spec.topic, spec.reset
	// The client's context is canceled only by closeSession, after the
	// last transaction ended: it interrupts a JoinGroup in flight.
	cctx, cancel := context.WithCancel(context.Background())
	opts := append([]kgo.Opt{}, p.base...)
	topics := []string{topic}
	if spec.broadcast != "" {
		topics = append(topics, spec.broadcast)
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()), kgo.AdjustFetchOffsetsFn(resetTopic(topic, reset)))
		reset = kgo.NewOffset().AtStart()
	}
	opts = append(opts,
		kgo.WithContext(cctx),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.TransactionalID(spec.txnID),
		kgo.TransactionTimeout(p.opts.TransactionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.BlockRebalanceOnPoll(),
		kgo.InstanceID(p.opts.InstanceID),
		kgo.SessionTimeout(p.opts.SessionTimeout),
		kgo.ConsumeResetOffset(reset),
		kgo.OnPartitionsAssigned(a.assign),
		kgo.OnPartitionsRevoked(a.revoke),
		kgo.OnPartitionsLost(a.revoke),
		kgo.RecordPartitioner(mixedPartitioner(spec.manual)),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(100000),
		kgo.WithHooks(&txnRecords{}),
	)
	if topic == p.opts.Source.Topic || p.tj != nil && topic == p.tj.ep.Topic {
		opts = append(opts, p.keepControl()...)
	}
	s, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("kafka: transactional session for group %s: %w", group, err)
	}
	return s, func() { p.closeSession(s, cancel, group) }, nil
}

// resetTopic starts topic's partitions that have no committed offset
// at reset, the others' at their start (kgo.ConsumeResetOffset is one
// for all the topics a group reads).
func resetTopic(topic string, reset kgo.Offset) func(context.Context, map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	return func(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
		for part, o := range offs[topic] {
			if o.EpochOffset().Offset < 0 { // not committed: the reset offset
				offs[topic][part] = reset
			}
		}
		return offs, nil
	}
}

// closeGrace is how long closeSession lets a session close by itself
// before it interrupts the group request in flight.
const closeGrace = time.Second

// closeSession closes a stage's session once its last transaction has
// ended (committed or aborted: nothing the session still does can change
// what the transaction wrote), promptly.
//
// kgo's Close waits for the group's management loop to stop, and that
// loop does not stop in the middle of a JoinGroup or SyncGroup: it sends
// them under the client's context, not the group's, and the broker
// answers a JoinGroup only when every member has rejoined or the
// rebalance timeout (60 s) passed; kgo's deadline for it is that plus 10 s.
// A stop that landed while a rebalance was under way (a peer killed,
// frozen or stopping at the same time, as every instance of a query is
// when a deployment stops them all) waited for it: up to about a minute
// after SIGTERM (seen in the chaos test; the goroutine dumps showed
// Close in LeaveGroupContext, the loop in joinAndSync). A member that is
// leaving has no use for the answer, so after closeGrace the client's
// context is canceled, which fails the request in flight; the caller
// then leaves the group explicitly (a static member's Close sends no
// LeaveGroup) so the others' rebalance does not wait for this member.
func (p *Pipeline) closeSession(s *kgo.GroupTransactSession, cancel context.CancelFunc, group string) {
	defer cancel()
	s.AllowRebalance() // the last poll may hold the rebalance lock
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(closeGrace):
	}
	p.log.Info("kafka: closing the session: interrupting the group request in flight (a rebalance is under way)", "group", group, "after", closeGrace)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		// Nothing is left to wait for: every request fails once the
		// context is canceled. Should the client still hang, the
		// process stops anyway; the transaction ended already.
		p.log.Warn("kafka: the session did not close within 5 s of interrupting it; going on", "group", group)
	}
}

// fence initializes the session's transactional producer at once, before
// any restore or offset fetch waits on a transaction: InitProducerID with
// this instance's transactional id fences a crashed predecessor (same
// instance id) and makes the broker abort its open transaction, whose
// partitions a restore (last stable offset) and the group's stable offset
// fetch would otherwise wait on until the transaction timeout aborts it.
func (p *Pipeline) fence(ctx context.Context, s *kgo.GroupTransactSession, txnID string) error {
	if _, _, err := s.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("kafka: initializing transactional id %s: %w", txnID, err)
	}
	return nil
}

// leave removes this static member from the group at a clean stop so its
// partitions move at once (a static member's Close does not leave).
func (p *Pipeline) leave(group string) {
	adm, closeAdm, err := p.admin()
	if err != nil {
		return
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(p.opts.InstanceID).Reason("ubik stopping")); err != nil {
		p.log.Warn("kafka: leaving the group", "group", group, "err", err)
	}
}

// mixedPartitioner partitions records that carry a partition (Partition >=
// 0: markers and state entries) there, and every other record by Kafka's
// default partitioner on the key bytes (murmur2), so the records of a key
// land on one partition, in order, exactly where a Java producer puts them.
func mixedPartitioner(manual map[string]bool) kgo.Partitioner {
	keyed := kgo.StickyKeyPartitioner(nil)
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		tp := keyed.ForTopic(topic)
		if !manual[topic] { // looked up once per topic, not per record
			return tp.Partition
		}
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 {
				return int(r.Partition)
			}
			return tp.Partition(r, n)
		}
	})
}

// poll waits at most the commit interval for records.
func (p *Pipeline) poll(ctx context.Context, s *kgo.GroupTransactSession) (kgo.Fetches, error) {
	return p.pollFor(ctx, s, p.opts.CommitInterval)
}

// pollFor waits at most wait for records. When ctx ends meanwhile it
// returns ctx's error with what the poll returned: a poll can return
// records as ctx ends, and records polled in a transaction are its own
// (their offsets commit with it), so they must not be dropped.
func (p *Pipeline) pollFor(ctx context.Context, s *kgo.GroupTransactSession, wait time.Duration) (kgo.Fetches, error) {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fs := s.PollRecords(pctx, p.opts.MaxPollRecords)
	if ctx.Err() != nil {
		return fs, ctx.Err()
	}
	if fs.IsClientClosed() {
		return nil, ErrClosed
	}
	var fatal error
	fs.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		p.log.Warn("kafka: fetch error", "topic", topic, "partition", part, "err", err)
		var oor interface{ IsRetryable() bool }
		if errors.As(err, &oor) && !oor.IsRetryable() && fatal == nil {
			fatal = fmt.Errorf("kafka: fetching topic %s partition %d: %w", topic, part, err)
		}
	})
	return fs, fatal
}

// flush waits until every record of the open transaction is acknowledged
// or failed, so the caller's promise errors are complete before it decides
// to commit. A stop (ctx canceled) does not cut it short: the records were
// produced with a context that a stop does not cancel, and a transaction
// must commit all of its records or none (End's own flush would let a
// record fail after the caller looked at the errors, and commit the input
// offsets without it).
func (p *Pipeline) flush(ctx context.Context, s *kgo.GroupTransactSession) error {
	fctx, cancel := p.endContext(ctx)
	defer cancel()
	if err := s.Client().Flush(fctx); err != nil {
		return fmt.Errorf("kafka: flushing the transaction's records: %w", err)
	}
	return nil
}

// txnRecords counts the records a session's client produced since the
// last transaction end (a kgo hook), so that an end with nothing in it is
// not counted as an aborted transaction: a stage that has no assignment
// yet (its JoinGroup waits for a rebalance) ends an empty transaction
// after every poll, and a final run whose join waited 60 s reported some
// 600 aborts that aborted nothing.
type txnRecords struct{ n atomic.Int64 }

func (c *txnRecords) OnProduceRecordBuffered(*kgo.Record) { c.n.Add(1) }

// takeProduced returns whether s produced a record since the last call.
func takeProduced(s *kgo.GroupTransactSession) bool {
	hooks, _ := s.Client().OptValue(kgo.WithHooks).([]kgo.Hook)
	for _, h := range hooks {
		if c, ok := h.(*txnRecords); ok {
			return c.n.Swap(0) > 0
		}
	}
	return true // not counted: take it as not empty
}

// end ends a transaction: commit when the work succeeded, abort otherwise.
// It returns whether it committed.
func (p *Pipeline) end(ctx context.Context, s *kgo.GroupTransactSession, group string, ok bool) (bool, error) {
	try := kgo.TryCommit
	if !ok || p.stop.get() != nil {
		try = kgo.TryAbort // the source changed under the pipeline: commit nothing more
	}
	empty := !takeProduced(s) && len(s.Client().UncommittedOffsets()) == 0
	// A clean stop still ends the transaction: give it its own deadline.
	ectx, cancel := p.endContext(ctx)
	defer cancel()
	if try == kgo.TryCommit && !p.stillMember(ectx, s, group) {
		try = kgo.TryAbort
	}
	committed, err := s.End(ectx, try)
	if err != nil && ctx.Err() != nil && !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		// Stopping, and the end did not finish within stopEndGrace (or
		// failed): abort whatever the broker still holds open.
		p.c.aborts.Add(1)
		txnID, _ := s.Client().OptValue(kgo.TransactionalID).(string)
		p.abortOpen(txnID, err)
		return false, err
	}
	if err != nil && !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		// An end whose outcome is unknown is redone by a new session
		// only while this instance is still a member of the generation it
		// worked under: a process paused past its session timeout (a
		// zombie another instance took over from) stops as fenced.
		mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		member, answered := p.membership(mctx, s, group)
		mcancel()
		// A coordinator that did not answer (a broker down or out of
		// reach) says nothing about this instance: the new session
		// finds out, once the broker is back.
		if !member && answered {
			p.c.aborts.Add(1)
			txnID, _ := s.Client().OptValue(kgo.TransactionalID).(string)
			return false, fmt.Errorf("%w: transactional id %s: the end of a transaction failed and this instance is no longer a member of the group generation it worked under (paused or cut off past its session timeout); the transaction is not committed; restart the process: %w",
				ErrFenced, txnID, err)
		}
	}
	if committed {
		p.c.commits.Add(1)
	} else if !empty || err != nil {
		p.c.aborts.Add(1)
	}
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		txnID, _ := s.Client().OptValue(kgo.TransactionalID).(string)
		err = fmt.Errorf("%w: transactional id %s: another process took it over, or the broker aborted this process's transaction at its timeout (%s) while the process was paused; the transaction is not committed; restart the process: %w",
			ErrFenced, txnID, p.opts.TransactionTimeout, err)
	}
	return committed, err
}

// stopEndGrace is how long a stop lets the open transaction's flush and
// end run before it cuts them short (see endContext).
const stopEndGrace = 3 * time.Second

// endContext is the context of a transaction's flush and end. A stop (ctx
// canceled) does not cancel it at once: a transaction that is ending
// should end whole, committed or aborted. It is bounded by the
// transaction timeout, and, once ctx is canceled, by stopEndGrace: an end
// can wait much longer than a stop should (kgo's End does not send the
// transaction's offsets while the group's JoinGroup or SyncGroup is in
// flight, and a rebalance waits for a frozen or dead member until its
// session times out, or up to the rebalance timeout). Cutting it short is
// safe: a transaction is atomic, the process is stopping, and the end
// path then aborts what the broker still holds open (abortOpen).
func (p *Pipeline) endContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.TransactionTimeout)
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(stopEndGrace, cancel)
		context.AfterFunc(ectx, func() { t.Stop() })
	})
	return ectx, func() {
		stop()
		cancel()
	}
}

// abortOpen makes the broker abort the open transaction of txnID, if
// there is one, at a stop whose end did not finish: InitProducerID with
// the same transactional id fences this process's producer and aborts
// (or, if its EndTxn reached the broker, completes) the transaction
// right away, as a restart of this instance would, instead of leaving it
// open until the broker's transaction timeout, holding back the last
// stable offset of every partition it wrote (a new owner's restore and
// every read_committed consumer wait for it). Bounded by 5 s; on failure
// the broker aborts it at the transaction timeout.
func (p *Pipeline) abortOpen(txnID string, cause error) {
	opts := append([]kgo.Opt{}, p.base...)
	opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(p.opts.TransactionTimeout))
	cl, err := kgo.NewClient(opts...)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _, err = cl.ProducerID(ctx)
		cancel()
		cl.Close()
	}
	if err != nil {
		p.log.Warn("kafka: stopping: the transaction's end did not finish, and aborting it failed: the broker aborts it at the transaction timeout",
			"transactional_id", txnID, "end_err", cause, "err", err, "transaction_timeout", p.opts.TransactionTimeout)
		return
	}
	p.log.Info("kafka: stopping: the transaction's end did not finish in time; the broker aborted (or completed) it", "transactional_id", txnID, "end_err", cause)
}

// stillMember reports whether this instance is still a member of the
// group generation its transaction was built under, asking the
// coordinator with a heartbeat (its generation, member and instance id).
//
// For a transaction that consumed nothing (an early emission on a tick,
// markers, state entries) this is the only fence: kgo sends no
// TxnOffsetCommit, so the broker never checks the generation (KIP-447
// fences through it) and nothing else would stop an instance paused past
// its session timeout from committing records for partitions another
// instance now owns. Any error (a new generation, an unknown member, a
// rebalance in progress, no answer) aborts.
//
// A transaction that commits input offsets is fenced by the broker's
// TxnOffsetCommit check, and may commit while a rebalance is in progress
// (KIP-447: the new owner's stable offset fetch waits for it). It is
// asked anyway, because kgo's End then waits for a forced heartbeat that
// the group's heartbeat loop never answers once the member is gone (the
// loop has quit, and the loss callback that would wake End waits for the
// loop to allow the rebalance): End sat out its whole deadline, the
// transaction timeout, before it aborted, and a stop landing there took
// as long. A member the coordinator no longer knows aborts at once.
func (p *Pipeline) stillMember(ctx context.Context, s *kgo.GroupTransactSession, group string) bool {
	member, _ := p.membership(ctx, s, group)
	return member
}

// membership is stillMember, and whether the coordinator answered (a
// membership the session does not know, a member id or generation it
// lost, counts as an answer).
func (p *Pipeline) membership(ctx context.Context, s *kgo.GroupTransactSession, group string) (member, answered bool) {
	cl := s.Client()
	offsets := len(cl.UncommittedOffsets()) > 0
	memberID, gen := cl.GroupMetadata()
	if memberID == "" || gen < 0 {
		return false, false // not in a generation now: nothing to ask
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = group
	req.Generation = gen
	req.MemberID = memberID
	if p.opts.InstanceID != "" {
		id := p.opts.InstanceID
		req.InstanceID = &id
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		p.log.Warn("kafka: checking the group membership before a commit", "group", req.Group, "err", err)
		return false, false
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !(offsets && errors.Is(err, kerr.RebalanceInProgress)) {
		p.log.Info("kafka: aborting a transaction: this instance is no longer in the group generation it worked under", "group", req.Group, "generation", gen, "err", err)
		return false, true
	}
	return true, true
}

// firstErr keeps the first asynchronous produce error of a transaction.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstErr) take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}
