package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

func jkey(k string) string { return string(appendJoinKey(nil, []types.Value{types.Str(k)})) }

// tjSpec is a temporal join entry (AppendState's format) to craft.
type tjSpec struct {
	counts [16]int64 // streamMax, tableMax, StreamWM, TableWM, seq, Events, ..., Dropped
	ended  byte
	evSeq  []uint64
	evRows [][]types.Value
	keys   []string
	vers   [][][]types.Value
}

func (s tjSpec) bytes() []byte {
	b := []byte{stateVersion}
	for _, x := range s.counts {
		b = binary.AppendVarint(b, x)
	}
	b = append(b, s.ended)
	b = binary.AppendUvarint(b, uint64(len(s.evSeq)))
	for i, q := range s.evSeq {
		b = appendRow(binary.AppendUvarint(b, q), s.evRows[i])
	}
	b = binary.AppendUvarint(b, uint64(len(s.keys)))
	for i, k := range s.keys {
		b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
		b = binary.AppendUvarint(b, uint64(len(s.vers[i])))
		for _, row := range s.vers[i] {
			b = appendRow(b, row)
		}
	}
	return b
}

func validTJ() tjSpec {
	return tjSpec{
		counts: [16]int64{10 * sec, 10 * sec, 0, 8 * sec, 2, 2, 0, 0, 0, 0, 2, 0, 0, 2, 2, 0},
		evSeq:  []uint64{1, 2},
		evRows: [][]types.Value{ev("a", 9*sec), ev("b", 9*sec+1)},
		keys:   []string{jkey("a")},
		vers:   [][][]types.Value{{ver("a", 5, 1*sec), ver("a", 6, 2*sec)}},
	}
}

// ijSpec is an interval join entry (AppendState's format) to craft.
type ijSpec struct {
	counts [4]int64 // seq, NullKeys, Matches, Dropped
	sides  [2]struct {
		counts [5]int64 // maxTS, wm, rowsIn, late, peak
		keys   []string
		seqs   [][]uint64
		rows   [][][]types.Value
	}
}

func (s ijSpec) bytes() []byte {
	b := []byte{stateVersion}
	for _, x := range s.counts {
		b = binary.AppendVarint(b, x)
	}
	for _, sd := range s.sides {
		for _, x := range sd.counts {
			b = binary.AppendVarint(b, x)
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(sd.keys)))
		for i, k := range sd.keys {
			b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
			b = binary.AppendUvarint(b, uint64(len(sd.rows[i])))
			for x, row := range sd.rows[i] {
				b = appendRow(binary.AppendUvarint(b, sd.seqs[i][x]), row)
			}
		}
	}
	return b
}

func ijRowOf(k string, x, ts int64) []types.Value {
	return []types.Value{types.Str(k), types.Big(x), types.TS(ts)}
}

func validIJ() ijSpec {
	var s ijSpec
	s.counts = [4]int64{3, 0, 1, 0}
	s.sides[0].counts = [5]int64{5 * sec, 4 * sec, 2, 0, 2}
	s.sides[0].keys = []string{jkey("a")}
	s.sides[0].seqs = [][]uint64{{1, 3}}
	s.sides[0].rows = [][][]types.Value{{ijRowOf("a", 1, 4*sec), ijRowOf("a", 2, 5*sec)}}
	s.sides[1].counts = [5]int64{5 * sec, 4 * sec, 1, 0, 1}
	s.sides[1].keys = []string{jkey("a")}
	s.sides[1].seqs = [][]uint64{{2}}
	s.sides[1].rows = [][][]types.Value{{ijRowOf("a", 7, 5*sec)}}
	return s
}

// ijEntry is a held row's incremental entry value.
func ijEntry(k string, row []types.Value) []byte {
	b := append(binary.AppendUvarint(nil, uint64(len(k))), k...)
	return appendRow(b, row)
}

// restoreRefused runs restore and reports nil when it refused with
// ErrBadState, and what happened otherwise.
func restoreRefused(restore func() error) (res error) {
	defer func() {
		if p := recover(); p != nil {
			res = fmt.Errorf("panic: %v", p)
		}
	}()
	err := restore()
	if err == nil {
		return errors.New("accepted")
	}
	if !errors.Is(err, ErrBadState) {
		return fmt.Errorf("not an ErrBadState error: %v", err)
	}
	return nil
}

