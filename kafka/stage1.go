package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/exec"
	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// markerEvery is how often the first stage re-sends its watermarks even
// when they did not change, so a restarted second stage hears from every
// source partition promptly.
const markerEvery = time.Second

// runStage1 is the repartitioning stage: it consumes the source topic,
// decodes each event, evaluates the GROUP BY cells, and produces the event
// unchanged to the repartition topic keyed by those cells, so each group is
// owned by exactly one partition of the aggregating stage. Each transaction
// also carries the source offsets and, to every repartition partition, a
// watermark marker with this instance's per-source-partition watermarks.
func (p *Pipeline) runStage1(ctx context.Context) error {
	a := &assignment{owned: map[int32]bool{}}
	topic := p.opts.Source.Topic
	txnID := p.q.Name + "-in." + p.opts.InstanceID
	s, err := p.session(p.inGroup(), topic, txnID, p.resetOffset(), a, map[string]bool{p.repTopic: true})
	if err != nil {
		return err
	}
	defer func() {
		s.AllowRebalance() // the last poll may hold the rebalance lock
		s.Close()
		p.leave(p.inGroup())
	}()
	if err := p.fence(ctx, s, txnID); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	dec := p.decoder()
	var keyIdx []int
	for i, k := range p.q.Keys {
		if k.Kind == plan.KeyExpr {
			keyIdx = append(keyIdx, i)
		}
	}
	cells := make([]types.Value, len(keyIdx))
	tc := p.q.Source.TimeCol
	delay := p.q.Source.WatermarkDelay

	wm := newTracker(p.nSource) // this instance's source partitions only
	committedWM := wm.clone()
	ownedNow := map[int32]bool{}
	idle := newIdleClock(p.opts.Source.IdleTimeout)
	var lastSent []byte
	var lastSentAt time.Time
	var perr firstErr
	promise := func(_ *kgo.Record, err error) { perr.set(err) }
	// Records are produced under a context that a stop does not cancel:
	// a canceled record would fail while the transaction still commits
	// the offsets of the events it carried. A stop ends the loop at the
	// next poll, after the open transaction has ended.
	pctx := context.WithoutCancel(ctx)
	var end *ends // UntilCaughtUp: how far each owned partition is consumed
	if p.opts.UntilCaughtUp {
		end = newEnds(p.sourceEnd)
	}

	for {
		fs, err := p.poll(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := p.opts.Now()
		if owned, ok := a.snapshot(); ok {
			ownedNow = owned
			for part := range wm.parts {
				if !owned[part] {
					wm.remove(part)
					idle.forget(part)
				}
			}
			for part := range owned {
				if _, ok := wm.parts[part]; !ok {
					wm.get(part)
					idle.touch(part, now)
				}
			}
			if end != nil {
				if err := p.trackStarts(ctx, end, p.inGroup(), owned); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("kafka: begin transaction: %w", err)
		}
		var workErr error
		fs.EachRecord(func(r *kgo.Record) {
			if workErr != nil {
				return
			}
			if end != nil {
				end.seen(r.Partition, r.Offset)
			}
			if r.Attrs.IsControl() {
				return // a transaction marker (kept for UntilCaughtUp)
			}
			p.c.eventsIn.Add(1)
			idle.touch(r.Partition, now)
			if _, ok := wm.parts[r.Partition]; !ok {
				wm.get(r.Partition)
			}
			row, err := p.decode(dec, r)
			if err != nil {
				p.bad(r.Topic, r.Partition, r.Offset, err)
				return
			}
			if row == nil {
				return // a CSV header record, skipped and counted
			}
			for i, ki := range keyIdx {
				v, err := p.q.Keys[ki].Expr.Eval(row)
				if err != nil {
					p.bad(r.Topic, r.Partition, r.Offset, &exec.EvalError{Where: "GROUP BY", Err: err})
					return
				}
				cells[i] = v
			}
			if tc >= 0 {
				wm.observe(r.Partition, row[tc].I-delay)
			}
			out := &kgo.Record{Topic: p.repTopic, Partition: -1, Key: changelog.AppendKey(nil, cells), Value: r.Value}
			s.Produce(pctx, out, promise)
		})
		for part := range wm.parts {
			wm.setIdle(part, idle.idle(part, now))
			if end != nil && ownedNow[part] && end.done(part) {
				// Consumed to its end: this marker follows the last
				// event, in this transaction.
				wm.observe(part, endOfInput)
				wm.setIdle(part, false)
			}
		}
		if len(wm.parts) > 0 && workErr == nil {
			enc := wm.appendTo(nil)
			if string(enc) != string(lastSent) || now.Sub(lastSentAt) >= markerEvery {
				for i := 0; i < p.nParts; i++ {
					m := &kgo.Record{Topic: p.repTopic, Partition: int32(i), Key: markerKey, Value: enc,
						Headers: []kgo.RecordHeader{{Key: markerHeader, Value: []byte{1}}}}
					s.Produce(pctx, m, promise)
					p.c.markersOut.Add(1)
				}
				lastSent, lastSentAt = enc, now
			}
		}
		if workErr == nil {
			workErr = p.flush(ctx, s)
		}
		if workErr == nil {
			workErr = perr.take()
		}
		committed, err := p.end(ctx, s, workErr == nil)
		perr.take()
		s.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kafka: ending transaction: %w", err)
		}
		if end != nil {
			if committed {
				end.commit()
			} else {
				end.abort()
			}
		}
		if committed {
			committedWM = wm.clone()
		} else {
			// Offsets rewound to the last commit, and the markers of
			// the aborted transaction are gone: the watermarks must
			// rewind too, or a marker could run ahead of the events
			// that are about to be produced again.
			wm = committedWM.clone()
			for part := range wm.parts {
				if !ownedNow[part] {
					wm.remove(part)
				}
			}
			lastSent = nil
			if workErr != nil {
				p.log.Warn("kafka: repartition transaction aborted", "err", workErr)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
