package drive

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

const testSQL = `CREATE SOURCE orders (merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '0' SECOND);
SELECT merchant, amount, COUNT(*) AS n, SUM(amount) AS total
FROM orders GROUP BY merchant, amount, TUMBLE(event_time, INTERVAL '1' MINUTE)`

func compile(t *testing.T, sql string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(sql, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

// events are adversarial for the group key: -0.0 and 0.0, NaN and null
// are one group each; one line is malformed, one is late.
func events() [][]byte {
	var out [][]byte
	cells := []string{`0.0`, `-0.0`, `NaN`, `null`, `1e400`, `2`}
	for i := 0; i < 60; i++ {
		out = append(out, fmt.Appendf(nil, `{"merchant":"m%d","amount":%s,"event_time":"2026-07-18 10:%02d:%02d"}`,
			i%3, cells[i%len(cells)], i/20, i%60))
	}
	out = append(out, []byte(`{"merchant":`))                                                    // malformed
	out = append(out, []byte(`{"merchant":"m0","amount":1,"event_time":"2026-07-18 10:00:01"}`)) // late
	return out
}

func run(t *testing.T, d *Driver, evs [][]byte, keyed *Router) {
	t.Helper()
	for _, e := range evs {
		var err error
		if keyed != nil {
			key, rerr := keyed.Route(nil, e)
			if rerr != nil {
				continue // counted by the router, as the malformed line
			}
			err = d.PushKeyed(e, key)
		} else {
			err = d.Push(e)
		}
		var ee *EventError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRouteThenPushKeyed: a router's keys handed to PushKeyed give the
// changelog of Push, byte for byte, and the router counts what it skipped.
func TestRouteThenPushKeyed(t *testing.T) {
	q := compile(t, testSQL)
	collect := func(out *[]changelog.Record) func(*changelog.Record) error {
		return func(r *changelog.Record) error { *out = append(*out, r.Clone()); return nil }
	}
	var direct, routed []changelog.Record
	d1, err := New(q, Config{Emit: collect(&direct)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d1, events(), nil)
	d2, err := New(q, Config{Emit: collect(&routed)})
	if err != nil {
		t.Fatal(err)
	}
	router, err := NewRouter(q, Config{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d2, events(), router)
	if len(direct) == 0 || !slices.EqualFunc(direct, routed, func(a, b changelog.Record) bool {
		return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value)
	}) {
		t.Fatalf("routed changelog differs from the direct one:\n%v\n%v", direct, routed)
	}
	if c := router.Counts(); c.Records != 62 || c.Events != 62 || c.Malformed != 1 {
		t.Errorf("router counts %+v, want 62 records and events, 1 malformed", c)
	}
	if c := d1.Counts(); c.Events != 62 || c.Malformed != 1 || c.Applied != 61 || c.Late != 1 {
		t.Errorf("driver counts %+v, want 62 events, 1 malformed, 61 applied, 1 late", c)
	}
}

// TestLateEventCarriesRecord: the late hook gets the input record that
// carried the event, on every host's path (Push, PushKeyed).
func TestLateEventCarriesRecord(t *testing.T) {
	q := compile(t, testSQL)
	evs := events()
	for _, keyed := range []bool{false, true} {
		var got []string
		d, err := New(q, Config{Emit: func(*changelog.Record) error { return nil },
			Late: func(ev *LateEvent) { got = append(got, string(ev.Event)) }})
		if err != nil {
			t.Fatal(err)
		}
		var router *Router
		if keyed {
			router, _ = NewRouter(q, Config{})
		}
		run(t, d, evs, router)
		if want := string(evs[len(evs)-1]); len(got) != 1 || got[0] != want {
			t.Errorf("keyed %v: late events carried %q, want [%q]", keyed, got, want)
		}
	}
}

// TestTakeCountsAcrossRestore: a driver restored from a checkpoint reports
// only what it counts after the restore, although its counters (and the
// operator's) continue from the checkpoint's.
func TestTakeCountsAcrossRestore(t *testing.T) {
	q := compile(t, testSQL)
	nop := func(*changelog.Record) error { return nil }
	for _, counts := range []bool{false, true} {
		d, _ := New(q, Config{Emit: nop, CountsInCheckpoint: counts})
		run(t, d, events()[:61], nil) // all but the late one: Close finalizes everything
		var entries [][2][]byte
		if err := d.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
			entries = append(entries, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		r, _ := New(q, Config{Emit: nop, CountsInCheckpoint: counts})
		var pos []byte
		for _, e := range entries {
			p, err := r.Restore(e[0], e[1])
			if err != nil {
				t.Fatal(err)
			}
			if p != nil {
				pos = p
			}
		}
		r.FinishRestore()
		if string(pos) != "pos" {
			t.Errorf("counts %v: restored position %q, want %q", counts, pos, "pos")
		}
		if c := r.Counts(); counts && (c.Events != 61 || c.Malformed != 1) {
			t.Errorf("restored counts %+v, want 61 events, 1 malformed", c)
		}
		if err := r.Push(events()[61]); err != nil { // late now
			t.Fatal(err)
		}
		if c := r.TakeCounts(); c.Events != 1 || c.Late != 1 || c.Malformed != 0 {
			t.Errorf("counts %v: taken after the restore %+v, want 1 event, 1 late", counts, c)
		}
	}
}

// TestBufferedBound: without a callback the driver never holds more than
// MaxPending records; a push is refused (nothing applied, nothing
// counted) while records wait, and Refill renders the rest.
func TestBufferedBound(t *testing.T) {
	q := compile(t, testSQL)
	const max = 3
	d, err := New(q, Config{MaxPending: max})
	if err != nil {
		t.Fatal(err)
	}
	var out int
	take := func() {
		for {
			if d.Pending() > max {
				t.Fatalf("%d records buffered, bound %d", d.Pending(), max)
			}
			if _, ok := d.Next(); ok {
				out++
				continue
			}
			if ok, err := d.Refill(); err != nil {
				t.Fatal(err)
			} else if !ok {
				return
			}
		}
	}
	refused := 0
	for _, e := range events()[:60] {
		for {
			err := d.Push(e)
			if !errors.Is(err, ErrBackpressure) {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			refused++
			before := d.Counts().Events
			take()
			if d.Counts().Events != before {
				t.Fatal("a refused push was counted")
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	take()
	if refused == 0 || out != int(d.Stats().RecordsOut) {
		t.Errorf("%d pushes refused, %d records taken of %d rendered", refused, out, d.Stats().RecordsOut)
	}
}

// TestRecover: a panic in a host's callback becomes a one-line ErrInternal
// carrying the stack for the log, and the driver then refuses every call.
func TestRecover(t *testing.T) {
	q := compile(t, testSQL)
	d, _ := New(q, Config{Emit: func(*changelog.Record) error { panic("host bug") }})
	call := func(f func() error) (err error) {
		if err := d.Enter(); err != nil {
			return err
		}
		defer d.Leave(&err)
		return f()
	}
	var err error
	for _, e := range events()[:60] {
		if err = call(func() error { return d.Push(e) }); err != nil {
			break // the first window to finalize calls the callback
		}
	}
	if err == nil {
		err = call(d.Close)
	}
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "host bug") {
		t.Fatalf("a panicking callback: %v, want ErrInternal", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("a recovered panic's error is %q, want one line (the stack goes to the log)", err)
	}
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(string(pe.Stack), "goroutine") {
		t.Errorf("a recovered panic's error carries no stack for the log: %#v", err)
	}
	if err2 := call(d.Tick); err2 != err {
		t.Errorf("after the panic: %v, want the same fatal error", err2)
	}
	var rerr error
	func() {
		defer Recover(&rerr)
		panic("stage bug")
	}()
	if !errors.Is(rerr, ErrInternal) {
		t.Errorf("Recover: %v", rerr)
	}
}
