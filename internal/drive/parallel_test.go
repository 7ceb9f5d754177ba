package drive

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// The parallel driver's property: the changelog (every record, its key,
// value, revision, finality, in order) never depends on Threads. Each
// randomized case is a query over an adversarial history with host calls
// (early flushes, watermark advances, checkpoints and restores into a
// driver with another number of threads) at fixed input positions, and a
// processing clock that moves only with the input, so the ticks of EMIT
// EARLY fall at the same events in every run.

const parSource = `CREATE SOURCE ev (id VARCHAR, g VARCHAR, x DOUBLE, n BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)`

const parDedup = ` WITH (dedup_key = 'id', dedup_within = '3 seconds')`

// parWindows and parEmits are combined into the queries of the cases.
var parWindows = []struct{ sel, grp string }{
	{"TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws", "TUMBLE(ts, INTERVAL '10' SECOND)"},
	{"HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS ws", "HOP(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND)"},
	{"SESSION_START(ts, INTERVAL '300' MILLISECOND) AS ws, SESSION_END(ts, INTERVAL '300' MILLISECOND) AS we", "SESSION(ts, INTERVAL '300' MILLISECOND)"},
	{"", ""}, // continuous
}

func parQuery(r *rand.Rand) string {
	w := parWindows[r.IntN(len(parWindows))]
	keys := []string{"g"}
	if r.IntN(2) == 0 {
		keys = append(keys, "x")
	}
	sel := append([]string(nil), keys...)
	grp := append([]string(nil), keys...)
	if w.sel != "" {
		sel = append(sel, w.sel)
		grp = append(grp, w.grp)
	}
	sel = append(sel, "count(*) AS c")
	for _, a := range []string{"sum(n) AS sn", "max(x) AS hi", "min(x) AS lo", "sum(x) AS sx", "avg(n) AS an", "count(DISTINCT n) AS dn", "sum(n) FILTER (WHERE n > 2) AS fn", "max(g) AS mg", "min(id) AS mi", "count(DISTINCT g) AS dg"} {
		if r.IntN(3) == 0 {
			sel = append(sel, a)
		}
	}
	s := "SELECT " + strings.Join(sel, ", ") + " FROM ev"
	if r.IntN(4) == 0 {
		s += " WHERE n IS NULL OR n <> 3"
	}
	s += " GROUP BY " + strings.Join(grp, ", ")
	if r.IntN(6) == 0 {
		s += " HAVING count(*) > 1"
	}
	windowed := w.sel != ""
	session := strings.HasPrefix(w.grp, "SESSION")
	switch m := r.IntN(3); {
	case m == 0 && !session:
		s += " EMIT EARLY EVERY INTERVAL '10' MILLISECOND"
	case m == 1 && windowed && !session:
		s += " EMIT CHANGES"
	case !windowed:
		s += " EMIT CHANGES"
	}
	if windowed && r.IntN(3) == 0 {
		s += " ALLOWED LATENESS INTERVAL '1' SECOND"
	}
	src := parSource
	if r.IntN(2) == 0 {
		src += parDedup
	}
	return src + ";\n" + s
}

// parCells are the edge cells of the group key and the aggregates.
var (
	parG = []string{`"a"`, `"b"`, `null`, `"\u00e9"`, `"e\u0301"`, `"\ud83d\ude00"`, `"a\"b"`, `"\\"`, `""`, "\"\xff\xfe\"", "\"x\xc3\"", `"line\nbreak"`, `"c"`, `"d"`, `"e"`}
	parX = []string{`0`, `-0.0`, `0.0`, `NaN`, `"NaN"`, `Infinity`, `-Infinity`, `1e400`, `-1e400`, `null`, `1.5`, `2`, `-7.25`, `1e-320`}
	parN = []string{`1`, `2`, `3`, `null`, `-4`, `9007199254740993`, `"x"`, `5`}
)

