package ubik_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// TestThreadedQueryIsCollected: a query on several threads (a single
// query, and a query over a view) whose OnRecord callback holds the query
// itself, as a host's usually does, is freed once the host drops it,
// closed or not: its shards' goroutines end and its state is collected.
func TestThreadedQueryIsCollected(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	const view = `CREATE SOURCE events (merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP, WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');
CREATE VIEW per_minute AS SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS ws, sum(amount) AS total
  FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT merchant, sum(total) AS total FROM per_minute GROUP BY merchant`
	evs := standardEvents(3000)
	base := runtime.NumGoroutine()
	var freed []chan struct{}
	for i, script := range []string{standardQuery, standardQuery, view, view} {
		type host struct {
			q *ubik.Query
			n int
		}
		h := &host{}
		opts := ubik.QueryOptions{Threads: 3, OnRecord: func(changelog.Record) error { h.n++; _ = h.q.Threads(); return nil }}
		if script == view {
			opts.Name = "q"
		}
		q, err := eng.Start(script, opts)
		if err != nil {
			t.Fatal(err)
		}
		if q.Threads() != 3 {
			t.Fatalf("query %d runs on %d threads, want 3", i, q.Threads())
		}
		h.q = q
		done := make(chan struct{})
		runtime.AddCleanup(q, func(c chan struct{}) { close(c) }, done)
		freed = append(freed, done)
		for _, e := range evs {
			if err := q.Push(e); err != nil {
				t.Fatal(err)
			}
		}
		if i%2 == 0 {
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, done := range freed {
		for wait := true; wait; {
			runtime.GC()
			select {
			case <-done:
				wait = false
			case <-time.After(10 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatalf("query %d (closed: %v) was never freed", i, i%2 == 0)
				}
			}
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
