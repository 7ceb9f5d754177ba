package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
	inf := t.d.Watermark() == math.MaxInt64
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
// varint wm, byte idle, and (version 2) varint pos. Version 1 (no
// position) is still read.
const wmVersion = 2

var errBadWatermark = errors.New("kafka: bad watermark encoding")

func (t *tracker) appendTo(b []byte) []byte {
	b = append(b, wmVersion)
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
	}
	return b
}

// decodeTracker parses appendTo's bytes.
func decodeTracker(b []byte) (*tracker, error) {
	if len(b) == 0 || b[0] < 1 || b[0] > wmVersion {
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
	}
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
		c.parts[p] = &v
	}
	return c
}