type parStep struct {
	line     []byte
	early    bool  // host EmitEarly before the line
	advance  int64 // host AdvanceWatermark (µs) before the line, if nonzero
	ckpt     bool  // checkpoint and restore before the line
	closeAll bool  // CloseOpenWindows before the line
	nowStep  time.Duration
}

func parHistory(r *rand.Rand, n int) []parStep {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	ts := base
	steps := make([]parStep, n)
	for i := range steps {
		switch k := r.IntN(100); {
		case k < 3: // a jump that finalizes many windows
			ts += int64(r.IntN(120)) * 1_000_000
		case k < 8: // late: before the watermark
			ts -= int64(r.IntN(30)) * 1_000_000
		case k < 40: // disorder inside the delay
			ts -= int64(r.IntN(1_500_000))
		default:
			ts += int64(r.IntN(400_000))
		}
		t := time.UnixMicro(ts).UTC().Format("2006-01-02 15:04:05.000000")
		var line []byte
		switch k := r.IntN(60); {
		case k == 0:
			line = []byte(`{"g":"a","x":`) // malformed
		case k == 1:
			line = fmt.Appendf(nil, `{"g":"a","x":1,"n":1}`) // no event time
		default:
			// ids repeat (retries), some of them beyond the dedup horizon
			line = fmt.Appendf(nil, `{"id":"e%d","g":%s,"x":%s,"n":%s,"ts":"%s"}`, max(0, i-r.IntN(3)*r.IntN(40)), parG[r.IntN(len(parG))], parX[r.IntN(len(parX))], parN[r.IntN(len(parN))], t)
		}
		steps[i] = parStep{line: line, nowStep: time.Duration(r.IntN(3)) * time.Millisecond}
		switch k := r.IntN(200); {
		case k < 3:
			steps[i].early = true
		case k < 5:
			steps[i].advance = ts - int64(r.IntN(5_000_000))
		case k < 7:
			steps[i].ckpt = true
		case k < 8:
			steps[i].closeAll = true
		}
	}
	return steps
}

