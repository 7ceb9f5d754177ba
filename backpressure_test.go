package ubik_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// These tests hold Options.MaxPendingRecords to its word: at no time does a
// Query without an OnRecord callback hold more rendered records than the
// bound, whatever one call finalizes, and draining with Next and retrying
// on ErrBackpressure gives exactly the changelog an unbounded run gives.

const bpTumble = `CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');
SELECT k, TUMBLE_START(t, INTERVAL '1' MINUTE) AS ws, count(*) AS n, sum(v) AS s
FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)`

// bpHost drives a bounded query as a host would: every call that returns
// ErrBackpressure is retried after taking records with Next, and the bound
// is checked after every call.
type bpHost struct {
	t    *testing.T
	q    *ubik.Query
	max  int
	recs []changelog.Record
	r    *rand.Rand // nil: drain everything on backpressure
	peak int
}

func (h *bpHost) check(where string) {
	h.t.Helper()
	p := h.q.Stats().Pending
	h.peak = max(h.peak, p)
	if p > h.max {
		h.t.Fatalf("%s: %d records pending, MaxPendingRecords is %d", where, p, h.max)
	}
}

// take takes up to n records with Next (n < 0: all), checking the bound
// after each, and reports how many it took.
func (h *bpHost) take(n int) int {
	h.t.Helper()
	got := 0
	for n < 0 || got < n {
		rec, ok := h.q.Next()
		h.check("after Next")
		if !ok {
			break
		}
		h.recs = append(h.recs, rec)
		got++
	}
	return got
}

// do runs one call, retrying it while it returns ErrBackpressure.
func (h *bpHost) do(what string, f func() error) error {
	h.t.Helper()
	for {
		err := f()
		h.check("after " + what)
		if !errors.Is(err, ubik.ErrBackpressure) {
			return err
		}
		n := -1
		if h.r != nil {
			n = 1 + h.r.IntN(h.max+1)
		}
		if h.take(n) == 0 {
			h.t.Fatalf("%s returned ErrBackpressure with nothing for Next to take", what)
		}
	}
}

