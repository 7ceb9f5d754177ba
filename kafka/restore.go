package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Reading a state topic back: the aggregating stage's tasks (restore) and
// the dedup stage's read the latest entry of each key of their
// partitions, once no transaction is open on them.

// restore builds one operator per partition from the state topic: it waits
// until no transaction is open on those partitions (a previous owner's last
// transaction has committed or aborted), reads each partition from its start
// to its last stable offset with read_committed, keeps the latest value of
// each key (a tombstone deletes), and loads the entries.
func (p *Pipeline) restore(ctx context.Context, parts []int32, newTask func(int32) (*task, error)) ([]*task, error) {
	latest, err := p.readState(ctx, p.stateTopic, parts)
	if err != nil {
		return nil, err
	}
	out := make([]*task, 0, len(parts))
	for _, part := range parts {
		t, err := newTask(part)
		if err != nil {
			return nil, err
		}
		if err := p.load(t, latest[part]); err != nil {
			return nil, err
		}
		out = append(out, t)
		p.c.restores.Add(1)
	}
	return out, nil
}

// readState returns the latest entry of each key (a tombstone deletes)
// in partitions parts of state topic topic, read once no transaction is
// open on them.
func (p *Pipeline) readState(ctx context.Context, topic string, parts []int32) (map[int32]map[string][]byte, error) {
	ends, err := p.stableEnds(ctx, topic, parts)
	if err != nil {
		return nil, err
	}
	latest := make(map[int32]map[string][]byte, len(parts))
	from := map[int32]kgo.Offset{}
	pending := map[int32]bool{}
	for _, part := range parts {
		latest[part] = map[string][]byte{}
		if ends[part].end > ends[part].start {
			from[part] = kgo.NewOffset().At(ends[part].start)
			pending[part] = true
		}
	}
	if len(pending) > 0 {
		opts := append([]kgo.Opt{}, p.base...)
		opts = append(opts,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("kafka: state restore client: %w", err)
		}
		defer cl.Close()
		deadline := time.Now().Add(p.opts.TransactionTimeout + time.Minute)
		for len(pending) > 0 {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("kafka: restoring state of %s partitions %v: %w after %s", topic, parts, errWaitedOut, p.opts.TransactionTimeout+time.Minute)
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ferr error
			fs.EachError(func(t string, part int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
					ferr = fmt.Errorf("kafka: restoring %s partition %d: %w", t, part, err)
				}
			})
			if ferr != nil {
				return nil, ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset+1 >= ends[r.Partition].end {
					delete(pending, r.Partition)
				}
				if r.Attrs.IsControl() || r.Offset >= ends[r.Partition].end || string(r.Key) == bindingKey {
					return // a transaction marker, a record past the end, the binding record
				}
				if r.Value == nil {
					delete(latest[r.Partition], string(r.Key))
				} else {
					latest[r.Partition][string(r.Key)] = r.Value
				}
			})
		}
	}
	return latest, nil
}

type span struct{ start, end int64 }

// stableEnds waits until the last stable offset equals the high watermark
// on each partition (no transaction open), and returns [start, end).
func (p *Pipeline) stableEnds(ctx context.Context, topic string, parts []int32) (map[int32]span, error) {
	adm, closeAdm, err := p.admin()
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	deadline := time.Now().Add(p.opts.TransactionTimeout + time.Minute)
	for {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
		}
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: stable offsets of %s: %w", topic, err)
		}
		hwm, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: end offsets of %s: %w", topic, err)
		}
		out := map[int32]span{}
		open := false
		for _, part := range parts {
			s, ok1 := starts.Lookup(topic, part)
			l, ok2 := lso.Lookup(topic, part)
			h, ok3 := hwm.Lookup(topic, part)
			if !ok1 || !ok2 || !ok3 || s.Err != nil || l.Err != nil || h.Err != nil {
				open = true
				break
			}
			if l.Offset < h.Offset {
				open = true
				break
			}
			out[part] = span{s.Offset, h.Offset}
		}
		if !open {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kafka: state topic %s partitions %v still have an open transaction: %w (%s)", topic, parts, errWaitedOut, p.opts.TransactionTimeout+time.Minute)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
