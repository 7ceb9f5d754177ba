package kafka

import (
	"reflect"
	"slices"
	"strconv"

	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// A chain of views whose reader groups by less than the partitioning of
// the view it reads (hourly totals per region over minute totals per
// merchant and region) is cut there into segments (DESIGN.md, "Cuts:
// where the plan puts an exchange"). Segment 1 runs as a chain always
// ran: stage 1 routes the events by the root's group key and each
// partition runs the chain up to the view before the cut. That view's final rows go, typed
// and encoded lossless, to the next segment's repartition topic keyed by
// the reader's group key, with the view's watermark as markers to every
// partition, in the transaction that computed them; the next segment
// runs the chain from the reader on, one graph per partition of that
// topic, its watermark the least of the upstream partitions' markers.
// The query's pipeline runs the first segment; each next one is a
// Pipeline of its own (the same stage-2 loop) under a name derived from
// the query's.

// forward is where a segment sends its primary's final rows: the next
// segment's repartition topic, keyed by the next root's group key.
type forward struct {
	topic string
	parts int              // the topic's partitions (set at Run)
	keys  *drive.GroupKeys // the next segment's root's GROUP BY
	view  *plan.Query      // the primary, whose ViewWatermark the markers carry (nil: an interval join's segment, the joined stream's watermark)
	// place, for a side of a join of two views (viewjoin.go): the
	// plan's placement of the rows in place of keys.
	place *drive.ExchangeKeys
	// in names the next graph's input the rows feed (inTag): the view's,
	// a join's joined row's.
	in string
	// joined: the rows are the segment's join's joined rows
	// (drive.Config.OnJoined), not its primary's.
	joined bool
}

// headers tags a record for f's topic with the input it feeds.
func (f *forward) headers(h []kgo.RecordHeader) []kgo.RecordHeader {
	return append(h, inTag(f.in))
}

// segmentName is the name segment k (0-based) owns its groups, ids and
// topics under: the query's own for the first, then name-s2, name-s3, ...
func segmentName(name string, k int) string {
	if k == 0 {
		return name
	}
	return fmt.Sprintf("%s-s%d", name, k+1)
}

// segmentOwned lists the groups and internal topics of the segments
// after the first that the cluster holds under a query name (ResetState
// deletes them all: an earlier query text may have been cut more often
// than this one). A chain may be cut any number of times, so they are
// found by their names, not counted.
func segmentOwned(ctx context.Context, adm *admClient, name string) (groups, topics []string, err error) {
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: listing topics: %w", err)
	}
	for t := range tds {
		for _, suffix := range []string{"-repartition", "-state"} {
			if seg, ok := strings.CutSuffix(t, suffix); ok && isSegmentName(name, seg) {
				topics = append(topics, t)
			}
		}
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: listing consumer groups: %w", err)
	}
	for _, g := range lg.Groups() {
		if isSegmentName(name, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(topics)
	slices.Sort(groups)
	return groups, topics, nil
}

// isSegmentName reports whether s is segmentName(name, k) for some k > 0.
func isSegmentName(name, s string) bool {
	k, ok := strings.CutPrefix(s, name+"-s")
	if !ok || k == "" || k[0] == '0' {
		return false
	}
	n, err := strconv.Atoi(k)
	return err == nil && n >= 2 && strconv.Itoa(n) == k
}

// newSegments cuts p's chain into segs (New, after the checks): p runs
// the first, its queries up to its top, and keeps the query's name and
// layout; each next segment is a pipeline of its own (p.after) reading
// the rows of the one before. A join of two views runs its join's
// segment (vj.top) and gives only its forward here. What depends on the
// cluster (partition counts, end offsets) is set by Run.
func (p *Pipeline) newSegments(segs [][]*plan.Query) error {
	if err := checkTopicName(segmentName(p.name, len(segs)-1) + "-repartition"); err != nil {
		return fmt.Errorf("%w: query name %q cannot name the internal topics of its view repartitions", ErrConfig, p.name)
	}
	opts := p.opts
	// The join's own segment, then its aggregate's: both run the root.
	joinSeg := p.tj != nil && segs[1][0] == p.root
	if p.vj == nil {
		p.headOf(segs[0], joinSeg)
	}
	p.fwd = segmentForward(p.name, 1, p.top, segs[1][0], joinSeg)
	for k := 1; k < len(segs); k++ {
		seg := segs[k]
		q := seg[len(seg)-1]
		c := &Pipeline{opts: opts, q: q, root: seg[0], top: q, views: seg[:len(seg)-1],
			log: p.log.With("segment", k+1), base: p.base, name: segmentName(p.name, k), ins: rowInputs(k == 1 && joinSeg)}
		c.opts.ResetState = false // the whole query's, done once by Run
		c.repTopic, c.stateTopic = c.name+"-repartition", c.name+"-state"
		if k < len(segs)-1 {
			c.opts.Sink = opts.ViewSinks[q.Name]
			c.opts.OnLate = viewLateOf(opts, q)
			c.fwd = segmentForward(p.name, k+1, q, segs[k+1][0], false)
		}
		p.after = append(p.after, c)
	}
	return nil
}

// headOf makes p run seg, the first segment of its chain: its late rows
// are its top view's, a join's second input's the query's, as in the
// graph of a file run (drive.Graph).
func (p *Pipeline) headOf(seg []*plan.Query, joinSeg bool) {
	opts := p.opts
	p.top = seg[len(seg)-1]
	if p.top != p.q {
		p.opts.OnLate = viewLateOf(opts, p.top)
	}
	if (joinSeg || p.tj != nil) && p.root != p.q {
		p.lateRight = orLate(p.lateRight, opts.OnLate) // unless the query is a side's view
	}
}

// viewLateOf is where view v's late rows go: OnViewLate under its name,
// else OnLate.
func viewLateOf(opts Options, v *plan.Query) func(*drive.LateEvent) {
	if opts.OnViewLate == nil {
		return opts.OnLate
	}
	return func(ev *drive.LateEvent) { opts.OnViewLate(v.Name, ev) }
}

// segmentForward is where segment k-1's rows go: segment k's topic,
// keyed by its root next's group key, its markers the view watermark of
// top (the segment's last query); with joinSeg, the joined rows of the
// join's segment, keyed by the join's GROUP BY, its markers the joined
// stream's watermark as it is.
func segmentForward(name string, k int, top, next *plan.Query, joinSeg bool) *forward {
	topic := segmentName(name, k) + "-repartition"
	if joinSeg {
		next = joinedQuery(next) // the joined rows' aggregate
		return &forward{topic: topic, keys: drive.NewGroupKeys(next), in: next.Source.Name, joined: true}
	}
	return &forward{topic: topic, keys: drive.NewGroupKeys(next), view: top, in: top.Name}
}

// ensureSegmentTopics creates or checks the segments' internal topics,
// of n partitions each.
func ensureSegmentTopics(ctx context.Context, adm *admClient, segs []*Pipeline, n int, log *slog.Logger) error {
	for _, c := range segs {
		if err := ensureInternalTopic(ctx, adm, c.repTopic, n, false, log); err != nil {
			return err
		}
		if err := ensureInternalTopic(ctx, adm, c.stateTopic, n, true, log); err != nil {
			return err
		}
	}
	return nil
}

// orLate is a, or b if a is nil.
func orLate(a, b func(*drive.LateEvent)) func(*drive.LateEvent) {
	if a != nil {
		return a
	}
	return b
}

// add adds x's counters and gauges (every int64 field) to s's.
func (s *Stats) add(x Stats) {
	sv, xv := reflect.ValueOf(s).Elem(), reflect.ValueOf(x)
	for i := range sv.NumField() {
		if f := sv.Field(i); f.Kind() == reflect.Int64 {
			f.SetInt(f.Int() + xv.Field(i).Int())
		}
	}
}

// segmentsText names the segments' groups and topics (ownedText).
func (p *Pipeline) segmentsText() string {
	if len(p.after) == 0 {
		return ""
	}
	var parts []string
	for _, c := range p.after {
		parts = append(parts, fmt.Sprintf("group %s, transactional id %s.%s, topics %s and %s", c.name, c.name, p.opts.InstanceID, c.repTopic, c.stateTopic))
	}
	return "; and for the view repartitions: " + strings.Join(parts, "; ")
}

// forwards are where p's primary's final rows go: fwd, and also.
func (p *Pipeline) forwards() []*forward {
	if p.fwd == nil {
		return nil
	}
	return append([]*forward{p.fwd}, p.also...)
}

// forwardRow returns the OnRow callback of a task whose primary's final
// rows go to the next segment (nil when the segment is the last): each
// row, encoded lossless, keyed by the next root's group key, produced in
// the open transaction, to each topic that reads it.
func (st *stage2) forwardRow(t *task) func([]types.Value) error {
	fs := st.p.forwards()
	if fs == nil {
		return nil
	}
	hs := make([][]kgo.RecordHeader, len(fs)) // each topic's, shared by every row
	for i, f := range fs {
		hs[i] = f.headers(nil)
	}
	return func(row []types.Value) error {
		val := drive.AppendRow(nil, row)
		for i, f := range fs {
			st.tx.produce(&kgo.Record{Topic: f.topic, Partition: -1, Key: f.key(row), Value: val, Headers: hs[i]})
		}
		t.touched = true
		return nil
	}
}

// key is the key of a row for f's topic: the version byte and the
// plan's placement, or the next root's group key. A row the reader's
// GROUP BY fails on goes to any partition, where the reader evaluates
// it again and counts the error, as in a file run.
func (f *forward) key(row []types.Value) []byte {
	var key []byte
	var err error
	if f.place != nil {
		key, err = f.place.Append(append(make([]byte, 0, 32), routeKeyVersion), row)
	} else {
		key, err = f.keys.Append(append(make([]byte, 0, 32), routeKeyVersion), row)
	}
	if err != nil {
		return []byte{routeKeyVersion}
	}
	return key
}

// forwardMarks produces, after the transaction's rows, a watermark
// marker to every partition of each next segment's topic: per owned
// partition, the ViewWatermark of its primary's watermark (what a reader
// in a file run is moved by), and, in the transaction that drains them
// (UntilCaughtUp), how far each partition consumed the source. Sent when
// it changed or at least every markerEvery.
func (st *stage2) forwardMarks() error {
	fs := st.p.forwards()
	if fs == nil || len(st.tasks) == 0 {
		return nil
	}
	tab := newTracker(st.p.nParts)
	for part, t := range st.tasks {
		wm := t.g.Watermark() // the primary's
		if v := fs[0].view; v != nil {
			wm = v.ViewWatermark(wm)
		}
		tab.observe(part, wm)
		if st.finishing {
			tab.setEnd(part, st.reachedOf(t))
		}
	}
	enc := tab.appendTo(nil)
	now := time.Now()
	if string(enc) == string(st.fwdSent) && now.Sub(st.fwdAt) < markerEvery {
		return nil
	}
	for _, f := range fs {
		hs := f.headers([]kgo.RecordHeader{{Key: markerHeader, Value: []byte{1}}})
		for i := 0; i < f.parts; i++ {
			m := &kgo.Record{Topic: f.topic, Partition: int32(i), Key: markerKey, Value: enc, Headers: hs}
			st.tx.produce(m)
			st.p.c.markersOut.Add(1)
		}
	}
	st.fwdSent, st.fwdAt = enc, now
	return nil
}
