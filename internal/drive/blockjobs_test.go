package drive

import (
	"fmt"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
)

// TestBlockPathJobsFullOfStale: every block's batch renders more records
// than a shard may hand over before the merge takes them (a HOP of ten
// windows, a change record per window and event), so the shards wait for
// the merge, which only the reader runs, while the reader decodes the
// blocks no shard took. The jobs of those blocks stay in the queue, stale,
// until a shard drains them; a reader that then waits for room in the
// queue waits for ever (it did: q5 on two threads stopped, the reader
// blocked handing a block over, both shards blocked on the merge). The
// run must end, with one thread's changelog.
func TestBlockPathJobsFullOfStale(t *testing.T) {
	q := compile(t, `CREATE SOURCE ev (g VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT g, count(*) AS c FROM ev GROUP BY g, HOP(ts, INTERVAL '1' SECOND, INTERVAL '10' SECOND) EMIT CHANGES`)
	lines := make([][]byte, 60_000)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"g":"k%d","ts":"2026-07-18 10:%02d:%02d.%03d"}`, i%5003, i/6000, i/100%60, i%1000)
	}
	run := func(threads int) (uint64, int64, error) {
		var sum uint64
		d, err := New(q, Config{Threads: threads, BlockEvents: 1024, Emit: func(r *changelog.Record) error {
			for _, c := range r.Key {
				sum = sum*31 + uint64(c)
			}
			for _, c := range r.Value {
				sum = sum*31 + uint64(c)
			}
			return nil
		}})
		if err != nil {
			return 0, 0, err
		}
		if threads > 1 && !feeding(d) {
			t.Fatal("no block path")
		}
		for i, l := range lines {
			if err := d.Feed(l, int64(i)); err != nil {
				return 0, 0, err
			}
		}
		if err := d.Close(); err != nil {
			return 0, 0, err
		}
		var took int64
		if p := parOf(d); p != nil {
			took = p.hostTook.Load()
		}
		return sum, took, nil
	}
	want, _, err := run(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{2, 3, 4} {
		type result struct {
			sum  uint64
			took int64
			err  error
		}
		done := make(chan result, 1)
		go func() {
			sum, took, err := run(threads)
			done <- result{sum, took, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.sum != want {
				t.Fatalf("%d threads: the changelog differs from one thread's", threads)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d threads: the run did not end in 20 s (the reader and the shards wait on each other)", threads)
		}
	}
}