func startBounded(t *testing.T, sql string, maxPending int, clock func() time.Time) *ubik.Query {
	t.Helper()
	opts := ubik.DefaultOptions()
	opts.MaxPendingRecords = maxPending
	if clock != nil {
		opts.Now = clock
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := eng.Start(sql, ubik.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func sameChangelog(t *testing.T, got, want []changelog.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, the unbounded run gave %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Meta.Final != w.Meta.Final ||
			g.Meta.Revision != w.Meta.Revision || g.Meta.WindowStart != w.Meta.WindowStart || g.Meta.WindowEnd != w.Meta.WindowEnd {
			t.Fatalf("record %d differs:\n got %s %s final=%v rev=%d\nwant %s %s final=%v rev=%d",
				i, g.Key, g.Value, g.Meta.Final, g.Meta.Revision, w.Key, w.Value, w.Meta.Final, w.Meta.Revision)
		}
	}
}

// TestBackpressureOneEventFinalizesAWindow pushes 200,000 distinct keys
// into one window, then one event three minutes later: that one Push
// finalizes 200,000 groups, and the bound must hold after it and after
// every Next that follows.
func TestBackpressureOneEventFinalizesAWindow(t *testing.T) {
	const keys, bound = 200_000, 100
	q := startBounded(t, bpTumble, bound, nil)
	h := &bpHost{t: t, q: q, max: bound}
	var want []changelog.Record
	ref, err := mustOpen(t).Start(bpTumble, ubik.QueryOptions{OnRecord: func(r changelog.Record) error { want = append(want, r.Clone()); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	push := func(ev []byte) {
		t.Helper()
		if err := h.do("Push", func() error { return q.Push(ev) }); err != nil {
			t.Fatal(err)
		}
		if err := ref.Push(ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < keys; i++ {
		push(fmt.Appendf(nil, `{"k":"key-%d","v":%d,"t":"2026-07-18 10:00:%02d"}`, i, i, i%60))
	}
	if p := q.Stats().Pending; p != 0 {
		t.Fatalf("%d records pending before any window closed", p)
	}
	// One Push whose watermark finalizes the whole window: it is applied
	// (nil), and the window's records wait for Next.
	ev := []byte(`{"k":"late-comer","v":1,"t":"2026-07-18 10:03:00"}`)
	before := q.Stats().EventsIn
	if err := q.Push(ev); err != nil {
		t.Fatalf("the push that finalizes the window: %v", err)
	}
	h.check("after the Push that finalized 200,000 groups")
	if got := q.Stats().EventsIn; got != before+1 {
		t.Fatalf("EventsIn %d after a Push that returned nil, want %d", got, before+1)
	}
	if err := ref.Push(ev); err != nil {
		t.Fatal(err)
	}
	// The next Push is refused until the window is drained, and a refused
	// Push applies nothing.
	ev2 := []byte(`{"k":"after","v":1,"t":"2026-07-18 10:03:01"}`)
	if err := q.Push(ev2); !errors.Is(err, ubik.ErrBackpressure) {
		t.Fatalf("Push with the window's records queued: %v, want ErrBackpressure", err)
	}
	if st := q.Stats(); st.EventsIn != before+1 || st.Rows != before+1 {
		t.Fatalf("a refused Push was counted: events_in %d, rows %d, want %d", st.EventsIn, st.Rows, before+1)
	}
	push(ev2)
	if err := h.do("Close", q.Close); err != nil {
		t.Fatal(err)
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	h.take(-1)
	if len(h.recs) != keys+2 {
		t.Fatalf("%d records, want %d", len(h.recs), keys+2)
	}
	sameChangelog(t, h.recs, want)
	if h.peak != bound {
		t.Errorf("the buffer peaked at %d; it should fill to its bound %d", h.peak, bound)
	}
}

func mustOpen(t *testing.T) *ubik.Engine {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestBackpressureWatermarkJumpOverAMillionGroups finalizes 1M groups with
// one AdvanceWatermark: the call holds at most MaxPendingRecords records,
// and the heap does not grow by the million records it finalized.
func TestBackpressureWatermarkJumpOverAMillionGroups(t *testing.T) {
	const groups, bound = 1_000_000, 1000
	q := startBounded(t, `CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '1' HOUR) WITH (format = 'jsonl');
		SELECT k, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)`, bound, nil)
	h := &bpHost{t: t, q: q, max: bound}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	row := make([]ubik.Value, 3)
	for i := 0; i < groups; i++ {
		row[0] = ubik.Varchar("key-" + strconv.Itoa(i))
		row[1] = ubik.BigInt(int64(i))
		row[2] = ubik.TimestampMicros(base.UnixMicro() + int64(i)%60_000_000)
		if err := q.PushRow(row); err != nil {
			t.Fatal(err)
		}
	}
	heapAt := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heapAt()
	if err := q.AdvanceWatermark(base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.check("after the watermark jump")
	after := heapAt()
	t.Logf("heap %d MB before the jump, %d MB after it", before>>20, after>>20)
	if after > before+16<<20 {
		t.Errorf("the heap grew by %d MB on a watermark jump that may hold %d records", (after-before)>>20, bound)
	}
	if st := q.Stats(); st.Pending != bound {
		t.Errorf("%d records pending after the jump, want the buffer filled to %d", st.Pending, bound)
	}
	n := 0
	for {
		rec, ok := q.Next()
		if !ok {
			break
		}
		if rec.Meta.Revision != 1 || !rec.Meta.Final {
			t.Fatalf("record %d: %s final=%v rev=%d", n, rec.Key, rec.Meta.Final, rec.Meta.Revision)
		}
		n++
		if n%100 == 0 {
			h.check("while draining")
		}
	}
	if n != groups {
		t.Fatalf("%d records, want %d", n, groups)
	}
	if st := q.Stats(); st.LiveGroups != 0 || st.WindowsFinalized != groups {
		t.Fatalf("live groups %d, finalized %d after draining", st.LiveGroups, st.WindowsFinalized)
	}
}

// TestBackpressureCheckpointWaitsForQueuedWork: a checkpoint taken while
// finalized windows wait for Next would lose them (they are no longer live
// state, and not yet records), so Checkpoint refuses until they are drained;
// a restore from the checkpoint then continues the changelog exactly.
func TestBackpressureCheckpointWaitsForQueuedWork(t *testing.T) {
	const bound, split = 5, 55
	var evs [][]byte
	for i := 0; i < 80; i++ { // 20 keys a minute
		evs = append(evs, fmt.Appendf(nil, `{"k":"k%d","v":%d,"t":"2026-07-18 10:%02d:%02d"}`, i%20, i, i/20, i%60))
	}
	// After the first 55 events the watermark jumps to 10:03, closing the
	// window of 10:02 with 15 groups, 10 more than the buffer holds.
	jump := time.Date(2026, 7, 18, 10, 3, 0, 0, time.UTC)
	var want []changelog.Record
	ref, _ := mustOpen(t).Start(bpTumble, ubik.QueryOptions{OnRecord: func(r changelog.Record) error { want = append(want, r.Clone()); return nil }})
	for i, ev := range evs {
		if i == split {
			if err := ref.AdvanceWatermark(jump); err != nil {
				t.Fatal(err)
			}
		}
		if err := ref.Push(ev); err != nil {
			t.Fatal(err)
		}
	}
	ref.Close()

	q := startBounded(t, bpTumble, bound, nil)
	h := &bpHost{t: t, q: q, max: bound}
	for _, ev := range evs[:split] {
		if err := h.do("Push", func() error { return q.Push(ev) }); err != nil {
			t.Fatal(err)
		}
	}
	h.take(-1)
	store := map[string][]byte{}
	put := func(k, v []byte) error { store[string(k)] = append([]byte(nil), v...); return nil }
	if err := q.AdvanceWatermark(jump); err != nil {
		t.Fatal(err)
	}
	if err := q.Checkpoint(true, []byte("pos"), put); !errors.Is(err, ubik.ErrBackpressure) {
		t.Fatalf("Checkpoint with finalized windows queued: %v, want ErrBackpressure", err)
	}
	if len(store) != 0 {
		t.Fatalf("a refused Checkpoint wrote %d entries", len(store))
	}
	if err := h.do("Checkpoint", func() error { return q.Checkpoint(true, []byte("pos"), put) }); err != nil {
		t.Fatal(err)
	}
	h.take(-1) // the host delivers what it took before it commits the checkpoint
	q2 := startBounded(t, bpTumble, bound, nil)
	for k, v := range store {
		if _, err := q2.Restore([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := q2.FinishRestore(); err != nil {
		t.Fatal(err)
	}
	h.q = q2
	for _, ev := range evs[split:] {
		if err := h.do("Push", func() error { return q2.Push(ev) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.do("Close", q2.Close); err != nil {
		t.Fatal(err)
	}
	h.take(-1)
	sameChangelog(t, h.recs, want)
}

// bpQueries cover every emission path: finals of aligned windows (one and
// several per event), sessions, EMIT EARLY (flushes interleaved with
// finals), EMIT CHANGES (one and four records per event, so a push can
// publish more than the room), a continuous view, HAVING, allowed lateness.
var bpQueries = []string{
	bpTumble,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '10' SECOND) WITH (format = 'jsonl');
	 SELECT k, HOP_START(t, INTERVAL '20' SECOND, INTERVAL '1' MINUTE) AS ws, count(*) AS n, max(v) AS m
	 FROM e GROUP BY k, HOP(t, INTERVAL '20' SECOND, INTERVAL '1' MINUTE)`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '5' SECOND) WITH (format = 'jsonl');
	 SELECT k, SESSION_START(t, INTERVAL '30' SECOND) AS ss, SESSION_END(t, INTERVAL '30' SECOND) AS se, count(*) AS n, sum(v) AS s
	 FROM e GROUP BY k, SESSION(t, INTERVAL '30' SECOND)`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '5' SECOND) WITH (format = 'jsonl');
	 SELECT k, TUMBLE_START(t, INTERVAL '1' MINUTE) AS ws, count(*) AS n, sum(v) AS s
	 FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND ALLOWED LATENESS INTERVAL '20' SECOND`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');
	 SELECT k, TUMBLE_START(t, INTERVAL '30' SECOND) AS ws, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '30' SECOND) EMIT CHANGES`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '2' SECOND) WITH (format = 'jsonl');
	 SELECT k, HOP_START(t, INTERVAL '10' SECOND, INTERVAL '40' SECOND) AS ws, count(*) AS n, sum(v) AS s
	 FROM e GROUP BY k, HOP(t, INTERVAL '10' SECOND, INTERVAL '40' SECOND) EMIT CHANGES`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');
	 SELECT k, count(*) AS n, sum(v) AS s FROM e GROUP BY k`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');
	 SELECT k, count(*) AS n, sum(v) AS s FROM e GROUP BY k EMIT EARLY EVERY INTERVAL '2' SECOND`,
	`CREATE SOURCE e (k VARCHAR, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t - INTERVAL '3' SECOND) WITH (format = 'jsonl');
	 SELECT k, TUMBLE_START(t, INTERVAL '10' SECOND) AS ws, count(*) AS n FROM e
	 GROUP BY k, TUMBLE(t, INTERVAL '10' SECOND) HAVING count(*) > 1`,
}

type bpOp struct {
	kind  byte // 'p' push, 'w' watermark, 't' tick, 'e' emit early, 'n' next, 'c' checkpoint
	ev    []byte
	wm    time.Time
	clock time.Duration // added to the processing clock before the op
	n     int           // 'n': records to take
}

func bpHistory(r *rand.Rand, n int) []bpOp {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	keys := 1 + r.IntN(40)
	ms := int64(0)
	var ops []bpOp
	for len(ops) < n {
		op := bpOp{clock: time.Duration(r.IntN(50)) * time.Millisecond}
		switch x := r.IntN(100); {
		case x < 75:
			ms += int64(r.IntN(1500))
			at := ms - int64(r.IntN(20_000)) // disorder, some of it late
			t := base.Add(time.Duration(at) * time.Millisecond)
			op.kind = 'p'
			if r.IntN(50) == 0 {
				op.ev = []byte(`{"k":"x","v":"not a number"}`)
			} else {
				op.ev = fmt.Appendf(nil, `{"k":"k%d","v":%d,"t":"%s"}`, r.IntN(keys), r.IntN(1000), t.Format("2006-01-02 15:04:05.000"))
			}
		case x < 80:
			ms += int64(r.IntN(60_000))
			op.kind, op.wm = 'w', base.Add(time.Duration(ms-int64(r.IntN(30_000)))*time.Millisecond)
		case x < 85:
			op.kind, op.clock = 't', time.Duration(r.IntN(3000))*time.Millisecond
		case x < 87:
			op.kind = 'e'
		case x < 89:
			op.kind = 'c'
		default:
			op.kind, op.n = 'n', r.IntN(8)
		}
		ops = append(ops, op)
	}
	return ops
}

type bpRun struct {
	recs  []changelog.Record
	errs  []string // per op, the error text ("" for none)
	late  []string
	stats ubik.Stats
}

// runHistory runs ops on sql: with an OnRecord callback when bound is 0,
// else pulling with Next under MaxPendingRecords = bound.
func runHistory(t *testing.T, sql string, ops []bpOp, bound int, r *rand.Rand) bpRun {
	t.Helper()
	var out bpRun
	now := time.Date(2026, 7, 18, 12, 0, 0, 0, time.UTC)
	opts := ubik.DefaultOptions()
	opts.Now = func() time.Time { return now }
	if bound > 0 {
		opts.MaxPendingRecords = bound
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	qo := ubik.QueryOptions{OnLate: func(ev *ubik.LateEvent) {
		out.late = append(out.late, fmt.Sprintf("%d %d %d %s", ev.EventTime, ev.WindowStart, ev.Watermark, ev.Reason))
	}}
	if bound == 0 {
		qo.OnRecord = func(r changelog.Record) error { out.recs = append(out.recs, r.Clone()); return nil }
	}
	q, err := eng.Start(sql, qo)
	if err != nil {
		t.Fatal(err)
	}
	h := &bpHost{t: t, q: q, max: max(bound, 1), r: r}
	do := func(what string, f func() error) error {
		if bound == 0 {
			return f()
		}
		return h.do(what, f)
	}
	discard := func(k, v []byte) error { return nil }
	for _, op := range ops {
		now = now.Add(op.clock)
		var err error
		switch op.kind {
		case 'p':
			err = do("Push", func() error { return q.Push(op.ev) })
		case 'w':
			err = do("AdvanceWatermark", func() error { return q.AdvanceWatermark(op.wm) })
		case 't':
			err = do("Tick", q.Tick)
		case 'e':
			err = do("EmitEarly", q.EmitEarly)
		case 'c':
			err = do("Checkpoint", func() error { return q.Checkpoint(false, nil, discard) })
		case 'n':
			if bound > 0 {
				h.take(op.n)
			}
		}
		e := ""
		if err != nil {
			e = err.Error()
		}
		out.errs = append(out.errs, e)
	}
	if err := do("Close", q.Close); err != nil {
		t.Fatal(err)
	}
	if bound > 0 {
		h.take(-1)
		out.recs = h.recs
	}
	out.stats = q.Stats()
	return out
}

// TestBackpressureMatchesUnbounded runs random histories of pushes,
// watermarks, ticks, early flushes, checkpoints and pulls under a random
// small MaxPendingRecords, with the host retrying every ErrBackpressure,
// and requires the changelog to be byte for byte the one an unbounded run
// (an OnRecord callback) gives, with the same errors and late events.
func TestBackpressureMatchesUnbounded(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for s := 0; s < seeds; s++ {
		for qi, sql := range bpQueries {
			seed := uint64(s*len(bpQueries) + qi)
			r := rand.New(rand.NewPCG(seed, 7))
			ops := bpHistory(r, 300+r.IntN(900))
			bound := 1 + r.IntN(6)
			want := runHistory(t, sql, ops, 0, nil)
			got := runHistory(t, sql, ops, bound, r)
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d (query %d, MaxPendingRecords %d): %s", seed, qi, bound, fmt.Sprintf(format, args...))
			}
			if len(got.recs) != len(want.recs) {
				fail("%d records, the unbounded run gave %d", len(got.recs), len(want.recs))
			}
			for i := range want.recs {
				g, w := got.recs[i], want.recs[i]
				if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Meta.Final != w.Meta.Final || g.Meta.Revision != w.Meta.Revision {
					fail("record %d: got %s %s final=%v rev=%d, want %s %s final=%v rev=%d",
						i, g.Key, g.Value, g.Meta.Final, g.Meta.Revision, w.Key, w.Value, w.Meta.Final, w.Meta.Revision)
				}
			}
			for i := range want.errs {
				if got.errs[i] != want.errs[i] {
					fail("op %d (%c): error %q, want %q", i, ops[i].kind, got.errs[i], want.errs[i])
				}
			}
			if fmt.Sprint(got.late) != fmt.Sprint(want.late) {
				fail("late events differ:\n got %v\nwant %v", got.late, want.late)
			}
			gs, ws := got.stats, want.stats
			if gs.RecordsOut != ws.RecordsOut || gs.WindowsFinalized != ws.WindowsFinalized || gs.Late != ws.Late ||
				gs.EventsIn != ws.EventsIn || gs.Malformed != ws.Malformed || gs.LiveGroups != ws.LiveGroups || gs.Pending != 0 || gs.Queued {
				fail("stats differ:\n got %+v\nwant %+v", gs, ws)
			}
		}
	}
}
