package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
)

// markerEvery is how often the first stage re-sends its watermarks even
// when they did not change, so a restarted second stage hears from every
// source partition promptly.
const markerEvery = time.Second

// routeKeyVersion is the first byte of a repartition record's key, before
// the row's group key (exec.AppendGroupIdentity, through drive.Driver.Route). It keeps the key non-empty (a
// query without GROUP BY expressions has an empty group key, and an empty
// key would be spread over the partitions) and names the format, so the
// second stage knows the rest is a group key it can use as it is.
const routeKeyVersion = 1

// runStage1 is the repartitioning stage: it consumes the source topic,
// decodes each event and computes its group key (drive.Driver.Route), and produces
// the event unchanged to the repartition topic keyed by those bytes, so each group is
// owned by exactly one partition of the aggregating stage. Each transaction
// also carries the source offsets and, to every repartition partition, a
// watermark marker with this instance's per-source-partition watermarks.
func (p *Pipeline) runStage1(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go p.watchSource(wctx)
	return p.redo(ctx, "repartition stage", p.inGroup(), p.stage1Session)
}

// stage1Session is one session of the repartitioning stage: from a new
// transactional client to a stop, a failure, or (a *redoError) a
// transaction whose end failed, after which runStage1 starts another.
func (p *Pipeline) stage1Session(ctx context.Context, committedAt *time.Time) (retErr error) {
	a := &assignment{owned: map[int32]bool{}}
	topic := p.opts.Source.Topic
	txnID := p.name + "-in." + p.opts.InstanceID
	s, closeSession, err := p.session(p.inGroup(), topic, txnID, p.resetOffset(), a, map[string]bool{p.repTopic: true})
	if err != nil {
		return err
	}
	defer func() {
		closeSession()
		if !isRedo(transient(retErr)) {
			p.leave(p.inGroup()) // a redo keeps the membership: the next session takes the same partitions back
		}
	}()
	if err := p.fence(ctx, s, txnID); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	// The router decodes each event and computes its canonical group key,
	// counting what it skips; the aggregating stage does not evaluate the
	// GROUP BY again.
	var router *drive.Driver
	if isIntervalJoin(p.root) {
		// An interval join's left rows go by the join key, as its right
		// rows do (join.go): rows that may match meet.
		router, err = drive.NewIntervalRouter(p.root, 0, drive.Config{Decoder: p.decoder()})
	} else {
		router, err = drive.NewRouter(p.root, drive.Config{Decoder: p.decoder()})
	}
	if err != nil {
		return err
	}

	wm := newTracker(p.nSource) // this instance's source partitions only
	committedWM := wm.clone()
	ownedNow := map[int32]bool{}
	idle := newIdleClock(p.opts.Source.IdleTimeout)
	seen := map[int32]bool{} // owned partitions that delivered an event in this run
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
					delete(seen, part)
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
			return beginFailed(err)
		}
		workErr := func() (err error) {
			defer drive.Recover(&err)
			fs.EachRecord(func(r *kgo.Record) {
				if err != nil {
					return
				}
				if end != nil {
					end.seen(r.Partition, r.Offset)
				}
				if r.Attrs.IsControl() {
					return // a transaction marker (kept for UntilCaughtUp)
				}
				idle.touch(r.Partition, now)
				seen[r.Partition] = true
				if _, ok := wm.parts[r.Partition]; !ok {
					wm.get(r.Partition)
				}
				// The record is keyed by the group identity itself, so the
				// rows of one group meet on one partition whatever their
				// spelling (-0.0 and 0.0, NaN and NULL, ...).
				key, rerr := router.Route(append(make([]byte, 0, 32), routeKeyVersion), r.Value)
				if rerr != nil {
					if !p.badEvent(r, rerr) {
						err = rerr
					}
					return
				}
				if key == nil {
					return // a CSV header record, skipped and counted
				}
				if mark, ok := router.Mark(); ok {
					wm.observe(r.Partition, mark)
				}
				out := &kgo.Record{Topic: p.repTopic, Partition: -1, Key: key, Value: r.Value}
				s.Produce(pctx, out, promise)
			})
			return err
		}()
		p.count(router.TakeCounts(), true)
		for part := range wm.parts {
			wm.setIdle(part, idle.idle(part, now))
			if end != nil && ownedNow[part] {
				// How far the partition is consumed: this marker follows
				// every event before that position, in this transaction,
				// so the aggregating stage knows when it reached the end.
				if pos, ok := end.position(part); ok {
					wm.setPos(part, pos)
				}
			}
		}
		p.publishSourceParts(ownedNow, seen, idle, now)
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
		committed, err := p.end(ctx, s, p.inGroup(), workErr == nil)
		perr.take()
		s.AllowRebalance()
		if serr := p.stop.get(); serr != nil {
			return serr // ended aborted
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return endFailed(err)
		}
		if committed {
			*committedAt = time.Now()
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
			if errors.Is(workErr, drive.ErrInternal) {
				return workErr // a bug: a retry would meet it again
			}
			if workErr != nil {
				p.log.Warn("kafka: repartition transaction aborted", "err", workErr)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
