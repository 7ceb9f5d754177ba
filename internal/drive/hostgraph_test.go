package drive

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestHostGraphOneQuery: a host graph of one query over the source (a
// Kafka task of a query without views) is its driver: the same records,
// the same checkpoint entries under the same keys (no query name, so a
// state written by the driver restores into the graph), and a restore
// continues alike. A temporal join's table row is taken while the
// join's buffer of events is full, as the driver takes it (the graph
// refused it before, though the buffer waits for table rows).
func TestHostGraphOneQuery(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE a (g VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE VIEW j AS SELECT a.g, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, sum(t.p) AS p FROM a JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k GROUP BY a.g, TUMBLE(a.ts, INTERVAL '1' SECOND) EMIT FINAL;`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	type run struct {
		recs []string
		push func([]byte) error
		tbl  func([]byte) error
		adv  func(int64) error
		tadv func(int64) error
		cp   func(func(k, v []byte) error) error
	}
	const bound = 3
	mk := func(entries map[string]string) *run {
		r := &run{}
		cfg := Config{Emit: func(rec *changelog.Record) error {
			r.recs = append(r.recs, string(rec.Key)+" "+string(rec.Value))
			return nil
		}, ExternalWatermark: true, IncrementalJoinState: true, JoinBuffer: bound}
		if entries == nil { // the driver
			d, err := New(q, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.push, r.adv = d.Push, d.AdvanceWatermark
			r.tbl = func(raw []byte) error { return d.PushInput(1, raw) }
			r.tadv = func(wm int64) error { return d.AdvanceInput(1, wm) }
			r.cp = func(put func(k, v []byte) error) error { return d.Checkpoint(true, []byte("pos"), put) }
			return r
		}
		g, err := NewHostGraph(q, HostInput{}, cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		meta := string(g.MetaKey())
		for _, k := range slices.Sorted(maps.Keys(entries)) {
			if k != meta {
				if _, err := g.Restore([]byte(k), []byte(entries[k])); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(entries) > 0 {
			if pos, err := g.Restore([]byte(meta), []byte(entries[meta])); err != nil || string(pos) != "pos" {
				t.Fatalf("meta entry: position %q, %v", pos, err)
			}
		}
		g.FinishRestore()
		r.push, r.tbl, r.adv, r.tadv = g.Push, g.PushTable, g.AdvanceWatermark, g.AdvanceTableWatermark
		r.cp = func(put func(k, v []byte) error) error { return g.Checkpoint(true, []byte("pos"), put) }
		return r
	}
	entriesOf := func(r *run) map[string]string {
		m := map[string]string{}
		if err := r.cp(func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	d, g := mk(nil), mk(map[string]string{})
	at := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	steps := func(from, to int, runs ...*run) {
		for i := from; i < to; i++ {
			for _, r := range runs {
				for e := range bound {
					ev := fmt.Appendf(nil, `{"g":"g%d","k":"k%d","ts":"2026-07-18 10:00:%02d.%d"}`, e, e%2, i, e+1)
					if err := r.push(ev); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.push([]byte(`{"g":"x","k":"k0","ts":"2026-07-18 10:00:59"}`)); !errors.Is(err, ErrJoinBuffer) {
					t.Fatalf("an event beyond the join's buffer: %v", err)
				}
				tbl := fmt.Appendf(nil, `{"k":"k%d","p":%d,"vf":"2026-07-18 10:00:%02d"}`, i%2, i, i)
				if err := r.tbl(tbl); err != nil {
					t.Fatalf("table row %d while %d events wait: %v", i, bound, err)
				}
				ts := at + int64(i)*1_000_000
				if err := r.adv(ts); err != nil && !Skipped(err) {
					t.Fatal(err)
				}
				if err := r.tadv(ts + 1_000_000); err != nil && !Skipped(err) {
					t.Fatal(err)
				}
			}
		}
	}
	steps(0, 5, d, g)
	de, ge := entriesOf(d), entriesOf(g)
	if len(d.recs) < 5 || !slices.Equal(d.recs, g.recs) {
		t.Fatalf("the graph's records differ from the driver's:\n%q\nvs\n%q", g.recs, d.recs)
	}
	if fmt.Sprint(de) != fmt.Sprint(ge) {
		t.Fatalf("the graph's checkpoint differs from the driver's:\n%q\nvs\n%q", ge, de)
	}
	// The driver's state restored into a graph continues as the driver.
	r := mk(de)
	d.recs = nil
	steps(5, 9, d, r)
	if len(d.recs) < 4 || !slices.Equal(d.recs, r.recs) {
		t.Fatalf("the restored graph's records differ from the driver's:\n%q\nvs\n%q", r.recs, d.recs)
	}
}

// BenchmarkHostGraphOneQuery: a Kafka task of one query runs it as a
// host graph of one node; the graph's cost per event over its bare
// driver.
func BenchmarkHostGraphOneQuery(b *testing.B) {
	prog, err := plan.Compile(`CREATE SOURCE a (g VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW q AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n, sum(v) AS v FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;`, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		b.Fatal(err)
	}
	q := prog.Queries[0]
	evs := make([][]byte, 4096)
	for i := range evs {
		evs[i] = fmt.Appendf(nil, `{"g":"g%d","v":%d,"ts":"2026-07-18 10:%02d:%02d.%03d"}`, i%97, i, i/1000%60, i/10%60, i%1000)
	}
	cfg := Config{Emit: func(*changelog.Record) error { return nil }, ExternalWatermark: true}
	for _, name := range []string{"driver", "graph"} {
		b.Run(name, func(b *testing.B) {
			push := func([]byte) error { return nil }
			if name == "driver" {
				d, err := New(q, cfg)
				if err != nil {
					b.Fatal(err)
				}
				push = d.Push
			} else {
				g, err := NewHostGraph(q, HostInput{}, cfg, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				push = g.Push
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := push(evs[i%len(evs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
