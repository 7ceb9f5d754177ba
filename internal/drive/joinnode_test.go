package drive

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

var update = flag.Bool("update", false, "rewrite testdata/joinnode from this driver")

// The two joins of TestJoinNodeTranscript: a temporal join of s with the
// versioned table t, an interval join of l with r; each second input once
// more with a TIMESTAMP(3) column, which takes records only.
const (
	temporalSQL = `CREATE SOURCE s (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vt TIMESTAMP%s, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt);
SELECT s.k, sum(s.x * t.p) AS total FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k GROUP BY s.k, TUMBLE(s.ts, INTERVAL '10' SECOND)`
	intervalSQL = `CREATE SOURCE l (k VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE r (k VARCHAR, p BIGINT, vt TIMESTAMP%s, WATERMARK FOR vt AS vt);
SELECT l.k, sum(l.x * r.p) AS total FROM l JOIN r ON l.k = r.k AND r.vt BETWEEN l.ts AND l.ts + INTERVAL '5' SECOND GROUP BY l.k, TUMBLE(r.vt, INTERVAL '10' SECOND)`
)

// transcript runs one driver of sql through every call of a join's two
// inputs, bad rows, late rows, both ends, a checkpoint and its restore,
// and writes what each call returned and every record, late event and
// counter, so that two versions of the driver can be compared line by
// line.
func transcript(t *testing.T, sql string, cfg Config) string {
	t.Helper()
	q := compile(t, fmt.Sprintf(sql, ""))
	var b strings.Builder
	logf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	late := func(ev *exec.LateEvent) {
		logf("late %s at %d (wm %d) %q: %s", ev.Source.Name, ev.EventTime, ev.Watermark, ev.Event, ev.Reason)
	}
	if cfg.Threads == 0 {
		cfg.Late = late
	}
	cfg.LateTable = late
	if cfg.MaxPending == 0 {
		cfg.Emit = func(r *changelog.Record) error {
			logf("record %s %s", r.Key, r.Value)
			return nil
		}
	}
	d, err := New(q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := func() {
		for {
			r, ok := d.Next()
			if !ok {
				return
			}
			logf("next %s %s", r.Key, r.Value)
		}
	}
	calls := 0
	do := func(what string, err error) {
		logf("%s: %v", what, err)
		// A buffering driver's records are taken after every third
		// call, so the calls between meet a full buffer.
		if calls++; cfg.MaxPending > 0 && calls%3 == 0 {
			if _, err := d.Refill(); err != nil {
				logf("refill: %v", err)
			}
			next()
		}
	}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	ts := func(s int) string { return time.UnixMicro(base + int64(s)*1e6).UTC().Format("2006-01-02 15:04:05") }
	first := func(k string, x, s int) []byte { return fmt.Appendf(nil, `{"k":%q,"x":%d,"ts":%q}`, k, x, ts(s)) }
	second := func(k string, p, s int) []byte { return fmt.Appendf(nil, `{"k":%q,"p":%d,"vt":%q}`, k, p, ts(s)) }
	if !cfg.Strict { // strict fails at the bad first row below
		do("row of two cells", d.PushInputRow(1, []types.Value{types.Str("a"), types.Big(2)}))
		do("row of a wrong kind", d.PushInputRow(1, []types.Value{types.Str("a"), types.Str("x"), types.TS(base)}))
		do("row without a time", d.PushInputRow(1, []types.Value{types.Str("a"), types.Big(2), types.NullOf(types.Type{Kind: types.KindTimestamp})}))
		do("bad record", d.PushInput(1, []byte(`{"k":`)))
	}
	do("second a 0", d.PushInput(1, second("a", 2, 0)))
	do("second b 1 typed", d.PushInputRow(1, []types.Value{types.Str("b"), types.Big(3), types.TS(base + 1e6)}))
	for i := 0; i < 12; i++ {
		do(fmt.Sprintf("first %d", i), d.Push(first([]string{"a", "b", "c"}[i%3], i, i)))
		if i%4 == 3 {
			do(fmt.Sprintf("second a %d", i), d.PushInput(1, second("a", i, i)))
			do(fmt.Sprintf("second b %d", i+1), d.PushInput(1, second("b", i, i+1)))
		}
	}
	do("bad first", d.Push([]byte(`{"k":1}`)))
	do("typed first", d.PushRow([]types.Value{types.Str("a"), types.Big(100), types.TS(base + 12e6)}))
	do("advance second", d.AdvanceInput(1, base+14e6))
	do("late second", d.PushInput(1, second("a", 9, 2)))
	do("late first", d.Push(first("a", 9, 1)))
	do("second behind its partition", d.PushBehind(1, second("b", 9, 13), base+14e6))
	do("advance first", d.AdvanceWatermark(base+13e6))
	put := func(w *strings.Builder) func(k, v []byte) error {
		return func(k, v []byte) error {
			if cfg.Threads > 1 && string(k) == exec.MetaKey {
				// The shards' meta entry holds their clocks.
				fmt.Fprintf(w, "  %q\n", k)
				return nil
			}
			fmt.Fprintf(w, "  %q %x\n", k, sha256.Sum256(v))
			return nil
		}
	}
	// The shards write their groups' entries in an order of their own
	// (the keys' hash seed is random): the entries, not their order, are
	// the checkpoint.
	entries := func(w *strings.Builder) string {
		lines := strings.SplitAfter(w.String(), "\n")
		if cfg.Threads > 1 {
			slices.Sort(lines)
		}
		return strings.Join(lines, "")
	}
	var c1 strings.Builder
	do("checkpoint", d.Checkpoint(true, []byte("pos"), put(&c1)))
	b.WriteString(entries(&c1))
	r, err := New(q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
		pos, err := r.Restore(k, v)
		if pos != nil {
			logf("restored position %q", pos)
		}
		return err
	}); err != nil {
		logf("restore: %v", err)
	}
	r.FinishRestore()
	var c2 strings.Builder
	if err := r.Checkpoint(true, []byte("pos"), put(&c2)); err != nil || entries(&c2) != entries(&c1) {
		logf("restored checkpoint differs (%v):\n%s", err, entries(&c2))
	}
	logf("restored counts %+v %+v", r.Counts(), r.InputCounts(1))
	do("end first", d.EndInput(0))
	do("first after its end", d.Push(first("a", 1, 20)))
	do("end second", d.EndInput(1))
	do("second after its end", d.PushInput(1, second("a", 1, 20)))
	do("advance second after its end", d.AdvanceInput(1, base+30e6))
	do("close open", d.CloseOpenWindows())
	logf("queued %v", d.Queued())
	do("close", d.Close())
	do("second after close", d.PushInput(1, second("a", 1, 30)))
	logf("counts %+v", d.Counts())
	logf("table counts %+v", d.InputCounts(1))
	logf("join %v %+v", d.q.Join != nil, d.JoinStats())
	logf("interval %v %+v", d.q.IJoin != nil, d.IntervalStats())
	w1, w2 := d.InputWatermark(0), d.InputWatermark(1)
	logf("watermarks %d %d, %d, err %v, threads %d", w1, w2, d.Watermark(), d.Err(), d.Threads())

	// The second input with a TIMESTAMP(3) column takes records only.
	dq := compile(t, fmt.Sprintf(sql, "(3)"))
	dd, err := New(dq, Config{Emit: func(*changelog.Record) error { return nil }, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	logf("derived typed row: %v", dd.PushInputRow(1, []types.Value{types.Str("a"), types.Big(2), types.TS(base)}))
	logf("derived after strict: %v", dd.PushInput(1, second("a", 2, 0)))
	logf("derived counts %+v %+v", dd.Counts(), dd.InputCounts(1))
	return b.String()
}

// TestJoinNodeTranscript holds both join nodes, behind the driver, to the
// transcripts of the driver that had the two joins as modes
// (testdata/joinnode/): every error's text, record, late event, counter,
// checkpoint entry and watermark, on one thread and on two, with
// incremental checkpoint entries, watermarks from the host, buffered,
// strict, and with a bound on what the join holds.
func TestJoinNodeTranscript(t *testing.T) {
	for _, j := range []struct{ name, sql string }{{"temporal", temporalSQL}, {"interval", intervalSQL}} {
		for _, c := range []struct {
			name string
			cfg  Config
		}{
			{"one", Config{}},
			{"incremental", Config{IncrementalJoinState: true}},
			{"threads", Config{Threads: 2}},
			{"external", Config{ExternalWatermark: true}},
			{"buffered", Config{MaxPending: 1}},
			{"strict", Config{Strict: true}},
			{"bounded", Config{JoinBuffer: 3}},
		} {
			name := j.name + "-" + c.name
			t.Run(name, func(t *testing.T) {
				got := transcript(t, j.sql, c.cfg)
				path := filepath.Join("testdata", "joinnode", name+".txt")
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if got != string(want) {
					t.Errorf("%s differs from the transcript; got:\n%s", path, got)
				}
			})
		}
	}
}

// TestTemporalJoinAdmitsAfterWaitingRows: joined rows that wait for a
// buffering host's room are applied before the next push is admitted,
// even when the host took records with Next alone (no Refill), and the
// push is refused while any still wait; the records are an unbounded
// driver's.
func TestTemporalJoinAdmitsAfterWaitingRows(t *testing.T) {
	q := compile(t, fmt.Sprintf(temporalSQL, ""))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	event := func(s int) []byte {
		return fmt.Appendf(nil, `{"k":"a","x":%d,"ts":%q}`, s, time.UnixMicro(base+int64(s)*1e6).UTC().Format("2006-01-02 15:04:05"))
	}
	version := []byte(`{"k":"a","p":2,"vt":"2026-07-18 10:00:00"}`)
	var want []string
	free, err := New(q, Config{Emit: func(r *changelog.Record) error {
		want = append(want, string(r.Key)+" "+string(r.Value))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(q, Config{MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	take := func() {
		for r, ok := d.Next(); ok; r, ok = d.Next() {
			got = append(got, string(r.Key)+" "+string(r.Value))
		}
	}
	for _, x := range []*Driver{free, d} {
		// Six events wait for the table; its watermark releases them
		// all, and the second one's window fills the room of one.
		for s := 0; s < 60; s += 10 {
			if err := x.Push(event(s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.PushInput(1, version); err != nil {
			t.Fatal(err)
		}
		if err := x.AdvanceInput(1, base+60e6); err != nil {
			t.Fatal(err)
		}
	}
	if err := free.Push(event(60)); err != nil {
		t.Fatal(err)
	}
	if d.JoinStats().Buffered == 0 {
		t.Fatal("no joined row waits for the room: the test sets nothing up")
	}
	take()
	refused := 0
	for {
		err := d.Push(event(60))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBackpressure) {
			t.Fatal(err)
		}
		if refused++; refused > 10 {
			t.Fatal("the push is never admitted")
		}
		take() // Next alone: the admission applies what waits
	}
	if refused == 0 {
		t.Error("a push was admitted while joined rows waited for the room")
	}
	if err := free.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for more := true; more; {
		take()
		if more, err = d.Refill(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("records\n%q\nwant an unbounded driver's\n%q", got, want)
	}
}
