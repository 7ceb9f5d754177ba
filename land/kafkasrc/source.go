package kafkasrc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// Options configure a Source. Brokers, Topics and Group are required.
type Options struct {
	Brokers []string
	Topics  []string
	// Group is the consumer group; its committed offsets are the landing's
	// progress. A new group starts at the beginning of each partition, so a
	// fresh lander rebuilds the store from a compacted topic.
	Group string
	// MaxBatch bounds the records of one batch (default 5000).
	MaxBatch int
	// SkipBadRecords, when true, logs and counts a record that is not a
	// ubik changelog record and lands the rest; by default such a record
	// stops Run with a *DecodeError naming its partition and offset (a
	// poison record is not silently skipped).
	SkipBadRecords bool
	// DeadLetter, when set, receives each record SkipBadRecords skips,
	// with the reason, before the batch holding it is handed out; its
	// error stops the Source.
	DeadLetter func(kr *kgo.Record, reason error) error
	// Logger receives skipped records and commit conflicts (default: discard).
	Logger *slog.Logger
	// ClientOpts are added to the kgo client's options (SASL, TLS, ...).
	// They must not set kgo.OnPartitionsAssigned, OnPartitionsRevoked or
	// OnPartitionsLost: the Source uses them to know its partitions.
	ClientOpts []kgo.Opt
}

// Source is a land.Source over a Kafka consumer group. It reads committed
// records only (a transactional producer's aborted records never land) and
// commits offsets only when Run says the store acknowledged them.
type Source struct {
	cl   *kgo.Client
	opts Options
	log  *slog.Logger
	bad  atomic.Int64
	mu   sync.Mutex
	// parts holds the assigned partitions (added on assignment, removed on
	// revocation or loss, so a rebalance leaves no stale backlog behind).
	parts    map[partition]*progress
	closeOne sync.Once
}

// progress is what the fetches told about one assigned partition.
type progress struct {
	lag int64 // records past the last one handed out
	end int64 // the end offset as of the last fetch, -1 before one
}

type partition struct {
	topic string
	p     int32
}

// token is what Commit needs, the last record of each partition in a
// batch, and the origin of each of the batch's records (for Origin).
type token struct {
	last []*kgo.Record
	recs []*kgo.Record
}

// Origin returns the Kafka record that b.Records[i] was decoded from, for
// a batch of a Source (a dead letter keeps the record as it came).
func Origin(b *land.Batch, i int) (*kgo.Record, bool) {
	tok, ok := b.Token.(token)
	if !ok || i < 0 || i >= len(tok.recs) {
		return nil, false
	}
	return tok.recs[i], true
}

// New connects a consumer-group Source. It does not wait for the group to
// form; the first Next does.
func New(opts Options) (*Source, error) {
	switch {
	case len(opts.Brokers) == 0:
		return nil, errors.New("kafkasrc: no brokers")
	case len(opts.Topics) == 0:
		return nil, errors.New("kafkasrc: no topics")
	case opts.Group == "":
		return nil, errors.New("kafkasrc: no consumer group")
	case opts.MaxBatch < 0:
		return nil, fmt.Errorf("kafkasrc: MaxBatch %d is negative", opts.MaxBatch)
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 5000
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics...),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come through so that commits can move past
		// them: a ubik changelog is written in transactions, and its last
		// offset is a commit marker no data record ever reaches. Without
		// this the group would stay one short of the end forever and
		// CaughtUp would never say so.
		kgo.KeepControlRecords(),
		// A fetch holds a batch or a few (fetchBytes), so that the first
		// fetch returns quickly instead of buffering the whole backlog
		// before anything lands.
		kgo.FetchMaxPartitionBytes(fetchBytes(opts.MaxBatch)),
		kgo.FetchMaxBytes(max(fetchBytes(opts.MaxBatch), 50<<20)),
	}, opts.ClientOpts...)
	s := &Source{opts: opts, log: lg, parts: map[partition]*progress{}}
	kopts = append([]kgo.Opt{
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.revoked),
	}, kopts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafkasrc: %w", err)
	}
	s.cl = cl
	return s, nil
}

// fetchBytes is the per-partition fetch size for batches of maxBatch
// records: 512 bytes a record (a changelog record with its headers is
// typically 150 to 400), at least kgo's default 1 MiB, at most 4 MiB.
// Fetch sizes count the record batches as stored, compressed (some 20 to
// 100 bytes a changelog record), so 4 MiB already holds a 50,000-record
// batch or more; without the bound, the first fetch of a backlog of a
// million records returned all of them (25 MiB) in one 10 to 15 s fetch,
// holding 2 GiB, while nothing landed.
func fetchBytes(maxBatch int) int32 {
	return int32(min(max(1<<20, maxBatch*512), 4<<20))
}

func (s *Source) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			if s.parts[partition{t, p}] == nil {
				s.parts[partition{t, p}] = &progress{end: -1}
			}
		}
	}
}

func (s *Source) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(s.parts, partition{t, p})
		}
	}
}

// PartitionStats is the progress of one partition assigned to the Source.
type PartitionStats struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset (the next record to land),
	// or -1 while the group has none for the partition.
	Committed int64
	// End is the partition's end offset as of the last fetch (the last
	// stable offset: the source reads committed records only), or -1
	// before the first fetch that returned records.
	End int64
}

// Lag is End - Committed, the records not yet landed and committed, or -1
// when either is unknown.
func (p PartitionStats) Lag() int64 {
	if p.End < 0 || p.Committed < 0 {
		return -1
	}
	return max(0, p.End-p.Committed)
}

