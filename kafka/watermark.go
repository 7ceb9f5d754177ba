package kafka

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// DefaultIdleTimeout is how long a source partition may deliver nothing
// before it stops holding the watermark back.
const DefaultIdleTimeout = 30 * time.Second

// tracker combines per-source-partition watermarks. The source watermark is
// the minimum over the partitions that are not idle, so a partition that
// lags holds windows open until its events have been seen. An idle
// partition (nothing for the idle timeout) does not count; when every
// partition is idle, the watermark is the maximum over them, as in Flink:
// the whole input is quiet, so nothing it holds back is still coming.
//
// Partition watermarks only move forward (a new owner of a source partition
// restarts from nothing and must not pull the watermark back).
type tracker struct {
	// n is the number of source partitions the watermark waits for; a
	// partition not yet heard from holds it at the minimum. 0: only the
	// partitions present count (the direct mode, where an instance tracks
	// the partitions assigned to it).
	n     int
	parts map[int32]*partWM
}

type partWM struct {
	wm   int64
	idle bool
	// pos is how far the sender consumed the source partition (the next
	// offset to read), -1 when it does not track it; Options.UntilCaughtUp
	// compares it with the end offsets of its own start.
	pos int64
	// end, in the table of a segment reading a view's rows (see
	// viewrepart.go), is how far the upstream partition had consumed each
	// source partition when it drained (finalized every window at the
	// end of the input); -1 for a source partition it does not track, nil
	// before a drain.
	end []int64
}

func newTracker(n int) *tracker { return &tracker{n: n, parts: map[int32]*partWM{}} }

// finiteWatermarks refuses a restored operator whose watermark, or one of
// whose source partitions' watermarks, is +infinity. An earlier version
// moved every operator there at the end of an until-caught-up run and
// checkpointed it; continued, every later event would be late, silently
// (the restart semantics need the finite watermark the drain leaves now).
// There is no exact migration: the finalized windows are gone from the
// state, so the finite watermark that closes them is not known.
func (p *Pipeline) finiteWatermarks(t *task, tr *tracker) error {
	inf := t.g.Root().Watermark() == math.MaxInt64
	for _, pw := range tr.parts {
		inf = inf || pw.wm == math.MaxInt64
	}
	if !inf {
		return nil
	}
	return fmt.Errorf("%w: state topic %s partition %d holds the watermark +infinity, as earlier ubik versions wrote at the end of an --until-caught-up run; continued, every new event would count as late. Start the query over (ubik run --reset-state, Options.ResetState: it deletes the query's consumer groups and internal topics, so the input is read again as --from says, and the sink's keys restart at revision 1) or run it under another query name",
		ErrOldState, p.stateTopic, t.part)
}

func (t *tracker) get(p int32) *partWM {
	pw := t.parts[p]
	if pw == nil {
		pw = &partWM{wm: math.MinInt64, pos: -1}
		t.parts[p] = pw
	}
	return pw
}

// observe raises partition p's watermark to wm (never lowers it).
func (t *tracker) observe(p int32, wm int64) {
	pw := t.get(p)
	if wm > pw.wm {
		pw.wm = wm
	}
}

func (t *tracker) setIdle(p int32, idle bool) { t.get(p).idle = idle }

// setPos raises partition p's consumed position to pos (never lowers it).
func (t *tracker) setPos(p int32, pos int64) {
	pw := t.get(p)
	if pos > pw.pos {
		pw.pos = pos
	}
}

// consumedTo reports whether every one of the n source partitions is
// known to be consumed up to its offset in end.
func (t *tracker) consumedTo(end map[int32]int64) bool {
	if t.n == 0 {
		return false
	}
	if t.hasEnds() {
		return t.drainedTo(end)
	}
	for i := 0; i < t.n; i++ {
		pw, ok := t.parts[int32(i)]
		if !ok || pw.pos < 0 || pw.pos < end[int32(i)] {
			return false
		}
	}
	return true
}

func (t *tracker) remove(p int32) { delete(t.parts, p) }

// watermark returns the combined watermark (math.MinInt64 when unknown).
func (t *tracker) watermark() int64 {
	if len(t.parts) == 0 {
		return math.MinInt64
	}
	minActive, maxAll, active := int64(math.MaxInt64), int64(math.MinInt64), 0
	for _, pw := range t.parts {
		if pw.wm > maxAll {
			maxAll = pw.wm
		}
		if !pw.idle {
			active++
			if pw.wm < minActive {
				minActive = pw.wm
			}
		}
	}
	if t.n > 0 && len(t.parts) < t.n {
		return math.MinInt64 // some partition has not reported at all
	}
	if active == 0 {
		return maxAll
	}
	return minActive
}

// Entries are encoded (in watermark markers and in the state meta entry) as:
// version byte, uvarint n, uvarint count, then per partition varint p,
// varint wm, byte idle, (version 2) varint pos, and (version 3) uvarint
// len(end) and varint each. Version 1 (no position) is still read;
// version 3 is written only by a table holding drain positions, so the
// stage-1 markers and the first segment's checkpoints stay version 2.
const (
	wmVersion     = 2
	wmVersionEnds = 3
)

func (t *tracker) appendTo(b []byte) []byte {
	ends := t.hasEnds()
	if ends {
		b = append(b, wmVersionEnds)
	} else {
		b = append(b, wmVersion)
	}
	b = binary.AppendUvarint(b, uint64(t.n))
	ps := make([]int32, 0, len(t.parts))
	for p := range t.parts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		pw := t.parts[p]
		b = binary.AppendVarint(b, int64(p))
		b = binary.AppendVarint(b, pw.wm)
		if pw.idle {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendVarint(b, pw.pos)
		if ends {
			b = binary.AppendUvarint(b, uint64(len(pw.end)))
			for _, e := range pw.end {
				b = binary.AppendVarint(b, e)
			}
		}
	}
	return b
}

