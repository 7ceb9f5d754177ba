package landtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// Refusal is a record a store can never hold, made from a good record, and
// a piece of text the reason must hold (the limit it breaks).
type Refusal struct {
	Name   string
	Make   func(good changelog.Record) changelog.Record
	Reason string
}

// NULValue returns good with a value holding the JSON escape \u0000 in a
// string, as ubik emits a source string holding a NUL.
func NULValue(good changelog.Record) changelog.Record {
	r := good.Clone()
	r.Value = []byte(`{"k":"x\u0000y","n":1}`)
	return r
}

// refusals are the records every lander refuses, whatever its store.
func refusals() []Refusal {
	return []Refusal{
		{"key not an array", func(g changelog.Record) changelog.Record {
			r := g.Clone()
			r.Key = []byte(`{"g":1}`)
			return r
		}, "malformed key"},
		{"query with separator", func(g changelog.Record) changelog.Record {
			r := g.Clone()
			r.Meta.Query = "a:b"
			return r
		}, `contains ":"`},
	}
}

// testRefused: a record that can never land does not hold its batch back.
// With OnBadRecord it is handed over with its position and reason and the
// good records of the batch land; without, Run stops at once naming it and
// commits nothing. A NUL in a value lands unless the store refuses it.
func testRefused(t *testing.T, h Harness) {
	mode := land.Latest
	all := append(refusals(), h.Refusals...)
	var batch, good []changelog.Record
	want := map[int]Refusal{}
	for i, rf := range all {
		g := Record(mode, "q", fmt.Sprintf("good%d", i), base, 1, false)
		bad := rf.Make(Record(mode, "q", fmt.Sprintf("bad%d", i), base, 1, false))
		batch = append(batch, g)
		good = append(good, g)
		want[len(batch)] = rf
		batch = append(batch, bad)
	}
	nul := NULValue(Record(mode, "q", "nul", base, 1, false))
	if !h.RefusesNUL {
		good = append(good, nul)
	}
	batch = append(batch, nul, Record(mode, "q", "last", base, 1, false))
	good = append(good, batch[len(batch)-1])

	l := open(t, h, mode, NS("refuse"))
	src := land.NewSliceSource(batch)
	var c land.Counters
	var got []land.BadRecord
	err := land.Run(context.Background(), src, l, land.RunOptions{Counters: &c,
		OnBadRecord: func(b land.BadRecord) error { got = append(got, b); return nil }})
	if err != nil || src.Committed() != 1 {
		t.Fatalf("Run = %v, %d batches committed; want the batch landed and committed", err, src.Committed())
	}
	for _, b := range got {
		if b.Index == len(batch)-2 && h.RefusesNUL {
			if !strings.Contains(b.Err.Error(), `\u0000`) {
				t.Errorf("the NUL value is refused for %q, which does not name \\u0000", b.Err)
			}
			continue
		}
		rf, ok := want[b.Index]
		if !ok {
			t.Errorf("record %d (%s) refused: %v", b.Index, b.Record.Key, b.Err)
			continue
		}
		if !strings.Contains(b.Err.Error(), rf.Reason) || !land.Permanent(b.Err) {
			t.Errorf("%s: reason %q, want a permanent error naming %q", rf.Name, b.Err, rf.Reason)
		}
		delete(want, b.Index)
	}
	for _, rf := range want {
		t.Errorf("%s: landed or lost, not handed to OnBadRecord", rf.Name)
	}
	if n := len(batch) - len(good); c.Rejected.Load() != int64(n) || len(got) != n || c.Landed.Load() != int64(len(good)) {
		t.Errorf("rejected %d (handed over %d), landed %d; want %d and %d", c.Rejected.Load(), len(got), c.Landed.Load(), n, len(good))
	}
	Check(t, h, l, oracleOf(t, mode, good))

	// Without OnBadRecord the first refused record stops Run, named.
	for _, rf := range all {
		g := Record(mode, "q", "stop", base, 1, false)
		b := rf.Make(Record(mode, "q", "stopbad", base, 1, false))
		src := land.NewSliceSource([]changelog.Record{g, b})
		err := land.Run(context.Background(), src, l, land.RunOptions{})
		var re *land.RecordError
		if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), rf.Reason) || src.Committed() != 0 {
			t.Errorf("%s without OnBadRecord: Run = %v, %d committed; want a *land.RecordError at 1 naming %q", rf.Name, err, src.Committed(), rf.Reason)
		}
	}
}