// parRun runs the history on a driver of threads[0] threads, restoring
// into a driver of the next count at each checkpoint, and returns the
// changelog as bytes (one line per record) and the final counts.
//
// feed > 0 hands the lines over with Feed in blocks of feed records (the
// block path) instead of Push; either way every line's outcome (malformed,
// failing to evaluate) is listed, with its position and the event number
// of its error, in the order reported, after the changelog.
func parRun(t *testing.T, q *plan.Query, steps []parStep, threads []int, feed ...int) ([]byte, Counts, exec2Stats) {
	t.Helper()
	var out, bad bytes.Buffer
	onBad := func(tag int64, raw []byte, err *EventError) {
		fmt.Fprintf(&bad, "bad line %d %q: event %d: %v\n", tag, raw, err.Seq, err.Err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	if len(feed) > 1 {
		// A clock that moves 3 ms at each look: a parallel driver looks
		// at the same input positions (every few hundred events) whether
		// fed or pushed, so the early ticks fall alike, inside blocks.
		clock = func() time.Time { now = now.Add(3 * time.Millisecond); return now }
	}
	emit := func(r *changelog.Record) error {
		fmt.Fprintf(&out, "%s %s final=%v rev=%d ws=%d we=%d\n", r.Key, r.Value, r.Meta.Final, r.Meta.Revision, r.Meta.WindowStart, r.Meta.WindowEnd)
		return nil
	}
	ti := 0
	start := func() *Driver {
		cfg := Config{Emit: emit, Now: clock, Threads: threads[ti%len(threads)], CountsInCheckpoint: true}
		if len(feed) > 0 && feed[0] > 0 {
			cfg.BlockEvents, cfg.OnEventError = feed[0], onBad
		}
		d, err := New(q, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ti++
		return d
	}
	d := start()
	for i, s := range steps {
		if s.early {
			if err := d.EmitEarly(); err != nil && !Skipped(err) {
				t.Fatal(err)
			}
		}
		if s.advance != 0 {
			if err := d.AdvanceWatermark(s.advance); err != nil && !Skipped(err) {
				t.Fatal(err)
			}
		}
		if s.closeAll {
			if err := d.CloseOpenWindows(); err != nil && !Skipped(err) {
				t.Fatal(err)
			}
		}
		if s.ckpt {
			type kv struct{ k, v []byte }
			var state []kv
			if err := d.Checkpoint(true, []byte(fmt.Sprint(i)), func(k, v []byte) error {
				state = append(state, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before := d.Counts()
			d = start()
			var pos []byte
			for _, e := range state {
				p, err := d.Restore(e.k, e.v)
				if err != nil {
					t.Fatalf("restore %q: %v", e.k, err)
				}
				if p != nil {
					pos = p
				}
			}
			d.FinishRestore()
			if string(pos) != fmt.Sprint(i) {
				t.Fatalf("restored position %q, want %d", pos, i)
			}
			if after := d.Counts(); after.Events != before.Events || after.Malformed != before.Malformed {
				t.Fatalf("restored counts %+v, checkpointed %+v", after, before)
			}
		}
		now = now.Add(s.nowStep)
		if len(feed) > 0 && feed[0] > 0 {
			if threads[(ti-1)%len(threads)] > 1 && !feeding(d) {
				t.Fatalf("a driver of %d threads does not decode in blocks", d.Threads())
			}
			if err := d.Feed(s.line, int64(i)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		err := d.Push(s.line)
		var ee *EventError
		if errors.As(err, &ee) {
			onBad(int64(i), s.line, ee)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil && !Skipped(err) {
		t.Fatal(err)
	}
	st := d.Stats()
	out.Write(bad.Bytes())
	return out.Bytes(), d.Counts(), exec2Stats{st.RecordsOut, st.Late, st.Filtered, st.WindowsFinalized, st.Watermark, st.MaxEventTime, st.Duplicates, st.DedupLate, st.DedupKeys, st.Rows}
}

type exec2Stats struct {
	RecordsOut, Late, Filtered, WindowsFinalized, Watermark, MaxEventTime, Duplicates, DedupLate, DedupKeys, Rows int64
}

func TestParallelChangelogIdentical(t *testing.T) {
	cases := 60
	if testing.Short() {
		cases = 15
	}
	for c := 0; c < cases; c++ {
		seed := uint64(c)*7919 + 1
		r := rand.New(rand.NewPCG(seed, 3))
		sql := parQuery(r)
		q := compile(t, sql)
		steps := parHistory(r, 300+r.IntN(3000))
		want, wantCounts, wantStats := parRun(t, q, steps, []int{1})
		if len(want) == 0 {
			t.Fatalf("case %d: no records at all\n%s", c, sql)
		}
		for _, threads := range [][]int{{2}, {3}, {4}, {1, 3, 2}, {3, 1, 4, 2}} {
			got, gotCounts, gotStats := parRun(t, q, steps, threads)
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d (seed %d), threads %v: the changelog differs from one thread's\n%s\n%s", c, seed, threads, sql, firstDiff(want, got))
			}
			if gotCounts != wantCounts {
				t.Fatalf("case %d, threads %v: counts %+v, one thread %+v", c, threads, gotCounts, wantCounts)
			}
			if gotStats != wantStats {
				t.Fatalf("case %d, threads %v: stats %+v, one thread %+v", c, threads, gotStats, wantStats)
			}
		}
		// Fed in blocks, decoded by the workers: the processing clock
		// stands still (the sequencer reads it when a block is
		// sequenced, after the host has read on), so early records come
		// only from the host's EmitEarly, in both runs.
		still := append([]parStep(nil), steps...)
		for i := range still {
			still[i].nowStep = 0
		}
		want, wantCounts, wantStats = parRun(t, q, still, []int{1})
		for _, f := range []struct {
			threads []int
			block   int
		}{{[]int{2}, 1}, {[]int{2}, 7}, {[]int{3}, 4096}, {[]int{2, 1, 3}, 1 + r.IntN(100)}, {[]int{1}, 7}, {[]int{4, 2}, 1024}} {
			got, gotCounts, gotStats := parRun(t, q, still, f.threads, f.block)
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d (seed %d), threads %v, fed in blocks of %d: the changelog differs from one thread's\n%s\n%s", c, seed, f.threads, f.block, sql, firstDiff(want, got))
			}
			if gotCounts != wantCounts {
				t.Fatalf("case %d, threads %v, blocks of %d: counts %+v, one thread %+v", c, f.threads, f.block, gotCounts, wantCounts)
			}
			if gotStats != wantStats {
				t.Fatalf("case %d, threads %v, blocks of %d: stats %+v, one thread %+v", c, f.threads, f.block, gotStats, wantStats)
			}
		}
		// Early ticks by the clock inside blocks: fed in blocks and
		// pushed, on two threads, with a clock that moves at each look.
		// (Without the restores, which start a driver that has not
		// looked at the clock yet.)
		for i := range still {
			still[i].ckpt = false
		}
		want, wantCounts, wantStats = parRun(t, q, still, []int{2}, 0, 1)
		for _, block := range []int{7, 300} {
			got, gotCounts, gotStats := parRun(t, q, still, []int{2}, block, 1)
			if !bytes.Equal(got, want) || gotCounts != wantCounts || gotStats != wantStats {
				t.Fatalf("case %d (seed %d), ticking clock, fed in blocks of %d: differs from pushed\n%s\n%s\ncounts %+v %+v\nstats %+v %+v", c, seed, block, sql, firstDiff(want, got), gotCounts, wantCounts, gotStats, wantStats)
			}
		}
	}
}

func firstDiff(a, b []byte) string {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y []byte
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if !bytes.Equal(x, y) {
			return fmt.Sprintf("record %d of %d/%d:\n one: %s\nmany: %s", i, len(al)-1, len(bl)-1, x, y)
		}
	}
	return ""
}

// TestParallelEligible: what runs on one thread, and why.
func TestParallelEligible(t *testing.T) {
	emit := func(*changelog.Record) error { return nil }
	grouped := compile(t, testSQL)
	global := compile(t, `CREATE SOURCE ev (x DOUBLE, ts TIMESTAMP); SELECT count(*) FROM ev`)
	dedup := compile(t, `CREATE SOURCE ev (id VARCHAR, g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (dedup_key = 'id', dedup_within = '1 hour'); SELECT g, count(*) FROM ev GROUP BY g`)
	for _, c := range []struct {
		q    *plan.Query
		cfg  Config
		want int
	}{
		{grouped, Config{Emit: emit, Threads: 3}, 3},
		{grouped, Config{Emit: emit, Threads: 1}, 1},
		{grouped, Config{MaxPending: 10, Threads: 3}, 1},
		{grouped, Config{Emit: emit, Threads: 3, Strict: true}, 1},
		{grouped, Config{Emit: emit, Threads: 3, Late: func(*LateEvent) {}}, 1},
		{global, Config{Emit: emit, Threads: 3}, 1},
		{dedup, Config{Emit: emit, Threads: 3}, 3},
	} {
		d, err := New(c.q, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Threads(); got != c.want {
			t.Errorf("%q threads %d: runs %d, want %d (%s)", c.q.Name, c.cfg.Threads, got, c.want, ThreadsFallback(c.q, c.cfg))
		}
		if c.want == 1 && c.cfg.Threads > 1 && ThreadsFallback(c.q, c.cfg) == "" {
			t.Errorf("no reason given for one thread")
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestParallelNoLeak: closing, failing, and dropping a driver unclosed
// leave no goroutine behind.
func TestParallelNoLeak(t *testing.T) {
	q := compile(t, testSQL)
	base := runtime.NumGoroutine()
	fail := errors.New("sink down")
	for i := 0; i < 20; i++ {
		n := 0
		d, err := New(q, Config{Threads: 3, Emit: func(*changelog.Record) error {
			n++
			if i%3 == 1 && n > 5 {
				return fail
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events() {
			if err := d.Push(e); err != nil && !errors.As(err, new(*EventError)) {
				t.Fatal(err)
			}
		}
		switch i % 3 {
		case 0:
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := d.Close(); !errors.Is(err, fail) {
				t.Fatalf("close: %v, want the sink's error", err)
			}
			if err := d.Push(events()[0]); !errors.Is(err, fail) {
				t.Fatalf("push after the sink failed: %v", err)
			}
		case 2:
			// dropped without Close
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestParallelBounds: a watermark jump that finalizes many groups streams
// through the bounded chunks (the sink sees records before the jump's
// call returns, in order), and a batch never holds more than batchEvents
// steps.
func TestParallelBounds(t *testing.T) {
	q := compile(t, `CREATE SOURCE ev (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT g, count(*) AS c FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' MINUTE)`)
	var got []string
	d, err := New(q, Config{Threads: 2, Emit: func(r *changelog.Record) error {
		got = append(got, string(r.Key))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	const groups = 50_000
	for i := 0; i < groups; i++ {
		if err := d.Push(fmt.Appendf(nil, `{"g":"k%06d","ts":"2026-07-18 10:00:00"}`, i)); err != nil {
			t.Fatal(err)
		}
		if n := parOf(d).cur.events; n >= batchEvents {
			t.Fatalf("a batch holds %d steps after a push, the bound is %d", n, batchEvents)
		}
	}
	if err := d.AdvanceWatermark(time.Date(2026, 7, 18, 11, 0, 0, 0, time.UTC).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if len(got) != groups {
		t.Fatalf("%d finals after the jump, want %d", len(got), groups)
	}
	// The jump's records went through chunks of at most chunkRecords: the
	// chunks kept for reuse never grew past it.
	for _, s := range parOf(d).shards {
		for len(s.free) > 0 {
			if c := <-s.free; cap(c.recs) > 2*chunkRecords {
				t.Fatalf("a chunk grew to %d records, the bound is %d", cap(c.recs), chunkRecords)
			}
		}
	}
	if !sort.StringsAreSorted(got) {
		t.Fatal("finals out of creation order")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestParallelPanic: a panic in a shard becomes the driver's ErrInternal
// (returned by a later call, the driver failed from then on), never a
// crash, and the goroutines end.
func TestParallelPanic(t *testing.T) {
	q := compile(t, testSQL)
	base := runtime.NumGoroutine()
	d, err := New(q, Config{Threads: 3, Emit: func(*changelog.Record) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	parOf(d).testStep = func(shard int, op uint64) {
		if op == 7 {
			panic("boom")
		}
	}
	var got error
	for i := 0; i < 5000 && got == nil; i++ {
		err := d.Push(fmt.Appendf(nil, `{"merchant":"m%d","amount":1,"event_time":"2026-07-18 10:00:00"}`, i))
		if err != nil && !errors.As(err, new(*EventError)) {
			got = err
		}
	}
	if got == nil {
		got = d.Close()
	}
	if !errors.Is(got, ErrInternal) || !strings.Contains(got.Error(), "boom") {
		t.Fatalf("got %v, want ErrInternal with the panic", got)
	}
	if err := d.Push(events()[0]); !errors.Is(err, ErrInternal) {
		t.Fatalf("push after the panic: %v", err)
	}
	parOf(d).stop()
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines after stop, %d before", n, base)
	}
}

// BenchmarkThreads: the standard query's shape (per key a 1-minute
// TUMBLE, count, sum, max, early every second) on 1 and 2-3 threads.
func BenchmarkThreads(b *testing.B) {
	q := compile(&testing.T{}, `CREATE SOURCE ev (g VARCHAR, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
SELECT g, count(*) AS c, sum(x) AS s, max(x) AS m FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`)
	lines := make([][]byte, 100_000)
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"g":"m%d","x":%d.25,"ts":"%s"}`, (i*7919)%10_000, i%1000, base.Add(time.Duration(i)*time.Millisecond).Format("2006-01-02 15:04:05.000"))
	}
	for _, threads := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := New(q, Config{Threads: threads, Emit: func(*changelog.Record) error { return nil }})
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range lines {
					if err := d.Push(l); err != nil {
						b.Fatal(err)
					}
				}
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/event")
		})
	}
}

// TestBlockPathReaderDecodes: the shards' goroutines decode the blocks
// between their batches, and the reader decodes the oldest block itself
// when no shard has taken it (a shard may be held: blocked on the merge,
// which only the reader runs, so waiting for it could never end). Here
// the shards are held before they take any block until the reader has
// decoded two; the jobs they then hold are stale and must change nothing:
// the changelog is one thread's.
func TestBlockPathReaderDecodes(t *testing.T) {
	q := compile(t, `CREATE SOURCE ev (g VARCHAR, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT g, count(*) AS c, sum(x) AS s FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '1' SECOND)`)
	lines := make([][]byte, 6000)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"g":"k%d","x":%d.5,"ts":"2026-07-18 10:00:%02d.%03d"}`, i%37, i%11, i/200, i%1000)
	}
	var timedOut atomic.Bool
	run := func(threads int) (string, int64) {
		var out bytes.Buffer
		d, err := New(q, Config{Threads: threads, BlockEvents: 8, Emit: func(r *changelog.Record) error {
			fmt.Fprintf(&out, "%s %s %v\n", r.Key, r.Value, r.Meta.Final)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if threads > 1 {
			if !feeding(d) {
				t.Fatal("no block path")
			}
			p := parOf(d)
			start := time.Now()
			p.testTake = func() {
				for p.hostTook.Load() < 2 {
					if time.Since(start) > 10*time.Second {
						timedOut.Store(true) // the reader never decoded: let the shards go
						return
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
		}
		for i, l := range lines {
			if err := d.Feed(l, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if parOf(d) == nil {
			return out.String(), 0
		}
		return out.String(), parOf(d).hostTook.Load()
	}
	want, _ := run(1)
	for _, threads := range []int{2, 3} {
		got, took := run(threads)
		if took < 2 || timedOut.Load() {
			t.Fatalf("%d threads: the reader decoded %d blocks (held shards released by the timeout: %v), want 2 while they were held", threads, took, timedOut.Load())
		}
		if got != want {
			t.Fatalf("%d threads: changelog differs from one thread's at %s", threads, firstDiff([]byte(got), []byte(want)))
		}
	}
}

// TestParallelCollectedWithSelfReference: a driver on several threads
// whose Emit callback reaches the driver itself (as a host's callback that
// holds its query does) is collected once the host drops it, closed or
// not: its shards and state do not outlive it. Before the merge's
// callbacks were held weakly, the driver's own cleanup kept it reachable
// for ever.
func TestParallelCollectedWithSelfReference(t *testing.T) {
	q := compile(t, testSQL)
	base := runtime.NumGoroutine()
	var collected []chan struct{}
	for i := 0; i < 4; i++ {
		type host struct {
			d *Driver
			n int
		}
		h := &host{}
		d, err := New(q, Config{Threads: 3, Emit: func(*changelog.Record) error { h.n++; _ = h.d; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		h.d = d
		done := make(chan struct{})
		runtime.AddCleanup(d, func(c chan struct{}) { close(c) }, done)
		collected = append(collected, done)
		for _, e := range events() {
			if err := d.Push(e); err != nil && !errors.As(err, new(*EventError)) {
				t.Fatal(err)
			}
		}
		if i%2 == 0 {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, done := range collected {
		for {
			runtime.GC()
			select {
			case <-done:
			case <-time.After(10 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatalf("driver %d (closed: %v) was never collected", i, i%2 == 0)
			}
			break
		}
	}
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines, %d before", n, base)
	}
}

// parOf is the driver's shards (nil when its aggregate is one operator).
func parOf(d *Driver) *par {
	if s, ok := d.agg.(*sharded); ok {
		return s.p
	}
	return nil
}

// feeding reports whether the driver's aggregate decodes Feed's records
// in blocks.
func feeding(d *Driver) bool {
	_, ok := d.feeder.(*blockFeed)
	return ok
}
