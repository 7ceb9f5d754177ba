package drive

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

const graphScript = `CREATE SOURCE a (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW va AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND);
CREATE VIEW ra AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(n) AS n FROM va GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);
CREATE VIEW vb AS SELECT g, count(*) AS n FROM b GROUP BY g;`

func graphQueries(t *testing.T) map[string]*plan.Query {
	t.Helper()
	return scriptQueries(t, graphScript)
}

// scriptQueries compiles script with its queries' own outputs and
// returns its queries by name.
func scriptQueries(tb testing.TB, script string) map[string]*plan.Query {
	tb.Helper()
	prog, err := plan.Compile(script, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		tb.Fatal(err)
	}
	qs := map[string]*plan.Query{}
	for _, q := range prog.Queries {
		qs[q.Name] = q
	}
	return qs
}

// TestGraphRefusals: a graph reads two inputs only for a join of views
// over them, and a query that feeds
// another delivers by callback.
func TestGraphRefusals(t *testing.T) {
	qs := graphQueries(t)
	emit := func(*changelog.Record) error { return nil }
	if _, err := NewGraph(qs["ra"], []*plan.Query{qs["vb"]}, Config{Emit: emit}, nil, nil); err == nil || !strings.Contains(err.Error(), "none joins a view of one with a view of the other") {
		t.Errorf("two sources without a join: %v", err)
	}
	if _, err := NewGraph(qs["va"], []*plan.Query{qs["ra"]}, Config{MaxPending: 4}, nil, nil); err == nil || !strings.Contains(err.Error(), "callback") {
		t.Errorf("a pulled primary with a reader: %v", err)
	}
	g, err := NewGraph(qs["ra"], nil, Config{MaxPending: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Queries()) != 2 || g.Queries()[0].Name != "va" {
		t.Errorf("queries %v", g.Queries())
	}
}

// TestGraphBackpressure pulls a reader one record at a time: a push that
// finalizes many of the view's windows leaves rows in the reader's inbox,
// the next push is refused until they are taken, a checkpoint is refused
// meanwhile, and every record arrives in order.
func TestGraphBackpressure(t *testing.T) {
	qs := graphQueries(t)
	g, err := NewGraph(qs["ra"], nil, Config{MaxPending: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := g.Push([]byte(`{"g":"k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `","ts":"2026-01-01 00:00:01"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// The view's second and the reader's ten seconds close: 50 finals
	// wait in the reader's queue, so a checkpoint is refused.
	if err := g.Push([]byte(`{"g":"z","ts":"2026-01-01 00:00:30"}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.Checkpoint(true, nil, func(k, v []byte) error { return nil }); !errors.Is(err, ErrBackpressure) {
		t.Fatalf("checkpoint with records waiting: %v", err)
	}
	// This closes the view's second 30: its row waits in the reader's
	// inbox (the reader's queue is not empty), so the next push is refused.
	if err := g.Push([]byte(`{"g":"z","ts":"2026-01-01 00:00:31"}`)); err != nil {
		t.Fatal(err)
	}
	if !g.waiting() {
		t.Fatal("nothing waits in the reader's inbox")
	}
	if err := g.Push([]byte(`{"g":"z","ts":"2026-01-01 00:00:32"}`)); !errors.Is(err, ErrBackpressure) {
		t.Fatalf("push with rows waiting: %v", err)
	}
	n := 0
	for {
		if g.Pending() > 1 {
			t.Fatalf("%d records buffered", g.Pending())
		}
		if _, ok := g.Next(); ok {
			n++
			continue
		}
		ok, err := g.Refill()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if n != 50 || g.Queued() {
		t.Fatalf("%d records, queued %v", n, g.Queued())
	}
	if err := g.Push([]byte(`{"g":"z","ts":"2026-01-01 00:00:32"}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.Checkpoint(true, nil, func(k, v []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestGraphClosed: after Close, the calls that a closed driver refuses
// return ErrClosed and the graph stays usable for Next and Stats.
func TestGraphClosed(t *testing.T) {
	qs := graphQueries(t)
	var n int
	g, err := NewGraph(qs["ra"], nil, Config{Emit: func(*changelog.Record) error { n++; return nil }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Push([]byte(`{"g":"a","ts":"2026-01-01 00:00:01"}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil || n != 1 {
		t.Fatalf("close: %v, %d records", err, n)
	}
	for _, f := range []func() error{g.EmitEarly, func() error { return g.AdvanceWatermark(1 << 60) }, func() error { return g.Push([]byte(`{}`)) }} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Errorf("after close: %v", err)
		}
	}
	if err := g.Close(); err != nil || g.Err() != nil {
		t.Errorf("second close: %v, fatal %v", err, g.Err())
	}
}

// TestGraphTwoInputsCloseOpen: with the second input ended, closing the
// open windows closes the first input's and then the join's (an ended
// input has none left), and the join's final row comes out.
func TestGraphTwoInputsCloseOpen(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE a (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW va AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW vb AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM b GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT x.g, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, sum(y.n) AS n FROM va x JOIN vb y ON x.g = y.g AND x.ws = y.ws
  GROUP BY x.g, TUMBLE(x.ws, INTERVAL '1' SECOND);`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	emit := func(r *changelog.Record) error { got = append(got, string(r.Key)); return nil }
	g, err := NewGraph(prog.Queries[2], []*plan.Query{prog.Queries[0]}, Config{Emit: emit}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return g.Push([]byte(`{"g": "k", "ts": "2026-01-01 00:00:00.5"}`)) },
		func() error { return g.PushTable([]byte(`{"g": "k", "ts": "2026-01-01 00:00:00.7"}`)) },
		g.EndTable,
		g.CloseOpenWindows,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || got[0] != `["k", "2026-01-01 00:00:00"]` {
		t.Fatalf("records %q", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGraphTemporalJoinRefusals: a graph runs at most one temporal join
// (its table is the graph's second input), and none beside a second
// source; a graph without one refuses table input.
func TestGraphTemporalJoinRefusals(t *testing.T) {
	qs := scriptQueries(t, `CREATE SOURCE a (g VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE VIEW j1 AS SELECT a.g, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, sum(t.p) AS p FROM a JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k GROUP BY a.g, TUMBLE(a.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j2 AS SELECT a.g, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, max(t.p) AS p FROM a JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k GROUP BY a.g, TUMBLE(a.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW vb AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM b GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW r1 AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(p) AS p FROM j1 GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);
CREATE VIEW r2 AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(p) AS p FROM j2 GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);
CREATE VIEW both AS SELECT x.g, x.ws, count(*) AS n FROM j1 x JOIN vb y ON x.g = y.g AND x.ws = y.ws GROUP BY x.g, x.ws;
CREATE VIEW rb AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(n) AS n FROM vb GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);`)
	emit := func(*changelog.Record) error { return nil }
	if _, err := NewGraph(qs["r1"], []*plan.Query{qs["r2"]}, Config{Emit: emit}, nil, nil); err == nil || !strings.Contains(err.Error(), "a graph runs at most one temporal join") {
		t.Errorf("two temporal joins: %v", err)
	}
	if _, err := NewGraph(qs["both"], nil, Config{Emit: emit}, nil, nil); err == nil || !strings.Contains(err.Error(), "a graph reads at most two inputs") {
		t.Errorf("a temporal join beside a second source: %v", err)
	}
	g, err := NewGraph(qs["rb"], nil, Config{Emit: emit}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.PushTable([]byte(`{}`)); !errors.Is(err, ErrGraphTable) {
		t.Errorf("table input to a graph without one: %v", err)
	}
	g, err = NewGraph(qs["r1"], nil, Config{Emit: emit}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.EndTable(); err != nil {
		t.Fatal(err)
	}
	if err := g.PushTable([]byte(`{"k":"x","p":1,"vf":"2026-07-18 10:00:00"}`)); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "table t has ended") {
		t.Errorf("table input after its end: %v", err)
	}
}

// A view over an interval join of two streams: the join is a root with
// the graph's two inputs; a second join of its own inputs, or a third
// source, is refused; the second input ends on its own, the first too,
// and a push to an ended input is refused.
func TestGraphIntervalJoinRoot(t *testing.T) {
	qs := scriptQueries(t, `CREATE SOURCE a (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE c (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW j1 AS SELECT a.g, TUMBLE_START(b.ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a JOIN b ON a.g = b.g AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.g, TUMBLE(b.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j2 AS SELECT a.g, TUMBLE_START(c.ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a JOIN c ON a.g = c.g AND c.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.g, TUMBLE(c.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW vc AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM c GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW r1 AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(n) AS n FROM j1 GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);
CREATE VIEW r2 AS SELECT g, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(n) AS n FROM j2 GROUP BY g, TUMBLE(ws, INTERVAL '10' SECOND);
CREATE VIEW both AS SELECT x.g, x.ws, count(*) AS n FROM j1 x JOIN vc y ON x.g = y.g AND x.ws = y.ws GROUP BY x.g, x.ws;`)
	var got []string
	emit := func(r *changelog.Record) error {
		if r.Meta.Final {
			got = append(got, string(r.Key)+" "+string(r.Value))
		}
		return nil
	}
	if _, err := NewGraph(qs["r1"], []*plan.Query{qs["r2"]}, Config{Emit: emit}, nil, nil); err == nil || !strings.Contains(err.Error(), "a graph runs at most one temporal join or interval join of two streams") {
		t.Errorf("two interval joins of streams: %v", err)
	}
	if _, err := NewGraph(qs["both"], nil, Config{Emit: emit}, nil, nil); err == nil || !strings.Contains(err.Error(), "query j1 joins the streams a and b, and the graph also reads c as the source of another query") {
		t.Errorf("an interval join beside a second source: %v", err)
	}
	g, err := NewGraph(qs["r1"], nil, Config{Emit: emit}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.SecondInput() != "b" || !g.TwoStreams() || len(g.Sources()) != 1 || g.Sources()[0].Name != "a" || g.Input("a") != 0 || g.Input("b") != 1 || g.Input("c") != -1 {
		t.Fatalf("inputs: %v, second %q, Input a %d b %d c %d", g.Sources(), g.SecondInput(), g.Input("a"), g.Input("b"), g.Input("c"))
	}
	for _, p := range []struct {
		second bool
		raw    string
	}{
		{false, `{"g":"x","ts":"2026-07-18 10:00:00"}`},
		{true, `{"g":"x","ts":"2026-07-18 10:00:00.5"}`},
		{true, `{"g":"x","ts":"2026-07-18 10:00:03"}`}, // matched by the next impression
		{false, `{"g":"x","ts":"2026-07-18 10:00:02.5"}`},
	} {
		var err error
		if p.second {
			err = g.PushTable([]byte(p.raw))
		} else {
			err = g.Push([]byte(p.raw))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := g.EndFirst(); err != nil {
		t.Fatal(err)
	}
	if err := g.Push([]byte(`{"g":"x","ts":"2026-07-18 10:00:09"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("a push to the ended first input: %v", err)
	}
	if err := g.PushTable([]byte(`{"g":"x","ts":"2026-07-18 10:00:03.2"}`)); err != nil {
		t.Fatal(err)
	}
	if err := g.EndTable(); err != nil {
		t.Fatal(err)
	}
	if err := g.PushTable([]byte(`{"g":"x","ts":"2026-07-18 10:00:04"}`)); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "input b has ended") {
		t.Errorf("a push to the ended second input: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("the reader published before Close: %q", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// The join: (10:00:00, 10:00:00.5) in window 10:00:00, (10:00:02.5,
	// 10:00:03) and (10:00:02.5, 10:00:03.2) in window 10:00:03: the
	// reader's one 10-second window sums them.
	want := []string{`["x", "2026-07-18 10:00:00"] {"g": "x", "w": "2026-07-18 10:00:00", "n": 3}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("finals %q, want %q", got, want)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestRowGraphJoinedRoot: a row graph whose root is an interval join of
// two streams applies the joined rows another host's join made
// (Config.OnJoined) to the view's aggregate without its join, moved by
// the joined stream's watermark, and its reader follows: every query's
// finals are those of the whole graph fed both streams.
func TestRowGraphJoinedRoot(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE a (g VARCHAR, s VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW j AS SELECT a.s, TUMBLE_START(b.ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a JOIN b ON a.g = b.g AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.s, TUMBLE(b.ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW r AS SELECT s, TUMBLE_START(ws, INTERVAL '3' SECOND) AS w, sum(n) AS n FROM j GROUP BY s, TUMBLE(ws, INTERVAL '3' SECOND);`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	j, r := prog.Queries[0], prog.Queries[1]
	collect := func(m map[string]string) func(*changelog.Record) error {
		return func(rec *changelog.Record) error {
			if rec.Meta.Final {
				m[rec.Meta.Query+" "+string(rec.Key)] = string(rec.Value)
			}
			return nil
		}
	}
	var left, right [][]byte
	for i := range 40 {
		left = append(left, fmt.Appendf(nil, `{"g":"k%d","s":"s%d","ts":"2026-07-18 10:00:%02d.%d"}`, i%3, i%2, i/4, i%4*2))
		right = append(right, fmt.Appendf(nil, `{"g":"k%d","ts":"2026-07-18 10:00:%02d.%d"}`, i%4, i/4, (i%4)*2+1))
	}
	want := map[string]string{}
	g, err := NewGraph(r, nil, Config{Emit: collect(want)}, collect(want), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The join alone, its joined rows and output watermark handed over.
	got := map[string]string{}
	rg, err := NewHostGraph(r, HostInput{Joined: j}, Config{Emit: collect(got), ExternalWatermark: true}, collect(got), nil)
	if err != nil {
		t.Fatal(err)
	}
	join, err := New(j, Config{OnJoined: rg.PushRow, Emit: func(*changelog.Record) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for i := range left {
		for _, step := range []func() error{
			func() error { return g.Push(left[i]) }, func() error { return g.PushTable(right[i]) },
			func() error { return join.Push(left[i]) }, func() error { return join.PushInput(1, right[i]) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		if wm := join.Watermark(); wm > rg.Watermark() {
			if err := rg.AdvanceWatermark(wm); err != nil && !Skipped(err) {
				t.Fatal(err)
			}
			moved = true
		}
	}
	if !moved || len(got) == 0 {
		t.Fatalf("the joined stream's watermark never moved the row graph (%d finals before the end)", len(got))
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := join.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want) < 6 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("row graph finals:\n%v\nthe graph's:\n%v", got, want)
	}
	if _, err := NewSegmentGraph(r, r.Views(), nil, Config{Emit: collect(got)}, nil, nil); err != nil {
		t.Errorf("a row graph from a reader: %v", err)
	}
}

// TestRowGraphJoinRoot: a row graph whose root is a join of two views
// (a Kafka join stage running the queries over the join) fed the views'
// typed rows and watermark markers, the left's as its first input and
// the right's as its second, publishes the join's and its reader's
// finals of the whole graph run over the source; a root that joins a
// view and a stream is refused.
func TestRowGraphJoinRoot(t *testing.T) {
	qs := scriptQueries(t, `CREATE SOURCE a (g VARCHAR, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE b (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW va AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW vb AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, sum(k) AS s FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT x.g, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, sum(x.n) AS n, sum(y.s) AS s FROM va x JOIN vb y ON x.g = y.g AND x.ws = y.ws GROUP BY x.g, TUMBLE(x.ws, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW top AS SELECT g, TUMBLE_START(ws, INTERVAL '5' SECOND) AS w, count(*) AS c, sum(s) AS s FROM j GROUP BY g, TUMBLE(ws, INTERVAL '5' SECOND) EMIT FINAL;
CREATE VIEW mixed AS SELECT x.g, TUMBLE_START(x.ws, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM va x JOIN b y ON x.g = y.g AND y.ts BETWEEN x.ws AND x.ws + INTERVAL '1' SECOND GROUP BY x.g, TUMBLE(x.ws, INTERVAL '1' SECOND) EMIT FINAL;`)
	var evs [][]byte
	for i := range 400 {
		ms := 1000 + i*37 - (i*7919)%900
		evs = append(evs, fmt.Appendf(nil, `{"g":"%c","k":%d,"ts":"2026-07-18 10:00:%02d.%03d"}`, 'p'+i%3, i, ms/1000, ms%1000))
	}
	finals := func(into map[string][]string) func(*changelog.Record) error {
		return func(r *changelog.Record) error {
			if r.Meta.Final {
				into[r.Meta.Query] = append(into[r.Meta.Query], string(r.Key)+" "+string(r.Value))
			}
			return nil
		}
	}
	want := map[string][]string{}
	g, err := NewGraph(qs["top"], nil, Config{Emit: finals(want)}, finals(want), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := g.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want["j"]) < 20 || len(want["top"]) < 5 {
		t.Fatalf("too little: j %d, top %d finals", len(want["j"]), len(want["top"]))
	}

	got := map[string][]string{}
	rg, err := NewSegmentGraph(qs["top"], qs["j"].Views(), nil, Config{Emit: finals(got), ExternalWatermark: true, IncrementalJoinState: true}, finals(got), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each view on a driver of its own, its rows and markers fed to the
	// row graph's two inputs as a join stage gets them.
	type side struct {
		d    *Driver
		v    *plan.Query
		rows [][]types.Value
		mark int64
	}
	var sides [2]*side
	for i, name := range []string{"va", "vb"} {
		s := &side{v: qs[name], mark: math.MinInt64}
		if s.d, err = New(s.v, Config{Emit: func(*changelog.Record) error { return nil }, OnRow: func(row []types.Value) error { s.rows = append(s.rows, slices.Clone(row)); return nil }}); err != nil {
			t.Fatal(err)
		}
		sides[i] = s
	}
	flush := func() {
		for i, s := range sides {
			for _, row := range s.rows {
				var err error
				if i == 0 {
					err = rg.PushRow(row)
				} else {
					err = rg.PushTableRow(row)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			s.rows = s.rows[:0]
			if wm := s.v.ViewWatermark(s.d.Watermark()); wm > s.mark {
				s.mark = wm
				var err error
				if i == 0 {
					err = rg.AdvanceWatermark(wm)
				} else {
					err = rg.AdvanceTableWatermark(wm)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, e := range evs {
		for _, s := range sides {
			if err := s.d.Push(e); err != nil {
				t.Fatal(err)
			}
		}
		flush()
	}
	for _, s := range sides {
		if err := s.d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"j", "top"} {
		if !slices.Equal(got[name], want[name]) {
			t.Errorf("%s: the row graph's finals differ from the whole graph's:\n%q\nvs\n%q", name, got[name], want[name])
		}
	}
	if _, err := NewSegmentGraph(qs["mixed"], qs["mixed"].Views(), nil, Config{Emit: finals(got)}, nil, nil); err == nil || !strings.Contains(err.Error(), "query mixed joins a view and a stream") {
		t.Errorf("a root joining a view and a stream: %v", err)
	}
}

// TestGraphNoLeak: a graph whose views run on several threads, closed or
// dropped unclosed, leaves no goroutine behind (a view's shards hold the
// graph through the reader hooks, so the driver's cleanup must not keep
// the graph reachable).
func TestGraphNoLeak(t *testing.T) {
	qs := graphQueries(t)
	base := runtime.NumGoroutine()
	for i := 0; i < 6; i++ {
		g, err := NewGraph(qs["ra"], nil, Config{Threads: 3, Emit: func(*changelog.Record) error { return nil }}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.Threads() != 3 {
			t.Fatalf("the graph runs on %d threads, want 3", g.Threads())
		}
		for j := 0; j < 500; j++ {
			if err := g.Push(fmt.Appendf(nil, `{"g":"k%d","ts":"2026-07-18 10:00:%02d"}`, j%7, j%60)); err != nil {
				t.Fatal(err)
			}
		}
		if i%2 == 0 {
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		} // else dropped without Close
	}
	waitGoroutines(t, base)
}
