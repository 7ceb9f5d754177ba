package exec

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// An interval join split by key over instances (a host that runs it on
// several threads). Every row of a key meets only rows of that key, so
// the held rows can be split by the join key's bytes over N instances,
// each matching and holding the rows of its keys. What depends on the
// order of all the rows stays with one coordinator, which sees every row
// in input order and holds no row: the watermarks, the lateness, the key
// (a row with a NULL cell is counted and goes nowhere), the arrival
// number of a held row, the bound on held rows, the counters, and the
// times of the held rows (so it knows how many each watermark drops).
// The host hands each admitted row, with its key and arrival number, to
// the instance of its key (PushAt), every watermark and end to every
// instance at the same place among the rows, and takes each instance's
// joined rows after the row that made them: one join's joined rows are
// the rows' matches in the rows' order, so merging the instances' by the
// row that made them gives one join's sequence. The watermarks move only
// by Advance and End (a graph's reader: external).
//
// The checkpoint entry is the one join's (AppendSplitState), and a
// restored one (RestoreState or the incremental entries) is split over
// the instances by key (SplitHeld): a state taken on any number of
// instances restores on any other.

// NewIntervalCoordinator returns the coordinator of q's interval join
// split by key; its instances are NewIntervalJoin(q, true).
func NewIntervalCoordinator(q *plan.Query) (*IntervalJoin, error) {
	t, err := NewIntervalJoin(q, true)
	if err != nil {
		return nil, err
	}
	t.coord = true
	return t, nil
}

// Admit is the coordinator's part of Push of a row of side: late (counted,
// not joined); an evaluation error of its key (counted by the host);
// ErrIntervalJoinFull (nothing changed); else the row's join key (nil
// for a NULL cell: it matches nothing, and goes to no instance; valid
// until the next call) and its arrival number (0: the row is not held).
func (t *IntervalJoin) Admit(side int, row []types.Value) (key []byte, seq uint64, late bool, err error) {
	s := t.sides[side]
	ts := row[s.src.TimeCol].I
	s.rowsIn++
	if t.Late(side, ts) {
		s.late++
		return nil, 0, true, nil
	}
	key, err = t.keyOf(s, row)
	switch {
	case err != nil:
		return nil, 0, false, err
	case key == nil:
		t.stats.NullKeys++
		return nil, 0, false, nil
	case t.full(side, ts):
		s.rowsIn--
		return nil, 0, false, t.fullErr(side, ts)
	}
	if ts >= t.threshold(side) {
		t.seq++
		seq = t.seq
		s.times.push(expEntry{t: ts})
		s.held++
		s.peak = max(s.peak, s.held)
	}
	return key, seq, false, nil
}

// PushAt is an instance's part of Push of a row the coordinator
// admitted, with its key and arrival number (0: not held). The row is
// given away, its cells and its strings' bytes: the join holds them as
// they are (the caller copies what it shares).
func (t *IntervalJoin) PushAt(side int, row []types.Value, key []byte, seq uint64) {
	ts := row[t.sides[side].src.TimeCol].I
	t.probe(side, ts, row, t.sides[1-side].rows[string(key)])
	if seq != 0 {
		t.hold(side, string(key), ts, seq, row)
	}
}

// hold keeps row (of side, at ts, under key k) as arrival number seq.
func (t *IntervalJoin) hold(side int, k string, ts int64, seq uint64, row []types.Value) {
	s := t.sides[side]
	list := s.rows[k]
	i, _ := slices.BinarySearchFunc(list, ts, func(r ijRow, ts int64) int {
		if r.t <= ts {
			return -1
		}
		return 1
	})
	s.rows[k] = slices.Insert(list, i, ijRow{t: ts, seq: seq, row: row})
	s.exp.push(expEntry{t: ts, key: k})
	s.held++
	s.peak = max(s.peak, s.held)
	if t.incr {
		t.fresh = append(t.fresh, ijRef{side: side, key: k, t: ts, seq: seq})
	}
}

// full reports whether a row of side at ts would be held beyond the
// bound (SetMaxHeld).
func (t *IntervalJoin) full(side int, ts int64) bool {
	return t.maxHeld > 0 && ts >= t.threshold(side) && t.sides[0].held+t.sides[1].held >= t.maxHeld
}

func (t *IntervalJoin) fullErr(side int, ts int64) error {
	s := t.sides[side]
	return fmt.Errorf("%w: it holds %d rows (%d of %s, %d of %s), its bound, and a row of %s at %s would be one more; a row is held until the other input's watermark passes its time and the interval (%s watermark %s, %s watermark %s)",
		ErrIntervalJoinFull, t.sides[0].held+t.sides[1].held, t.sides[0].held, t.sides[0].src.Name, t.sides[1].held, t.sides[1].src.Name,
		s.src.Name, wmText(ts), t.sides[0].src.Name, wmText(t.sides[0].wm), t.sides[1].src.Name, wmText(t.sides[1].wm))
}

// expireTimes drops a coordinator's held times below thr.
func (t *IntervalJoin) expireTimes(s *ijSide, thr int64) {
	n := int64(0)
	for len(s.times) > 0 && s.times[0].t < thr {
		s.times.pop()
		n++
	}
	s.held -= n
	t.stats.Dropped += n
}

// AppendSplitState is AppendState of the join split over parts: the
// coordinator's counters and watermarks, the parts' matches and held
// rows; the bytes of one join that took every row.
func (t *IntervalJoin) AppendSplitState(b []byte, parts []*IntervalJoin) []byte {
	matches := t.stats.Matches
	for _, p := range parts {
		t.stats.Matches += p.stats.Matches
	}
	for i, s := range t.sides {
		m := make(map[string][]ijRow)
		for _, p := range parts {
			maps.Copy(m, p.sides[i].rows)
		}
		s.rows = m
	}
	b = t.AppendState(b)
	t.stats.Matches = matches
	for _, s := range t.sides {
		s.rows = map[string][]ijRow{}
	}
	return b
}

// SplitHeld moves a coordinator's restored held rows (RestoreState, or
// RestoreEntry and FinishEntries) to its fresh instances: each key's rows
// to parts[pick(key)], with the inputs' watermarks and ends. The
// coordinator keeps their times.
func (t *IntervalJoin) SplitHeld(parts []*IntervalJoin, pick func(key []byte) int) {
	for i, s := range t.sides {
		s.times = s.times[:0]
		for k, list := range s.rows {
			ps := parts[pick([]byte(k))].sides[i]
			ps.rows[k] = list
			for _, r := range list {
				ps.exp.push(expEntry{t: r.t, key: k})
				s.times.push(expEntry{t: r.t})
			}
			ps.held += int64(len(list))
		}
		s.rows, s.exp = map[string][]ijRow{}, s.exp[:0]
		for _, p := range parts {
			ps := p.sides[i]
			ps.wm, ps.ended, ps.maxTS = s.wm, s.ended, s.maxTS
		}
	}
}
