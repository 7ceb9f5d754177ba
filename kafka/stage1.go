package kafka

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
)

// markerEvery is how often the first stage re-sends its watermarks even
// when they did not change, so a restarted second stage hears from every
// source partition promptly.
const markerEvery = time.Second

// routeKeyVersion is the first byte of a repartition record's key, before
// the row's group key (exec.AppendGroupIdentity, through drive.Router.Route). It keeps the key non-empty (a
// query without GROUP BY expressions has an empty group key, and an empty
// key would be spread over the partitions) and names the format, so the
// second stage knows the rest is a group key it can use as it is.
const routeKeyVersion = 1

// runStage1 is the repartitioning stage: it consumes the source topic,
// decodes each event and computes its group key (drive.Router.Route), and produces
// the event unchanged to the repartition topic keyed by those bytes, so each group is
// owned by exactly one partition of the aggregating stage. Each transaction
// also carries the source offsets and, to every repartition partition, a
// watermark marker with this instance's per-source-partition watermarks.
func (p *Pipeline) runStage1(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go p.watchSource(wctx)
	// A transaction per poll: the stage only forwards its input, and
	// the aggregating stage sees it at each commit (a longer one made
	// its input come in bursts, for no gain in CPU).
	spec := loopSpec{name: "repartition stage", group: p.inGroup(), topic: p.opts.Source.Topic,
		txnID: p.name + "-in." + p.opts.InstanceID, reset: p.resetOffset(), manual: map[string]bool{p.repTopic: true}, records: 1}
	if p.dedup {
		spec.manual = map[string]bool{p.ddTopic(): true} // its markers
	}
	return p.runLoop(ctx, spec, p.newStage1)
}

// stage1 is the repartitioning stage's work in the loop (loop.go).
type stage1 struct {
	p  *Pipeline
	tx *txn
	// router decodes each event and computes its canonical group key,
	// counting what it skips; the aggregating stage does not evaluate
	// the GROUP BY again. With a dedup stage, it computes the dedup key.
	router router
	out    string             // the topic routed to: the repartition or the dedup topic
	tag    []kgo.RecordHeader // every record's: the input it feeds (inTag)
	m      *marks             // this instance's source partitions only
	seen   map[int32]bool     // owned partitions that delivered an event in this run
	key    []byte             // room for an event's key, copied to the arena once routed
}

// router is what the repartition stage routes with: drive.Router, or
// drive.DedupRouter before a dedup stage.
type router interface {
	Route(dst, raw []byte) ([]byte, error)
	Mark() (int64, bool)
	TakeCounts() drive.Counts
}

func (p *Pipeline) newStage1(tx *txn) (stageWork, error) {
	var router router
	var err error
	out := p.repTopic
	switch {
	case p.dedup:
		out = p.ddTopic()
		router, err = drive.NewDedupRouter(p.root, drive.Config{Decoder: p.decoder()})
	case p.dedupJoin:
		// The join's stage deduplicates: every copy meets in one partition.
		router, err = drive.NewDedupRouter(p.root, drive.Config{Decoder: p.decoder()})
	case isIntervalJoin(p.root):
		// An interval join's left rows go by the join key, as its right
		// rows do (join.go): rows that may match meet.
		router, err = drive.NewIntervalRouter(p.root, 0, drive.Config{Decoder: p.decoder()})
	default:
		router, err = drive.NewRouter(p.root, drive.Config{Decoder: p.decoder()})
	}
	if err != nil {
		return nil, err
	}
	var end map[int32]int64 // UntilCaughtUp: how far each owned partition is consumed
	if p.opts.UntilCaughtUp {
		end = p.sourceEnd
	}
	return &stage1{p: p, tx: tx, router: router, out: out, tag: []kgo.RecordHeader{inTag(firstStream(p.root).Name)}, m: newMarks(p.nSource, p.opts.Source.IdleTimeout, end), seen: map[int32]bool{}}, nil
}

func (r *stage1) assigned(ctx context.Context, owned, _ map[int32]bool, now time.Time) error {
	for part := range r.m.wm.parts {
		if !owned[part] {
			delete(r.seen, part)
		}
	}
	r.m.assign(owned, now)
	if r.m.end == nil {
		return nil
	}
	return r.p.trackStarts(ctx, r.m.end, r.p.inGroup(), owned)
}

func (r *stage1) ready(context.Context) error { return nil }

func (r *stage1) process(fs kgo.Fetches, now time.Time) (bool, error) {
	err := r.route(fs, now)
	r.tx.count(r.p.inputCounts(r.router.TakeCounts(), firstStream(r.p.root)), true)
	r.m.settle(now)
	r.p.publishSourceParts(r.m.owned, r.seen, r.m.idle, now)
	return false, err
}

// route produces each event of fs to the repartition topic, keyed by its
// group key.
func (r *stage1) route(fs kgo.Fetches, now time.Time) (err error) {
	defer drive.Recover(&err)
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err == nil && len(fp.Records) > 0 {
			err = r.partition(fp.Partition, fp.Records, now)
		}
	})
	return err
}

// partition routes one partition's records of a poll, in order. What is
// kept per partition (the consumed position, the clock of its last event,
// its watermark, the largest of its events' proposals) is updated once,
// after its records: nothing reads it between two records of a poll,
// and an abort rewinds it whole.
func (r *stage1) partition(part int32, recs []*kgo.Record, now time.Time) error {
	p := r.p
	events, mark, marked := r.m.seen(part, recs, now), int64(math.MinInt64), false
	if events {
		r.seen[part] = true
	}
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			continue // a transaction marker (kept for UntilCaughtUp)
		}
		// The record is keyed by the group identity itself, so the
		// rows of one group meet on one partition whatever their
		// spelling (-0.0 and 0.0, NaN and NULL, ...).
		key, err := r.router.Route(append(r.key[:0], routeKeyVersion), rec.Value)
		if err != nil {
			if !p.badEvent(r.tx, rec, err) {
				return err
			}
			continue
		}
		r.key = key[:0] // its room, for the next event's
		if key == nil {
			continue // a CSV header record, skipped and counted
		}
		if m, ok := r.router.Mark(); ok && m > mark {
			mark, marked = m, true
		}
		out := r.tx.out.record()
		out.Topic, out.Partition, out.Key, out.Value, out.Headers = r.out, -1, append(r.tx.out.bytes(len(key)), key...), rec.Value, r.tag
		if p.dedup {
			out.Headers = sourceHeader(rec, r.tag[0]) // where a bad event is reported from
		}
		r.tx.produce(out)
	}
	if marked {
		r.m.wm.observe(part, mark)
	}
	return nil
}

// precommit sends the watermark marker, after every event it covers.
func (r *stage1) precommit(now time.Time) error {
	if enc, ok := r.m.due(now); ok {
		r.p.sendMarksTo(r.tx, r.out, markerKey, markerHeader, firstStream(r.p.root).Name, enc)
	}
	return nil
}

// ended rewinds the watermarks with the offsets after an abort: the
// markers of the aborted transaction are gone.
func (r *stage1) ended(committed bool) bool {
	r.m.ended(committed)
	return false
}
