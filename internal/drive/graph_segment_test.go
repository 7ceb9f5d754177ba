package drive

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// segmentScript is q8's shape over two small streams (np's placement is
// not the join's, ns's is) and over one (both views' placement is the
// join's, as the plan puts the two views in the join's segment).
const segmentScript = `CREATE SOURCE person (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE auction (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE VIEW np AS SELECT id, name, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS v FROM person GROUP BY id, name, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS a FROM auction GROUP BY seller, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW q AS SELECT p.id, p.name, TUMBLE_START(p.ws, INTERVAL '1' SECOND) AS ws, sum(a.a) AS a FROM np p JOIN ns a ON p.id = a.seller AND p.ws = a.ws GROUP BY p.id, p.name, TUMBLE(p.ws, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW top AS SELECT id, TUMBLE_START(ws, INTERVAL '5' SECOND) AS w, count(*) AS c, sum(a) AS a FROM q GROUP BY id, TUMBLE(ws, INTERVAL '5' SECOND) EMIT FINAL;
CREATE VIEW q2 AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, max(y.a) AS a, count(*) AS n FROM q x JOIN ns y ON x.id = y.seller AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW pos AS SELECT seller, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM auction WHERE seller % 2 = 0 GROUP BY seller, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j1 AS SELECT x.seller, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, sum(x.n) AS n, sum(y.a) AS a FROM pos x JOIN ns y ON x.seller = y.seller AND x.ws = y.ws GROUP BY x.seller, TUMBLE(x.ws, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM person p JOIN auction a ON a.seller = p.id AND a.ts BETWEEN p.ts AND p.ts + INTERVAL '1' SECOND GROUP BY p.id, TUMBLE(a.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW qp AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, max(x.n) AS n, max(y.v) AS v FROM pa x JOIN np y ON x.id = y.id AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '1' SECOND) EMIT FINAL;`

// segmentInput is the records of both streams, interleaved, each out of
// order within its watermark's delay.
func segmentInput() (persons, auctions [][]byte) {
	for i := range 600 {
		ms := 1000 + i*29 - (i*7919)%800
		ts := fmt.Sprintf("2026-07-18 10:00:%02d.%03d", ms/1000, ms%1000)
		persons = append(persons, fmt.Appendf(nil, `{"id":%d,"name":"n%d","ts":"%s"}`, i%7, i%2, ts))
		auctions = append(auctions, fmt.Appendf(nil, `{"seller":%d,"ts":"%s"}`, (i*3)%7, ts))
	}
	return persons, auctions
}

func finalsInto(into map[string][]string) func(*changelog.Record) error {
	return func(r *changelog.Record) error {
		if r.Meta.Final {
			into[r.Meta.Query] = append(into[r.Meta.Query], string(r.Key)+" "+string(r.Value))
		}
		return nil
	}
}

