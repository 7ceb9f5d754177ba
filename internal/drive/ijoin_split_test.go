package drive

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// A join of two views over two sources, keyed by cells at the edges of
// the join's equality (NULL, NaN, -0.0 and 0.0, infinities, strings with
// escapes), as q8 joins its views: on threads the join runs split by key
// (ijoin_split.go).
const splitScript = `CREATE SOURCE p (id BIGINT, d DOUBLE, s VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE SOURCE a (seller BIGINT, d DOUBLE, s VARCHAR, x BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE VIEW vp AS SELECT d, s, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n, max(id) AS hi
  FROM p GROUP BY d, s, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW va AS SELECT seller % 5 AS g, s, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, max(d) AS d, sum(x) AS x
  FROM a GROUP BY seller % 5, s, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT l.s, TUMBLE_START(l.ws, INTERVAL '4' SECOND) AS w, count(*) AS c, sum(r.x) AS x, max(l.hi) AS hi, sum(r.g) AS g
  FROM vp l JOIN va r ON l.d = r.d AND l.s = r.s AND r.ws BETWEEN l.ws - INTERVAL '1' SECOND AND l.ws + INTERVAL '2' SECOND
  GROUP BY l.s, TUMBLE(l.ws, INTERVAL '4' SECOND) EMIT CHANGES;`

var (
	splitDoubles = []string{"null", `"NaN"`, `"-NaN"`, "0", "-0.0", "1.5", `"Infinity"`, `"-Infinity"`}
	splitStrings = []string{"null", `"k\u00e9\""`, `"a\\b"`, `"tab\t"`, `""`, `"x"`}
)

// splitRec is a record of one of the two sources: second for a's.
type splitRec struct {
	second bool
	raw    string
}

// push gives the record to g as its source's: a's as the second
// input's (PushTable), p's as the first's.
func (r splitRec) push(g *Graph) error {
	if r.second {
		return g.PushTable([]byte(r.raw))
	}
	return g.Push([]byte(r.raw))
}

// splitInput is n records of the two sources in one order, their times
// out of order by up to 1.5s, their keys from splitDoubles and splitStrings.
func splitInput(seed uint64, n int) []splitRec {
	r := rand.New(rand.NewPCG(seed, 11))
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var out []splitRec
	for i := range n {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		d, s := splitDoubles[r.IntN(len(splitDoubles))], splitStrings[r.IntN(len(splitStrings))]
		if r.IntN(2) == 0 {
			out = append(out, splitRec{false, fmt.Sprintf(`{"id":%d,"d":%s,"s":%s,"ts":%q}`, i, d, s, ts)})
		} else {
			out = append(out, splitRec{true, fmt.Sprintf(`{"seller":%d,"d":%s,"s":%s,"x":%d,"ts":%q}`, r.IntN(50), d, s, r.IntN(100), ts)})
		}
	}
	return out
}

