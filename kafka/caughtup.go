package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ends tracks, for Options.UntilCaughtUp, how far each owned source
// partition is consumed against the end offset it had when Run started.
// Positions move in two steps, as the consumer's offsets do: pending ones
// in the open transaction, committed ones after it commits; an abort drops
// the pending ones (the session rewinds to the committed offsets).
type ends struct {
	end     map[int32]int64 // last stable offset at start, per partition
	pos     map[int32]int64 // committed position (next offset to read)
	pending map[int32]int64 // position in the open transaction
}

func newEnds(end map[int32]int64) *ends {
	return &ends{end: end, pos: map[int32]int64{}, pending: map[int32]int64{}}
}

// seen records that the record at off of part was consumed (control
// records included: a transactional input ends with a commit marker).
func (e *ends) seen(part int32, off int64) {
	if off+1 > e.pending[part] {
		e.pending[part] = off + 1
	}
}

// start sets the position a newly assigned partition starts from.
func (e *ends) start(part int32, pos int64) {
	e.pos[part] = pos
	delete(e.pending, part)
}

func (e *ends) forget(part int32) {
	delete(e.pos, part)
	delete(e.pending, part)
}

func (e *ends) commit() {
	for p, o := range e.pending {
		if o > e.pos[p] {
			e.pos[p] = o
		}
	}
	clear(e.pending)
}

func (e *ends) abort() { clear(e.pending) }

// position returns how far part is consumed, counting the open
// transaction, if its start position is known.
func (e *ends) position(part int32) (int64, bool) {
	pos, ok := e.pos[part]
	if !ok {
		return 0, false
	}
	return max(pos, e.pending[part]), true
}

// done reports whether part is consumed up to its end, counting the open
// transaction (whatever the caller does with that answer goes in the same
// transaction, after the records that reached the end). A partition whose
// start position is unknown is not done.
func (e *ends) done(part int32) bool {
	pos, ok := e.pos[part]
	if !ok {
		return false
	}
	pos = max(pos, e.pending[part])
	return pos >= e.end[part]
}

// sourceEnds returns the last stable offset of every source partition:
// the end a read_committed consumer can reach.
func (p *Pipeline) sourceEnds(ctx context.Context, adm *admClient) (map[int32]int64, error) {
	return endOffsets(ctx, adm, p.opts.Source.Topic, p.nSource)
}

// endOffsets returns the last stable offset of each of topic's n partitions.
func endOffsets(ctx context.Context, adm *admClient, topic string, n int) (map[int32]int64, error) {
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: end offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64, n)
	for i := 0; i < n; i++ {
		o, ok := lso.Lookup(topic, int32(i))
		if !ok || o.Err != nil {
			return nil, fmt.Errorf("kafka: end offset of %s partition %d: %v", topic, i, o.Err)
		}
		out[int32(i)] = o.Offset
	}
	return out, nil
}

// startPositionsOf returns where the consumer group starts reading each of
// parts of topic: its committed offset, else the reset offset (the log
// start for earliest, the end for latest).
func (p *Pipeline) startPositionsOf(ctx context.Context, group, topic string, from StartOffset, parts []int32) (map[int32]int64, error) {
	adm, closeAdm, err := p.admin()
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	// Stable, as the session's own fetch: a predecessor's pending
	// transactional commit is resolved first.
	committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		return nil, fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
	}
	reset := adm.ListStartOffsets
	if from == FromLatest {
		reset = adm.ListEndOffsets
	}
	// Records deleted below a committed offset (Options.AllowDataLoss)
	// are not read: the consumer starts at the log start.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
	}
	var listed kadm.ListedOffsets
	out := make(map[int32]int64, len(parts))
	for _, part := range parts {
		if o, ok := committed.Lookup(topic, part); ok && o.Err == nil && o.At >= 0 {
			out[part] = o.At
			if s, ok := starts.Lookup(topic, part); ok && s.Err == nil && s.Offset > o.At {
				out[part] = s.Offset
			}
			continue
		}
		if listed == nil {
			if listed, err = reset(ctx, topic); err != nil {
				return nil, fmt.Errorf("kafka: offsets of %s: %w", topic, err)
			}
		}
		o, ok := listed.Lookup(topic, part)
		if !ok || o.Err != nil {
			return nil, fmt.Errorf("kafka: offset of %s partition %d: %v", topic, part, o.Err)
		}
		out[part] = o.Offset
	}
	return out, nil
}

// trackStarts sets the start position of every owned partition that ends
// does not know yet, and forgets the partitions no longer owned.
func (p *Pipeline) trackStarts(ctx context.Context, e *ends, group string, owned map[int32]bool) error {
	return p.trackStartsOf(ctx, e, group, p.opts.Source.Topic, p.opts.Source.From, owned)
}

// trackStartsOf is trackStarts for any topic the group reads.
func (p *Pipeline) trackStartsOf(ctx context.Context, e *ends, group, topic string, from StartOffset, owned map[int32]bool) error {
	for part := range e.pos {
		if !owned[part] {
			e.forget(part)
		}
	}
	var need []int32
	for part := range owned {
		if _, ok := e.pos[part]; !ok {
			need = append(need, part)
		}
	}
	if len(need) == 0 {
		return nil
	}
	starts, err := p.startPositionsOf(ctx, group, topic, from, need)
	if err != nil {
		return err
	}
	for part, pos := range starts {
		e.start(part, pos)
	}
	return nil
}

// keepControl is the consumer option UntilCaughtUp needs: control records
// (transaction markers) are returned, so a position can reach the end of a
// transactional input. The stages skip them.
func (p *Pipeline) keepControl() []kgo.Opt {
	if !p.opts.UntilCaughtUp {
		return nil
	}
	return []kgo.Opt{kgo.KeepControlRecords()}
}
