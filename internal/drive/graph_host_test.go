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
// checkpoint entries under the driver's own keys, on one thread and on
// two.
func TestQueryGraphIsItsDriver(t *testing.T) {
	for name, query := range map[string]string{
		// HAVING overflows for a group of two events.
		"plain": `SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND) HAVING count(*) * 9223372036854775807 > 0;`,
		"join":  `SELECT a.g, TUMBLE_START(a.ts, INTERVAL '1' SECOND) AS ws, sum(t.p) AS p FROM a JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k GROUP BY a.g, TUMBLE(a.ts, INTERVAL '1' SECOND);`,
	} {
		for _, threads := range []int{1, 2} {
			for _, buffered := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/threads=%d/buffered=%v", name, threads, buffered), func(t *testing.T) {
					q := compileHost(t, query)
					cfg := hostConfig(buffered, threads)
					want := hostTrace(t, cfg, true, func(cfg Config) (hostCalls, error) { return newDriverCalls(q, cfg) })
					got := hostTrace(t, cfg, true, func(cfg Config) (hostCalls, error) { return NewQueryGraph(q, cfg) })
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
}

// TestViewErrorsAreItsDriver: a graph of a view and its reader returns
// from each call of the first input what a driver returns (the records
// differ): an evaluation error of a window is returned by the call that
// finalized it, as for a single query, whether the view's window failed
// (against the view's driver) or its reader's (against the driver of
// the one query that counts the same windows), on one thread and on two.
func TestViewErrorsAreItsDriver(t *testing.T) {
	const (
		having = ` HAVING count(*) * 9223372036854775807 > 0`
		view   = `CREATE VIEW v AS SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND)`
		single = `SELECT g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM a GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND)` + having + `;`
	)
	for name, c := range map[string]struct{ graph, driver string }{
		"view fails":   {view + having + ` EMIT FINAL;` + "\n" + `SELECT g, sum(n) AS n FROM v GROUP BY g;`, ""},
		"reader fails": {view + ` EMIT FINAL;` + "\n" + `SELECT g, TUMBLE_START(ws, INTERVAL '1' SECOND) AS w, max(n) AS n FROM v GROUP BY g, TUMBLE(ws, INTERVAL '1' SECOND) HAVING max(n) * 9223372036854775807 > 0;`, single},
	} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(t *testing.T) {
				reader := compileHost(t, c.graph)
				driver := reader.Views()[0]
				if c.driver != "" {
					driver = compileHost(t, c.driver)
				}
				cfg := hostConfig(false, threads)
				outcomes := func(trace string) string {
					var b strings.Builder
					for l := range strings.Lines(trace) {
						if !strings.HasPrefix(l, "record ") && !strings.HasPrefix(l, "entry ") {
							b.WriteString(l)
						}
					}
					return b.String()
				}
				want := outcomes(hostTrace(t, cfg, false, func(cfg Config) (hostCalls, error) { return newDriverCalls(driver, cfg) }))
				got := outcomes(hostTrace(t, cfg, false, func(cfg Config) (hostCalls, error) { return NewGraph(reader, nil, cfg, nil, nil) }))
				if threads > 1 && c.driver != "" {
					// On several threads a reader hears its view's
					// watermark at the host's next call (the view's
					// marker is merged after the call's records), so its
					// window's error comes a call late: the errors of one
					// thread, in the same order (a push's without its
					// event's number: the call that returns it is not a
					// push).
					one := outcomes(hostTrace(t, hostConfig(false, 1), false, func(cfg Config) (hostCalls, error) { return newDriverCalls(driver, cfg) }))
					got, want = errorsOf(got), errorsOf(one)
				}
				if got != want {
					t.Fatalf("the graph of the view and its reader:\n%s\nthe driver:\n%s", got, want)
				}
				// Four advances finalize a failing window; so does the
				// last push, whose error a driver on several threads
				// returns from a later push, and there is none.
				if n := strings.Count(want, "Overflow"); n < 5 && threads == 1 || n < 4 {
					t.Fatalf("no window failed to evaluate:\n%s", want)
				}
			})
		}
	}
}