// A crafted join checkpoint whose every entry reads is refused when it
// is not a state the join could have written: each of these was
// accepted as a state of other results.
func TestRestoreJoinRefusesCraftedEntries(t *testing.T) {
	q, iq := wholeJoinQuery(t), intervalQuery(t)
	newTJ := func(incr bool) *TemporalJoin {
		j, err := NewTemporalJoin(q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if incr {
			j.SetIncremental()
		}
		return j
	}
	newIJ := func(incr bool) *IntervalJoin {
		j, err := NewIntervalJoin(iq, false)
		if err != nil {
			t.Fatal(err)
		}
		if incr {
			j.SetIncremental()
		}
		return j
	}
	if err := newTJ(false).RestoreState(validTJ().bytes()); err != nil {
		t.Fatalf("the valid temporal join entry: %v", err)
	}
	if err := newIJ(false).RestoreState(validIJ().bytes()); err != nil {
		t.Fatalf("the valid interval join entry: %v", err)
	}
	nullTS := types.Value{Kind: types.KindTimestamp, Null: true}
	tjCases := map[string]func(s *tjSpec){
		"negative event count":      func(s *tjSpec) { s.counts[5] = -1 },
		"end flag 2":                func(s *tjSpec) { s.ended = 2 },
		"event number 0":            func(s *tjSpec) { s.evSeq[0] = 0 },
		"event number never given":  func(s *tjSpec) { s.evSeq[1] = 3 },
		"one event number twice":    func(s *tjSpec) { s.evSeq[1] = 1 },
		"events out of order":       func(s *tjSpec) { s.evRows[1] = ev("b", 8*sec) },
		"event time NULL":           func(s *tjSpec) { s.evRows[0] = []types.Value{types.Str("a"), nullTS} },
		"event time a BIGINT":       func(s *tjSpec) { s.evRows[0] = []types.Value{types.Str("a"), types.Big(9 * sec)} },
		"versions out of order":     func(s *tjSpec) { s.vers[0][0], s.vers[0][1] = s.vers[0][1], s.vers[0][0] },
		"two versions at one time":  func(s *tjSpec) { s.vers[0][1] = ver("a", 6, 1*sec) },
		"key of no key type":        func(s *tjSpec) { s.keys[0] = "\xff" },
		"key with a NULL cell":      func(s *tjSpec) { s.keys[0] = "\x00" },
		"version under another key": func(s *tjSpec) { s.keys[0] = jkey("b") },
		"version cell of another kind": func(s *tjSpec) {
			s.vers[0][0] = []types.Value{types.Str("a"), types.Float(5), types.TS(sec)}
		},
		"keys out of order": func(s *tjSpec) {
			s.keys = []string{jkey("b"), jkey("a")}
			s.vers = [][][]types.Value{{ver("b", 1, sec)}, s.vers[0]}
		},
	}
	for name, mutate := range tjCases {
		s := validTJ()
		mutate(&s)
		if err := restoreRefused(func() error { return newTJ(false).RestoreState(s.bytes()) }); err != nil {
			t.Errorf("temporal join entry, %s: %v", name, err)
		}
	}
	ijCases := map[string]func(s *ijSpec){
		"negative match count":  func(s *ijSpec) { s.counts[2] = -1 },
		"negative late count":   func(s *ijSpec) { s.sides[1].counts[3] = -1 },
		"row under another key": func(s *ijSpec) { s.sides[0].keys[0] = jkey("b") },
		"rows out of order": func(s *ijSpec) {
			s.sides[0].seqs[0][0], s.sides[0].seqs[0][1] = 3, 1
			s.sides[0].rows[0][1] = ijRowOf("a", 2, 4*sec)
		},
		"one number on both sides": func(s *ijSpec) { s.sides[1].seqs[0][0] = 1 },
		"number never given":       func(s *ijSpec) { s.sides[1].seqs[0][0] = 4 },
		"row time NULL":            func(s *ijSpec) { s.sides[1].rows[0][0][2] = nullTS },
		"row cell of another kind": func(s *ijSpec) { s.sides[1].rows[0][0][1] = types.Str("7") },
	}
	for name, mutate := range ijCases {
		s := validIJ()
		mutate(&s)
		if err := restoreRefused(func() error { return newIJ(false).RestoreState(s.bytes()) }); err != nil {
			t.Errorf("interval join entry, %s: %v", name, err)
		}
	}
	// Incremental entries, each after a valid header.
	hdr := validTJ()
	hdr.evSeq, hdr.evRows, hdr.keys, hdr.vers = nil, nil, nil, nil
	vkey := func(ts int64, k string) []byte { return versionEntryKey(k, ts) }
	overlong := append([]byte{0x82, 0x00}, appendRow(nil, ev("a", sec))[1:]...) // the width 2 in two bytes
	type entry struct{ k, v []byte }
	tjIncr := map[string][]entry{
		"version under another key":  {{vkey(sec, jkey("b")), appendRow(nil, ver("a", 1, sec))}},
		"version key of no key type": {{vkey(sec, "\xff"), appendRow(nil, ver("a", 1, sec))}},
		"version cell of another kind": {{vkey(sec, jkey("a")),
			appendRow(nil, []types.Value{types.Str("a"), types.Str("1"), types.TS(sec)})}},
		"event number 0":             {{eventEntryKey(0), appendRow(nil, ev("a", sec))}},
		"event time a VARCHAR":       {{eventEntryKey(1), appendRow(nil, []types.Value{types.Str("a"), types.Str("x")})}},
		"event width in two bytes":   {{eventEntryKey(1), overlong}},
		"one event entry twice":      {{eventEntryKey(1), appendRow(nil, ev("a", sec))}, {eventEntryKey(1), appendRow(nil, ev("b", sec))}},
		"one version entry twice":    {{vkey(sec, jkey("a")), appendRow(nil, ver("a", 1, sec))}, {vkey(sec, jkey("a")), appendRow(nil, ver("a", 2, sec))}},
		"version time not its key's": {{vkey(2*sec, jkey("a")), appendRow(nil, ver("a", 1, sec))}},
	}
	for name, es := range tjIncr {
		if err := restoreRefused(func() error {
			j := newTJ(true)
			if err := j.RestoreState(hdr.bytes()); err != nil {
				return fmt.Errorf("header: %w", errors.Join(err, errors.New("the valid header was refused")))
			}
			for _, e := range es {
				if err := j.RestoreEntry(e.k, e.v); err != nil {
					return err
				}
			}
			j.FinishEntries()
			return nil
		}); err != nil {
			t.Errorf("temporal join incremental entry, %s: %v", name, err)
		}
	}
	ihdr := validIJ()
	for i := range ihdr.sides {
		ihdr.sides[i].keys, ihdr.sides[i].seqs, ihdr.sides[i].rows = nil, nil, nil
	}
	ijOverlong := append(binary.AppendUvarint(nil, uint64(len(jkey("a")))), jkey("a")...)
	ijOverlong = append(ijOverlong, 0x83, 0x00)
	ijOverlong = append(ijOverlong, appendRow(nil, ijRowOf("a", 1, sec))[1:]...)
	ijIncr := map[string][]entry{
		"row under another key":    {{heldEntryKey(0, 1), ijEntry(jkey("b"), ijRowOf("a", 1, sec))}},
		"row cell of another kind": {{heldEntryKey(0, 1), ijEntry(jkey("a"), []types.Value{types.Str("a"), types.Float(1), types.TS(sec)})}},
		"row number 0":             {{heldEntryKey(1, 0), ijEntry(jkey("a"), ijRowOf("a", 1, sec))}},
		"row width in two bytes":   {{heldEntryKey(0, 1), ijOverlong}},
		"one number on both sides": {{heldEntryKey(0, 1), ijEntry(jkey("a"), ijRowOf("a", 1, sec))}, {heldEntryKey(1, 1), ijEntry(jkey("a"), ijRowOf("a", 2, sec))}},
		"row key with a NULL cell": {{heldEntryKey(0, 1), ijEntry("\x00", []types.Value{{Kind: types.KindVarchar, Null: true}, types.Big(1), types.TS(sec)})}},
	}
	for name, es := range ijIncr {
		if err := restoreRefused(func() error {
			j := newIJ(true)
			if err := j.RestoreState(ihdr.bytes()); err != nil {
				return fmt.Errorf("header: %v", err)
			}
			for _, e := range es {
				if err := j.RestoreEntry(e.k, e.v); err != nil {
					return err
				}
			}
			j.FinishEntries()
			return nil
		}); err != nil {
			t.Errorf("interval join incremental entry, %s: %v", name, err)
		}
	}
}

// TestParseMetaRefusesCrafted: the meta entry the sharded driver reads
// (its watermarks and the counters it sums) is refused unless it is as
// the operator writes it.
func TestParseMetaRefusesCrafted(t *testing.T) {
	m := Meta{Watermark: 5, MaxEventTime: 9, Seq: 3, Position: []byte("pos")}
	m.Counters[0] = 7
	good := AppendMeta(nil, m)
	if got, err := ParseMeta(good); err != nil || got.Counters[0] != 7 || string(got.Position) != "pos" {
		t.Fatalf("the valid meta entry: %+v, %v", got, err)
	}
	neg := m
	neg.Counters[3] = -1
	overlong := append([]byte{opStateVersion, 0x8a, 0x00}, good[2:]...) // the watermark 5 in two bytes
	for name, val := range map[string][]byte{
		"a negative count":                         AppendMeta(nil, neg),
		"a byte after the position":                append(append([]byte(nil), good...), 0),
		"the watermark in two bytes":               overlong,
		"a version 1 entry with the tenth counter": append([]byte{stateVersion}, good[1:]...),
	} {
		if _, err := ParseMeta(val); !errors.Is(err, ErrBadState) {
			t.Errorf("%s: got %v, want an ErrBadState error", name, err)
		}
	}
}
