package ubik_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
)

// TestComputedColumnsInProcess: a source declared with Engine.Exec that has
// a computed event time takes events through Push (JSON) and PushRow
// (the physical cells, or every cell with the computed ones NULL), and
// both give the records the computed column implies.
func TestComputedColumnsInProcess(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Exec(`CREATE SOURCE clicks (k VARCHAR, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), at TIMESTAMP(0),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)`); err != nil {
		t.Fatal(err)
	}
	var recs []string
	q, err := eng.Start(`SELECT k, window_start, count(*) AS n, max(ts) AS last, max(at) AS at
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start`,
		ubik.QueryOptions{OnRecord: func(r changelog.Record) error { recs = append(recs, string(r.Value)); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	base := int64(1784368800000) // 2026-07-18 10:00:00 in ms
	if err := q.Push([]byte(`{"k":"a","ms":1784368800250,"at":"2026-07-18 10:00:00.6"}`)); err != nil {
		t.Fatal(err)
	}
	// Physical cells only: k, ms, at.
	if err := q.PushRow([]ubik.Value{ubik.Varchar("a"), ubik.BigInt(base + 1500), ubik.TimestampMicros(1784368800_400000)}); err != nil {
		t.Fatal(err)
	}
	// Every cell, the computed one NULL.
	if err := q.PushRow([]ubik.Value{ubik.Varchar("a"), ubik.BigInt(base + 2000), ubik.Null(), ubik.Null()}); err != nil {
		t.Fatal(err)
	}
	// A computed cell given a value, a wrong width, a NULL event time.
	for _, row := range [][]ubik.Value{
		{ubik.Varchar("a"), ubik.BigInt(base), ubik.TimestampMicros(0), ubik.Null()},
		{ubik.Varchar("a")},
		{ubik.Varchar("a"), ubik.Null(), ubik.Null()},
	} {
		err := q.PushRow(row)
		if err == nil || !errors.Is(err, exec.ErrMalformed) {
			t.Errorf("PushRow(%v): %v, want a malformed event", row, err)
		}
	}
	if err := q.AdvanceWatermark(time.UnixMilli(base + 60_000)); err != nil {
		t.Fatal(err)
	}
	want := `{"k": "a", "window_start": "2026-07-18 10:00:00", "n": 3, "last": "2026-07-18 10:00:02", "at": "2026-07-18 10:00:01"}`
	if strings.Join(recs, "\n") != want {
		t.Errorf("records:\n%s\nwant\n%s", strings.Join(recs, "\n"), want)
	}
	if st := q.Stats(); st.EventsIn != 6 || st.Malformed != 3 {
		t.Errorf("events %d, malformed %d; want 6 and 3", st.EventsIn, st.Malformed)
	}
}

// TestComputedColumnsConcurrentQueries: the queries of one engine share a
// source declared with Exec, and so its compiled computed columns; queries
// on different goroutines evaluate them at once (run with -race), and each
// gets every result.
func TestComputedColumnsConcurrentQueries(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Exec(`CREATE SOURCE ev (meta JSON, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), k AS upper(meta->>'k'), day AS strftime(ts, '%Y-%m-%d'),
  WATERMARK FOR ts AS ts)`); err != nil {
		t.Fatal(err)
	}
	const queries, events = 4, 2000
	errs := make(chan error, queries)
	results := make([][]string, queries)
	for i := 0; i < queries; i++ {
		go func() {
			q, err := eng.Start("SELECT k, day, count(*) AS n FROM ev GROUP BY k, day",
				ubik.QueryOptions{OnRecord: func(r changelog.Record) error { results[i] = append(results[i], string(r.Value)); return nil }})
			if err != nil {
				errs <- err
				return
			}
			for e := 0; e < events; e++ {
				if err := q.Push([]byte(`{"meta":{"k":"k` + string(rune('a'+e%3)) + `"},"ms":1784368800123}`)); err != nil {
					errs <- err
					return
				}
			}
			errs <- q.Close()
		}()
	}
	for i := 0; i < queries; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < queries; i++ {
		last := results[i][len(results[i])-1]
		if len(results[i]) != events || !strings.Contains(last, `"day": "2026-07-18"`) || !strings.Contains(last, `{"k": "KB", "day": "2026-07-18", "n": 667}`) {
			t.Errorf("query %d: %d records, last %s", i, len(results[i]), last)
		}
	}
}