// Partitions reports the partitions assigned to the Source, sorted by topic
// and partition. It reads the client's state only; no request is sent.
func (s *Source) Partitions() []PartitionStats {
	committed := s.cl.CommittedOffsets()
	s.mu.Lock()
	out := make([]PartitionStats, 0, len(s.parts))
	for tp, pr := range s.parts {
		ps := PartitionStats{Topic: tp.topic, Partition: tp.p, Committed: -1, End: pr.end}
		if eo, ok := committed[tp.topic][tp.p]; ok {
			ps.Committed = eo.Offset
		}
		out = append(out, ps)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Client is the underlying kgo client.
func (s *Source) Client() *kgo.Client { return s.cl }

// BadRecords is the number of records that were not changelog records.
func (s *Source) BadRecords() int64 { return s.bad.Load() }

// Next implements land.Source: it polls until at least one record arrives.
func (s *Source) Next(ctx context.Context) (*land.Batch, error) {
	for {
		fs := s.cl.PollRecords(ctx, s.opts.MaxBatch)
		if fs.IsClientClosed() {
			return nil, land.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fs.EachError(func(t string, p int32, err error) {
			// kgo retries fetch errors itself; they are worth a log line,
			// not a stop.
			s.log.Warn("kafkasrc: fetch error", "topic", t, "partition", p, "err", err)
		})
		b, err := s.batch(fs)
		if err != nil {
			return nil, err
		}
		if b != nil {
			return b, nil
		}
	}
}

func (s *Source) batch(fs kgo.Fetches) (*land.Batch, error) {
	// Sized once: growing them record by record copied each batch
	// several times over (a quarter of ubik land's CPU into ClickHouse).
	n := fs.NumRecords()
	recs := make([]changelog.Record, 0, n)
	where := make([]*kgo.Record, 0, n)
	var last []*kgo.Record
	var bad error
	skipped := 0
	s.mu.Lock()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		last = append(last, fp.Records[len(fp.Records)-1])
		pr := s.parts[partition{fp.Topic, fp.Partition}]
		if pr == nil {
			// Fetched before the assignment callback ran, or after a
			// revocation: track it until the next revocation.
			pr = &progress{}
			s.parts[partition{fp.Topic, fp.Partition}] = pr
		}
		pr.lag = max(0, fp.HighWatermark-fp.Records[len(fp.Records)-1].Offset-1)
		pr.end = fp.HighWatermark
		if fp.LastStableOffset >= 0 {
			pr.end = fp.LastStableOffset
		}
		for _, kr := range fp.Records {
			if kr.Attrs.IsControl() {
				continue // a transaction marker: committed past, never landed
			}
			r, err := Decode(kr)
			if err != nil {
				s.bad.Add(1)
				if !s.opts.SkipBadRecords {
					if bad == nil {
						bad = err
					}
					continue
				}
				s.log.Error("kafkasrc: skipping a record that is not a changelog record", "err", err)
				if s.opts.DeadLetter != nil && bad == nil {
					if derr := s.opts.DeadLetter(kr, err); derr != nil {
						bad = fmt.Errorf("kafkasrc: setting aside %v: %w", err, derr)
					}
				}
				skipped++
				continue
			}
			recs = append(recs, r)
			where = append(where, kr)
		}
	})
	var lag int64
	for _, pr := range s.parts {
		lag += pr.lag
	}
	s.mu.Unlock()
	if bad != nil {
		return nil, bad
	}
	if len(last) == 0 {
		return nil, nil
	}
	return &land.Batch{
		Records: recs,
		Where: func(i int) string {
			kr := where[i]
			return fmt.Sprintf("topic %s partition %d offset %d", kr.Topic, kr.Partition, kr.Offset)
		},
		Lag:     lag,
		Skipped: skipped,
		Token:   token{last: last, recs: where},
	}, nil
}

// Commit implements land.Source. A commit refused because the group is
// rebalancing is logged and dropped: the partition's next owner replays
// from the last committed offset, and the guard makes the replay harmless.
func (s *Source) Commit(ctx context.Context, b *land.Batch) error {
	tok, ok := b.Token.(token)
	if !ok {
		return errors.New("kafkasrc: Commit of a batch from another source")
	}
	err := s.cl.CommitRecords(ctx, tok.last...)
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedInstanceID) {
		s.log.Warn("kafkasrc: commit lost to a rebalance; the records will replay", "err", err)
		return nil
	}
	return fmt.Errorf("kafkasrc: commit: %w", err)
}

// Close leaves the group and closes the client.
func (s *Source) Close() {
	s.closeOne.Do(func() { s.cl.Close() })
}

// CaughtUp reports whether the group's committed offsets reach the end of
// every partition of the source's topics (read_committed ends), as the
// brokers see it now.
func (s *Source) CaughtUp(ctx context.Context) (bool, error) {
	adm := kadm.NewClient(s.cl)
	ends, err := adm.ListCommittedOffsets(ctx, s.opts.Topics...)
	if err != nil {
		return false, fmt.Errorf("kafkasrc: listing end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return false, fmt.Errorf("kafkasrc: listing end offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, s.opts.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		// A group that never committed (some brokers say so this way).
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return false, fmt.Errorf("kafkasrc: fetching the offsets of group %s: %w", s.opts.Group, err)
	}
	caught := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return // an empty partition
		}
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if !ok || c.At < o.Offset {
			caught = false
		}
	})
	return caught, nil
}