// TestSegmentGraphTwoRoots: the join's segment of q8's plan (ns over
// auction and the join, np's rows coming from another segment with its
// markers) as one segment graph gives every query's finals of the whole
// graph, restored from a checkpoint in the middle or not, with a query
// over the join or a join of the join and ns; and the join of
// two views over one source, both in the join's segment, as one segment
// graph of two roots, likewise.
func TestSegmentGraphTwoRoots(t *testing.T) {
	qs := scriptQueries(t, segmentScript)
	persons, auctions := segmentInput()
	whole := func(primary string) map[string][]string {
		want := map[string][]string{}
		g, err := NewGraph(qs[primary], nil, Config{Emit: finalsInto(want)}, finalsInto(want), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range persons {
			push := g.Push
			if g.SecondInput() != "" {
				if err := g.Push(persons[i]); err != nil {
					t.Fatal(err)
				}
				push = g.PushTable
			}
			if err := push(auctions[i]); err != nil {
				t.Fatal(err)
			}
		}
		want["before Close"] = []string{fmt.Sprint(len(want["q"]), " of q, ", len(want[primary]), " of ", primary)}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		return want
	}
	// top over the join; q2 a join of the join and ns, which both joins
	// read in the segment.
	for _, c := range []struct {
		top     string
		restore bool
	}{{"top", false}, {"top", true}, {"q2", false}, {"q2", true}} {
		want := whole(c.top)
		if len(want["q"]) < 20 || len(want[c.top]) < 5 || len(want["ns"]) < 20 {
			t.Fatalf("too little: q %d, %s %d, ns %d finals", len(want["q"]), c.top, len(want[c.top]), len(want["ns"]))
		}
		got := runSegment(t, qs[c.top], qs["np"], persons, auctions, c.restore)
		delete(want, "np") // np's segment's
		for name := range want {
			if !slices.Equal(got[name], want[name]) {
				t.Errorf("%s, restore %v: %s: the segment graph's finals differ from the whole graph's:\n%q\nvs\n%q", c.top, c.restore, name, got[name], want[name])
			}
		}
	}
	// One source, both views in the join's segment: two roots.
	want := whole("j1")
	delete(want, "before Close")
	got := map[string][]string{}
	g, err := NewSegmentGraph(qs["j1"], nil, func(root *plan.Query) *exec.Decoder { return NewMessageDecoder(root.Source, MessageFormat{}) },
		Config{Emit: finalsInto(got), ExternalWatermark: true}, finalsInto(got), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Sources()) != 1 || len(g.roots) != 2 {
		t.Fatalf("inputs %v, %d roots", g.Sources(), len(g.roots))
	}
	wm := int64(math.MinInt64)
	for _, raw := range auctions {
		if err := g.Push(raw); err != nil {
			t.Fatal(err)
		}
		if m, ok := g.Root().Mark(); ok && m > wm {
			wm = m
			if err := g.AdvanceWatermark(wm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want["j1"]) < 10 || !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("two roots over one source: %d finals of j1; the segment graph's\n%q\nthe whole graph's\n%q", len(want["j1"]), got, want)
	}
}

// runSegment runs top's plan as two segments: view on a driver of its
// own (its segment), every other query in a segment graph taking view's
// rows and markers, the other source's records decoded by its root. With
// restore, the segment graph is checkpointed in the middle and restored
// into a new one, which goes on.
func runSegment(t *testing.T, top, view *plan.Query, persons, auctions [][]byte, restore bool) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	newSeg := func() *Graph {
		g, err := NewSegmentGraph(top, []*plan.Query{view}, nil, Config{Emit: finalsInto(got), ExternalWatermark: true, IncrementalJoinState: true}, finalsInto(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := newSeg()
	src := g.Sources()
	if len(src) != 2 || src[0].Name != "auction" || src[1].View != view || len(g.roots) != 1 {
		t.Fatalf("inputs %v, %d roots", src, len(g.roots))
	}
	var rows [][]types.Value
	vd, err := New(view, Config{Emit: func(*changelog.Record) error { return nil }, OnRow: func(row []types.Value) error { rows = append(rows, slices.Clone(row)); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	mark, awm := int64(math.MinInt64), int64(math.MinInt64)
	flush := func() {
		for _, row := range rows {
			if err := g.PushTableRow(row); err != nil {
				t.Fatal(err)
			}
		}
		rows = rows[:0]
		if wm := view.ViewWatermark(vd.Watermark()); wm > mark {
			mark = wm
			if err := g.AdvanceTableWatermark(wm); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range persons {
		if err := vd.Push(persons[i]); err != nil {
			t.Fatal(err)
		}
		flush()
		if err := g.Push(auctions[i]); err != nil {
			t.Fatal(err)
		}
		if m, ok := g.Root().Mark(); ok && m > awm {
			awm = m
			if err := g.AdvanceWatermark(awm); err != nil {
				t.Fatal(err)
			}
		}
		if restore && i == len(persons)/2 {
			g = restoreInto(t, g, newSeg())
		}
	}
	got["before Close"] = []string{fmt.Sprint(len(got["q"]), " of q, ", len(got[top.Name]), " of ", top.Name)}
	if err := vd.Close(); err != nil {
		t.Fatal(err)
	}
	flush()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// restoreInto checkpoints g fully and restores the entries into fresh.
func restoreInto(t *testing.T, g, fresh *Graph) *Graph {
	t.Helper()
	entries := map[string][]byte{}
	if err := g.Checkpoint(true, []byte("pos"), func(k, v []byte) error { entries[string(k)] = slices.Clone(v); return nil }); err != nil {
		t.Fatal(err)
	}
	meta := string(fresh.MetaKey())
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		if k != meta {
			if _, err := fresh.Restore([]byte(k), entries[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pos, err := fresh.Restore([]byte(meta), entries[meta]); err != nil || string(pos) != "pos" {
		t.Fatalf("meta entry: %q, %v", pos, err)
	}
	fresh.FinishRestore()
	return fresh
}

// TestSegmentGraphRefusals: a segment graph names what it cannot take.
func TestSegmentGraphRefusals(t *testing.T) {
	qs := scriptQueries(t, segmentScript)
	cfg := Config{Emit: func(*changelog.Record) error { return nil }, ExternalWatermark: true}
	if _, err := NewSegmentGraph(qs["j1"], []*plan.Query{qs["np"]}, nil, cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "takes the rows of views it reads") {
		t.Errorf("a view the query does not read: %v", err)
	}
	g, err := NewSegmentGraph(qs["q"], []*plan.Query{qs["np"]}, nil, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.PushTable([]byte(`{"seller":1}`)); err == nil || !strings.Contains(err.Error(), "input np of the graph of q takes the view's rows") {
		t.Errorf("a record pushed to a view's input: %v", err)
	}
	if err := g.EndTable(); err != nil {
		t.Fatal(err)
	}
	if err := g.PushTableRow(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("a row after the view's input ended: %v", err)
	}
}

// BenchmarkSegmentGraphJoin: a Kafka join stage's graph (q over np and
// ns, both views' rows from the host) fed both views' rows and markers.
func BenchmarkSegmentGraphJoin(b *testing.B) {
	qs := scriptQueries(b, segmentScript)
	persons, auctions := segmentInput()
	var rows [2][][]types.Value
	var marks [2][]int64
	for side, name := range []string{"np", "ns"} {
		v, in := qs[name], [2][][]byte{persons, auctions}[side]
		d, err := New(v, Config{Emit: func(*changelog.Record) error { return nil }, OnRow: func(row []types.Value) error {
			rows[side] = append(rows[side], slices.Clone(row))
			return nil
		}})
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range in {
			if err := d.Push(raw); err != nil {
				b.Fatal(err)
			}
			marks[side] = append(marks[side], v.ViewWatermark(d.Watermark()))
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		g, err := NewSegmentGraph(qs["q"], qs["q"].Views(), nil, Config{Emit: func(*changelog.Record) error { return nil }, ExternalWatermark: true, IncrementalJoinState: true}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range max(len(rows[0]), len(rows[1])) {
			if i < len(rows[0]) {
				if err := g.PushRow(rows[0][i]); err != nil {
					b.Fatal(err)
				}
			}
			if i < len(rows[1]) {
				if err := g.PushTableRow(rows[1][i]); err != nil {
					b.Fatal(err)
				}
			}
			if i < len(marks[0]) {
				if err := g.AdvanceWatermark(marks[0][i]); err != nil {
					b.Fatal(err)
				}
				if err := g.AdvanceTableWatermark(marks[1][i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSegmentGraphThreeInputs: a segment of three inputs, as the plan
// gives a join of two views one side of which joins two streams (pa,
// person with auction) and the other's rows (np's) come from another
// segment: person is input 0, auction input 1 (the interval join's right
// stream), np's rows input 2, addressed by its name. Every final equals
// the whole graph's.
func TestSegmentGraphThreeInputs(t *testing.T) {
	qs := scriptQueries(t, segmentScript)
	persons, auctions := segmentInput()
	want := map[string][]string{}
	whole, err := NewGraph(qs["qp"], nil, Config{Emit: finalsInto(want)}, finalsInto(want), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	g, err := NewSegmentGraph(qs["qp"], []*plan.Query{qs["np"]}, nil, Config{Emit: finalsInto(got), ExternalWatermark: true, IncrementalJoinState: true}, finalsInto(got), nil)
	if err != nil {
		t.Fatal(err)
	}
	np := g.Input("np")
	if names := fmt.Sprint(g.Sources()); np != 2 || g.Input("person") != 0 || g.Input("auction") != 1 || g.Input("ns") != -1 {
		t.Fatalf("inputs %s: np is %d", names, np)
	}
	var rows [][]types.Value
	vd, err := New(qs["np"], Config{Emit: func(*changelog.Record) error { return nil }, OnRow: func(row []types.Value) error { rows = append(rows, slices.Clone(row)); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	right, err := NewIntervalRouter(qs["pa"], 1, Config{Decoder: NewMessageSourceDecoder(qs["pa"].IJoin.Right, qs["pa"].RightUsed(), MessageFormat{})})
	if err != nil {
		t.Fatal(err)
	}
	mark := int64(math.MinInt64)
	advance := func(in int, wm int64, ok bool) {
		if ok && wm > g.InputWatermark(in) {
			if err := g.AdvanceInputWatermark(in, wm); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range persons {
		for _, err := range []error{whole.Push(persons[i]), whole.PushTable(auctions[i]), vd.Push(persons[i]), g.Push(persons[i]), g.PushTable(auctions[i])} {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, row := range rows {
			if err := g.PushInputRow(np, row); err != nil {
				t.Fatal(err)
			}
		}
		rows = rows[:0]
		if _, err := right.Route(nil, auctions[i]); err != nil {
			t.Fatal(err)
		}
		wm, ok := g.Root().Mark()
		advance(0, wm, ok)
		wm, ok = right.Mark()
		advance(1, wm, ok)
		if wm := qs["np"].ViewWatermark(vd.Watermark()); wm > mark {
			mark = wm
			advance(np, wm, true)
		}
		if i == len(persons)/2 {
			g = restoreInto(t, g, must(NewSegmentGraph(qs["qp"], []*plan.Query{qs["np"]}, nil, Config{Emit: finalsInto(got), ExternalWatermark: true, IncrementalJoinState: true}, finalsInto(got), nil)))
		}
	}
	if err := vd.Close(); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if err := g.PushInputRow(np, row); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(g.Close(), whole.Close()); err != nil {
		t.Fatal(err)
	}
	delete(want, "np") // np's segment's
	// The same finals; their order within one watermark's step is the
	// order the inputs' markers arrive in, the host's.
	for _, m := range []map[string][]string{got, want} {
		for _, v := range m {
			slices.Sort(v)
		}
	}
	if len(want["qp"]) < 20 || len(want["pa"]) < 20 || !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("%d finals of qp, %d of pa; the segment graph's\n%q\nthe whole graph's\n%q", len(want["qp"]), len(want["pa"]), got, want)
	}
}

func must(g *Graph, err error) *Graph {
	if err != nil {
		panic(err)
	}
	return g
}