// runSplit runs the join on threads, checkpointing at the record at (if
// at > 0) and going on from the checkpoint in a graph on then threads; it
// returns the changelog's bytes.
func runSplit(t *testing.T, q *plan.Query, in []splitRec, threads, at, then int) []byte {
	t.Helper()
	var out bytes.Buffer
	emit := func(r *changelog.Record) error {
		fmt.Fprintf(&out, "%s\t%s\t%v %d\n", r.Key, r.Value, r.Meta.Final, r.Meta.Revision)
		return nil
	}
	start := func(threads int) *Graph {
		g, err := NewGraph(q, nil, Config{Threads: threads, Emit: emit}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		j, ok := g.primary.d.first.(*intervalJoin)
		if !ok || (j.sp != nil) != (threads > 1) || j.sp != nil && len(j.sp.workers) != threads-1 {
			t.Fatalf("on %d threads the join of the views runs split: %v", threads, ok && j.sp != nil)
		}
		return g
	}
	g := start(threads)
	for i, rec := range in {
		if err := rec.push(g); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if i == at && at > 0 {
			state := map[string][]byte{}
			if err := g.Checkpoint(true, nil, func(k, v []byte) error { state[string(k)] = bytes.Clone(v); return nil }); err != nil {
				t.Fatal(err)
			}
			g = start(then) // the old one is dropped unclosed
			for k, v := range state {
				if _, err := g.Restore([]byte(k), v); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.FinishRestore(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.EndFirst(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestJoinOfViewsSplit: the join of two views on 1, 2 and 4 threads gives
// the one thread's changelog byte for byte, and so does a run restored
// from a checkpoint taken on another number of threads; the instances'
// goroutines end with the graph, closed or dropped.
func TestJoinOfViewsSplit(t *testing.T) {
	q := scriptQueries(t, splitScript)["j"]
	base := runtime.NumGoroutine()
	for seed := range uint64(3) {
		in := splitInput(seed, 3000)
		want := runSplit(t, q, in, 1, 0, 0)
		if n := bytes.Count(want, []byte("\n")); n < 200 {
			t.Fatalf("seed %d: %d records: the join joins too little", seed, n)
		}
		for _, c := range [][3]int{{2, 0, 0}, {4, 0, 0}, {1, 1500, 2}, {2, 1100, 1}, {2, 2000, 4}, {4, 700, 2}, {4, 1800, 1}} {
			if got := runSplit(t, q, in, c[0], c[1], c[2]); !bytes.Equal(got, want) {
				t.Fatalf("seed %d, %d threads, checkpoint at %d onto %d threads: %s", seed, c[0], c[1], c[2], firstDiff(got, want))
			}
		}
	}
	waitGoroutines(t, base)
}

// TestJoinOfViewsSplitPanic: a panic in a join instance is the graph's
// ErrInternal, not a crash or a hang, and its goroutines end with Close.
func TestJoinOfViewsSplitPanic(t *testing.T) {
	q := scriptQueries(t, splitScript)["j"]
	base := runtime.NumGoroutine()
	g, err := NewGraph(q, nil, Config{Threads: 2, Emit: func(*changelog.Record) error { return nil }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := splitInput(1, 3000)
	var got error
	for i, rec := range in {
		if i == 500 {
			// Idle after a flush: the instances take nothing until the
			// next batch, whose first row or watermark panics.
			if err := g.Flush(); err != nil {
				t.Fatal(err)
			}
			for _, w := range g.primary.d.first.(*intervalJoin).sp.workers {
				w.j = nil
			}
		}
		if got = rec.push(g); got != nil {
			break
		}
	}
	if got == nil {
		got = g.Close()
	}
	if !errors.Is(got, ErrInternal) {
		t.Fatalf("got %v, want ErrInternal", got)
	}
	_ = g.Close()
	waitGoroutines(t, base)
}

// TestJoinOfViewsSplitBound: the bound on held rows (Config.JoinBuffer)
// stops the join on threads at the view row, and with the words, of one
// thread (the host hears of it later: on threads the views deliver their
// rows batches after the records that made them).
func TestJoinOfViewsSplitBound(t *testing.T) {
	q := scriptQueries(t, splitScript)["j"]
	in := splitInput(2, 3000)
	stop := func(threads int) (int, error) {
		g, err := NewGraph(q, nil, Config{Threads: threads, JoinBuffer: 40, Emit: func(*changelog.Record) error { return nil }}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for i, rec := range in {
			if err := rec.push(g); err != nil {
				return i, err
			}
		}
		return len(in), g.Flush()
	}
	at, want := stop(1)
	if !errors.Is(want, ErrIntervalJoinFull) {
		t.Fatalf("one thread: record %d: %v, want ErrIntervalJoinFull", at, want)
	}
	for _, threads := range []int{2, 4} {
		if i, err := stop(threads); i < at || err == nil || err.Error() != want.Error() {
			t.Fatalf("%d threads: record %d: %v; one thread: record %d: %v", threads, i, err, at, want)
		}
	}
}

// waitGoroutines waits up to ten seconds for the goroutine count to fall
// back to base (the count before a test started graphs: their instances'
// goroutines end with them, closed or dropped and collected), and fails
// the test if it does not.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines, %d before", n, base)
	}
}