// errorsOf is the errors of a trace's calls, in order, an event's
// without its number.
func errorsOf(trace string) string {
	var b strings.Builder
	for l := range strings.Lines(trace) {
		if _, err, ok := strings.Cut(l, ": "); ok && !strings.HasPrefix(err, "ok") {
			if rest, ok := strings.CutPrefix(err, "event "); ok {
				_, err, _ = strings.Cut(rest, ": ")
			}
			b.WriteString(err)
		}
	}
	return b.String()
}

// compileHost compiles query over the test's source and table and
// returns its last query.
func compileHost(t *testing.T, query string) *plan.Query {
	t.Helper()
	const src = `CREATE SOURCE a (g VARCHAR, k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
`
	prog, err := plan.Compile(src+query, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

func hostConfig(buffered bool, threads int) Config {
	cfg := Config{MaxPending: 1, CountsInCheckpoint: true, Threads: threads}
	if !buffered {
		cfg.Emit = func(*changelog.Record) error { return nil } // hostTrace's
	}
	return cfg
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
	CloseOpenWindows() error
	Next() (changelog.Record, bool)
	Refill() (bool, error)
	Checkpoint(full bool, position []byte, put func(key, val []byte) error) error
}

// driverCalls are a driver's calls under the graph's names: the graph
// names its second input's calls, the driver numbers its inputs.
type driverCalls struct{ *Driver }

func newDriverCalls(q *plan.Query, cfg Config) (hostCalls, error) {
	d, err := New(q, cfg)
	if err != nil {
		return nil, err
	}
	return driverCalls{d}, nil
}

func (d driverCalls) PushTable(raw []byte) error           { return d.PushInput(1, raw) }
func (d driverCalls) AdvanceTableWatermark(wm int64) error { return d.AdvanceInput(1, wm) }
func (d driverCalls) EndTable() error                      { return d.EndInput(1) }
func (d driverCalls) EndFirst() error                      { return d.EndInput(0) }

// hostTrace runs one sequence of calls on what start makes (the calls of
// the second input too when second) and returns every outcome, record
// and checkpoint entry as text.
func hostTrace(t *testing.T, cfg Config, second bool, start func(Config) (hostCalls, error)) string {
	var b strings.Builder
	if cfg.Emit != nil {
		cfg.Emit = func(r *changelog.Record) error {
			fmt.Fprintf(&b, "record %s %s\n", r.Key, r.Value)
			return nil
		}
	}
	h, err := start(cfg)
	if err != nil {
		t.Fatal(err)
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
		if second {
			out("table", h.PushTable(fmt.Appendf(nil, `{"k":"k%d","p":%d,"vf":"2026-07-18 10:00:%02d"}`, i%2, i, i)))
			out("advance table", h.AdvanceTableWatermark(at(i+1)))
		}
		out("advance", h.AdvanceWatermark(at(i+1)))
		out("tick", h.Tick())
		cp()
		take()
		cp()
	}
	// Two events of one group, then one that finalizes their window.
	for _, ts := range []string{"05.1", "05.2", "07"} {
		out("push", h.Push(fmt.Appendf(nil, `{"g":"g0","k":"k0","v":1,"ts":"2026-07-18 10:00:%s"}`, ts)))
	}
	if second {
		out("end table", h.EndTable())
		out("table after its end", h.PushTable([]byte(`{"k":"k0","p":1,"vf":"2026-07-18 10:00:09"}`)))
		out("advance table after its end", h.AdvanceTableWatermark(at(10)))
		out("end table again", h.EndTable())
		out("end first", h.EndFirst())
	}
	out("emit early", h.EmitEarly())
	out("flush", h.Flush())
	out("close", h.Close())
	take()
	out("close again", h.Close())
	out("push after close", h.Push([]byte(`{"g":"g0","k":"k0","v":1,"ts":"2026-07-18 10:00:09"}`)))
	out("close open windows", h.CloseOpenWindows())
	out("advance after close", h.AdvanceWatermark(at(20)))
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
