package drive

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestQueryGraphIsItsDriver: the embedding API's graph of one query
// (NewQueryGraph) is its driver to the host: every call's outcome, the
// records, the refusals (buffer, table input) with their text, an
// evaluation error returned by the call that rendered the record, and the
// checkpoint entries under the driver's own keys.
func TestQueryGraphIsItsDriver(t *testing.T) {
	const src = `CREATE SOURCE a (g VARCHAR, k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
`
	for name, query := range map[string]string{
		// HAVING overflows for a group of two events.
		"plain": `SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) HAVING count(*) * 9223372036854775807 > 0;`,
		"join":  `SELECT a.g, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, sum(t.p) AS p FROM a JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k GROUP BY a.g, TUMBLE(a.ts, INTERVAL '1' SECOND);`,
	} {
		for _, buffered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/buffered=%v", name, buffered), func(t *testing.T) {
				prog, err := plan.Compile(src+query, plan.CompileOptions{})
				if err != nil {
					t.Fatal(err)
				}
				q := prog.Queries[0]
				want := hostTrace(t, q, buffered, false)
				got := hostTrace(t, q, buffered, true)
				if got != want {
					t.Fatalf("the graph of one query:\n%s\nits driver:\n%s", got, want)
				}
				if !strings.Contains(want, "ok") {
					t.Fatalf("nothing ran:\n%s", want)
				}
			})
		}
	}
}

// hostCalls is what a host calls on a driver or a graph.
type hostCalls interface {
	Push(raw []byte) error
	PushTable(raw []byte) error
	AdvanceWatermark(wm int64) error
	AdvanceTableWatermark(wm int64) error
	EndTable() error
	EndFirst() error
	Tick() error
	EmitEarly() error
	Flush() error
	Close() error
	Next() (changelog.Record, bool)
	Refill() (bool, error)
	Checkpoint(full bool, position []byte, put func(key, val []byte) error) error
}

// hostTrace runs one sequence of calls on q's driver, or its graph, and
// returns every outcome, record and checkpoint entry as text.
func hostTrace(t *testing.T, q *plan.Query, buffered, graph bool) string {
	var b strings.Builder
	cfg := Config{MaxPending: 1, CountsInCheckpoint: true}
	if !buffered {
		cfg.Emit = func(r *changelog.Record) error {
			fmt.Fprintf(&b, "record %s %s\n", r.Key, r.Value)
			return nil
		}
	}
	var h hostCalls
	if graph {
		g, err := NewQueryGraph(q, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h = g
	} else {
		d, err := New(q, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h = d
	}
	out := func(what string, err error) {
		if err == nil {
			fmt.Fprintf(&b, "%s: ok\n", what)
			return
		}
		fmt.Fprintf(&b, "%s: %v\n", what, err)
	}
	take := func() {
		for {
			r, ok := h.Next()
			if !ok {
				if more, err := h.Refill(); err != nil || !more {
					out("refill", err)
					return
				}
				continue
			}
			fmt.Fprintf(&b, "next %s %s\n", r.Key, r.Value)
		}
	}
	cp := func() {
		out("checkpoint", h.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
			fmt.Fprintf(&b, "entry %q %q\n", k, v)
			return nil
		}))
	}
	for i := range 4 {
		for e := range 3 {
			out("push", h.Push(fmt.Appendf(nil, `{"g":"g%d","k":"k%d","v":%d,"ts":"2026-07-18 10:00:%02d.%d"}`, e%2, e%2, e, i, e)))
		}
		out("table", h.PushTable(fmt.Appendf(nil, `{"k":"k%d","p":%d,"vf":"2026-07-18 10:00:%02d"}`, i%2, i, i)))
		out("advance table", h.AdvanceTableWatermark(at(i+1)))
		out("advance", h.AdvanceWatermark(at(i+1)))
		out("tick", h.Tick())
		cp()
		take()
		cp()
	}
	out("end table", h.EndTable())
	out("table after its end", h.PushTable([]byte(`{"k":"k0","p":1,"vf":"2026-07-18 10:00:09"}`)))
	out("end first", h.EndFirst())
	out("emit early", h.EmitEarly())
	out("flush", h.Flush())
	out("close", h.Close())
	take()
	out("close again", h.Close())
	out("push after close", h.Push([]byte(`{"g":"g0","k":"k0","v":1,"ts":"2026-07-18 10:00:09"}`)))
	out("close open windows", h.(interface{ CloseOpenWindows() error }).CloseOpenWindows())
	cp()
	return b.String()
}

// at is a second of the test's minute, µs.
func at(s int) int64 { return int64(1784368800+s) * 1_000_000 }

// TestGraphLeaveRecovers: a panic in a graph's call (a host's callback
// that panics) is the graph's fatal ErrInternal, as for a driver: the
// deferred Leave recovers it itself.
func TestGraphLeaveRecovers(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE a (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW v AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
SELECT g, sum(n) AS n FROM v GROUP BY g;`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[len(prog.Queries)-1]
	emit := func(*changelog.Record) error { panic("host bug") }
	for _, g := range []func() (*Graph, error){
		func() (*Graph, error) { return NewGraph(q, nil, Config{Emit: emit}, nil, nil) },
		func() (*Graph, error) { return NewQueryGraph(prog.Queries[0], Config{Emit: emit}) },
	} {
		g, err := g()
		if err != nil {
			t.Fatal(err)
		}
		call := func(raw string) (err error) {
			if err := g.Enter(); err != nil {
				return err
			}
			defer g.Leave(&err)
			return g.Push([]byte(raw))
		}
		err = call(`{"g":"x","ts":"2026-07-18 10:00:00"}`)
		if err == nil {
			err = call(`{"g":"x","ts":"2026-07-18 10:00:05"}`)
		}
		if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "host bug") {
			t.Fatalf("a panicking callback: %v, want ErrInternal naming the panic", err)
		}
		if err := g.Enter(); !errors.Is(err, ErrInternal) {
			t.Fatalf("the next call: %v, want the graph's fatal ErrInternal", err)
		}
	}
}