// decodeTracker parses appendTo's bytes.
func decodeTracker(b []byte) (*tracker, error) {
	if len(b) == 0 || b[0] < 1 || b[0] > wmVersionEnds {
		return nil, fmt.Errorf("%w: version", errBadWatermark)
	}
	version := b[0]
	b = b[1:]
	next := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > 1<<20 {
		return nil, fmt.Errorf("%w: partition count", errBadWatermark)
	}
	b = b[k:]
	cnt, k := binary.Uvarint(b)
	if k <= 0 || cnt > 1<<20 {
		return nil, fmt.Errorf("%w: entry count", errBadWatermark)
	}
	b = b[k:]
	t := newTracker(int(n))
	for i := uint64(0); i < cnt; i++ {
		p, ok1 := next()
		wm, ok2 := next()
		if !ok1 || !ok2 || len(b) < 1 || p < 0 || p > math.MaxInt32 {
			return nil, fmt.Errorf("%w: entry %d", errBadWatermark, i)
		}
		pw := &partWM{wm: wm, idle: b[0] == 1, pos: -1}
		b = b[1:]
		if version >= 2 {
			pos, ok := next()
			if !ok || pos < -1 {
				return nil, fmt.Errorf("%w: entry %d position", errBadWatermark, i)
			}
			pw.pos = pos
		}
		if version >= wmVersionEnds {
			k, nk := binary.Uvarint(b)
			if nk <= 0 || k > 1<<20 || k > uint64(len(b)) {
				return nil, fmt.Errorf("%w: entry %d drain positions", errBadWatermark, i)
			}
			b = b[nk:]
			if k > 0 {
				pw.end = make([]int64, k)
			}
			for j := range pw.end {
				e, ok := next()
				if !ok || e < -1 {
					return nil, fmt.Errorf("%w: entry %d drain position %d", errBadWatermark, i, j)
				}
				pw.end[j] = e
			}
		}
		t.parts[int32(p)] = pw
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadWatermark, len(b))
	}
	return t, nil
}

// merge folds a marker's entries into t: watermarks and positions by
// maximum, idle flags as the sender saw them last.
func (t *tracker) merge(m *tracker) {
	if m.n > t.n {
		t.n = m.n
	}
	for p, pw := range m.parts {
		t.observe(p, pw.wm)
		t.setIdle(p, pw.idle)
		t.setPos(p, pw.pos)
		t.setEnd(p, pw.end)
	}
}

// setEnd raises partition p's drain positions to end's, position by
// position (a drain of a later run reaches further; never lowered).
func (t *tracker) setEnd(p int32, end []int64) {
	if end == nil {
		return
	}
	pw := t.get(p)
	for len(pw.end) < len(end) {
		pw.end = append(pw.end, -1)
	}
	for i, e := range end {
		if e > pw.end[i] {
			pw.end[i] = e
		}
	}
}

func (t *tracker) hasEnds() bool {
	for _, pw := range t.parts {
		if pw.end != nil {
			return true
		}
	}
	return false
}

// drainedTo reports whether every one of the n upstream partitions has
// drained having consumed the source to end: each position it tracks
// reaches end's, and each source partition is tracked by one of them
// (in direct mode each tracks its own).
func (t *tracker) drainedTo(end map[int32]int64) bool {
	covered := map[int32]bool{}
	for i := 0; i < t.n; i++ {
		pw, ok := t.parts[int32(i)]
		if !ok || pw.end == nil {
			return false
		}
		for sp, e := range pw.end {
			if e < 0 {
				continue
			}
			if e < end[int32(sp)] {
				return false
			}
			covered[int32(sp)] = true
		}
	}
	for sp := range end {
		if !covered[sp] {
			return false
		}
	}
	return true
}

// reached returns how far, per source partition, the input behind this
// table is consumed, for a drain marker: the positions of a stage-1
// table, or, for a table of drained upstream partitions, per source
// partition the least of those that track it (-1: none does).
func (t *tracker) reached(nSource int) []int64 {
	out := make([]int64, nSource)
	for i := range out {
		out[i] = -1
	}
	if t.hasEnds() {
		for _, pw := range t.parts {
			for sp, e := range pw.end {
				if sp < nSource && e >= 0 && (out[sp] < 0 || e < out[sp]) {
					out[sp] = e
				}
			}
		}
		return out
	}
	for p, pw := range t.parts {
		if int(p) < nSource && pw.pos >= 0 {
			out[p] = pw.pos
		}
	}
	return out
}

// idleClock decides idleness from processing time: a partition is idle when
// nothing arrived on it for the timeout.
type idleClock struct {
	timeout time.Duration
	last    map[int32]time.Time
}

func newIdleClock(timeout time.Duration) *idleClock {
	return &idleClock{timeout: timeout, last: map[int32]time.Time{}}
}

func (c *idleClock) touch(p int32, now time.Time) { c.last[p] = now }

func (c *idleClock) forget(p int32) { delete(c.last, p) }

func (c *idleClock) idle(p int32, now time.Time) bool {
	l, ok := c.last[p]
	return ok && now.Sub(l) >= c.timeout
}

func (t *tracker) clone() *tracker {
	c := newTracker(t.n)
	for p, pw := range t.parts {
		v := *pw
		v.end = slices.Clone(pw.end)
		c.parts[p] = &v
	}
	return c
}
