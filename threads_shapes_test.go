package ubik_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// Every shape runs on threads, and its changelog is byte for byte the one
// thread's: records, order, revisions and final markers. The inputs span
// many batches of the shards (thousands of events, out of order, with
// duplicates), the host calls EmitEarly and AdvanceWatermark between
// pushes, and half the runs restore from a checkpoint halfway.

const shapeSource = `CREATE SOURCE ev (id VARCHAR, k VARCHAR, g BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl', dedup_key = 'id', dedup_within = '1 minute');
`

var threadShapes = []struct {
	name, sql, second string
}{
	{"a view read by an EMIT CHANGES query", shapeSource + `
CREATE VIEW secs AS SELECT k, g, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n, sum(x) AS sx
  FROM ev GROUP BY k, g, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
SELECT k, TUMBLE_START(ws, INTERVAL '10' SECOND) AS w, sum(n) AS n, count(*) AS c, max(sx) AS hi
  FROM secs GROUP BY k, TUMBLE(ws, INTERVAL '10' SECOND) EMIT CHANGES`, ""},
	{"a view read by an EMIT EARLY query", shapeSource + `
CREATE VIEW secs AS SELECT k, g, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n
  FROM ev GROUP BY k, g, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
SELECT g, TUMBLE_START(ws, INTERVAL '20' SECOND) AS w, sum(n) AS n
  FROM secs GROUP BY g, TUMBLE(ws, INTERVAL '20' SECOND) EMIT EARLY EVERY INTERVAL '1' HOUR`, ""},
	{"a chain of three views regrouping", shapeSource + `
CREATE VIEW a AS SELECT k, g, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n
  FROM ev GROUP BY k, g, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW b AS SELECT g, TUMBLE_START(ws, INTERVAL '5' SECOND) AS ws, sum(n) AS n, count(*) AS c
  FROM a GROUP BY g, TUMBLE(ws, INTERVAL '5' SECOND) EMIT FINAL;
SELECT TUMBLE_START(ws, INTERVAL '30' SECOND) AS w, g % 3 AS m, sum(n) AS n, sum(c) AS c
  FROM b GROUP BY g % 3, TUMBLE(ws, INTERVAL '30' SECOND) EMIT CHANGES`, ""},
	{"a continuous query", shapeSource + `
SELECT k, count(*) AS n, sum(x) AS sx, max(ts) AS last FROM ev GROUP BY k`, ""},
	{"a temporal join", shapeSource + `
CREATE TABLE rates (g BIGINT, rate DOUBLE, ts TIMESTAMP, PRIMARY KEY (g) NOT ENFORCED, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '5' SECOND) AS w, sum(e.x * r.rate) AS v, count(*) AS n
  FROM ev e JOIN rates FOR SYSTEM_TIME AS OF e.ts AS r ON e.g = r.g
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '5' SECOND) EMIT CHANGES`, "rates"},
	{"an interval join of two streams", `CREATE SOURCE ev (id VARCHAR, k VARCHAR, g BIGINT, x DOUBLE, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl');
CREATE SOURCE clicks (k VARCHAR, c BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl');
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '5' SECOND) AS w, count(*) AS n, sum(c.c) AS sc
  FROM ev e JOIN clicks c ON e.k = c.k AND c.ts BETWEEN e.ts - INTERVAL '2' SECOND AND e.ts + INTERVAL '2' SECOND
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '5' SECOND) EMIT CHANGES`, "clicks"},
	{"a join of two views", shapeSource + `
CREATE VIEW a AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n
  FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
CREATE VIEW b AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, max(x) AS hi
  FROM ev WHERE g % 2 = 0 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
SELECT a.k, TUMBLE_START(a.ws, INTERVAL '10' SECOND) AS w, sum(a.n) AS n, max(b.hi) AS hi
  FROM a JOIN b ON a.k = b.k AND b.ws BETWEEN a.ws - INTERVAL '2' SECOND AND a.ws + INTERVAL '2' SECOND
  GROUP BY a.k, TUMBLE(a.ws, INTERVAL '10' SECOND) EMIT CHANGES`, ""},
	// The host reads the two sources' watermarks after every record, so
	// each is decoded at its push, not in blocks on the shards.
	{"a join of two views over two sources", `CREATE SOURCE ev (id VARCHAR, k VARCHAR, g BIGINT, x DOUBLE, j JSON, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl');
CREATE SOURCE clicks (k VARCHAR, c BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl');
CREATE VIEW a AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n, sum(x) AS sx, max(j) AS jx
  FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
CREATE VIEW b AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, sum(c) AS c
  FROM clicks GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
SELECT a.k, TUMBLE_START(a.ws, INTERVAL '10' SECOND) AS w, sum(a.n) AS n, max(a.sx) AS sx, max(a.jx) AS jx, sum(b.c) AS c
  FROM a JOIN b ON a.k = b.k AND b.ws BETWEEN a.ws - INTERVAL '2' SECOND AND a.ws + INTERVAL '2' SECOND
  GROUP BY a.k, TUMBLE(a.ws, INTERVAL '10' SECOND) EMIT CHANGES`, "clicks"},
	// One group per window at the top: only the views run on the shards,
	// so the query's thread count says they do.
	{"a join of two views counted per window", shapeSource + `
CREATE VIEW a AS SELECT k, g, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, count(*) AS n
  FROM ev GROUP BY k, g, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
CREATE VIEW b AS SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, max(x) AS hi
  FROM ev WHERE x > 0 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) EMIT FINAL;
SELECT TUMBLE_START(a.ws, INTERVAL '4' SECOND) AS w, sum(a.n) AS n, max(b.hi) AS hi, count(*) AS c
  FROM a JOIN b ON a.k = b.k AND b.ws BETWEEN a.ws - INTERVAL '2' SECOND AND a.ws + INTERVAL '2' SECOND
  GROUP BY TUMBLE(a.ws, INTERVAL '4' SECOND) EMIT CHANGES`, ""},
}

// shapeInput returns the events (out of order within a few seconds, a
// copy now and then) and the second input's rows, placed by event index.
func shapeInput(seed uint64, n int, second string) (events []string, rows map[int][]string) {
	r := rand.New(rand.NewPCG(seed, 7))
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	rows = map[int][]string{}
	for i := range n {
		t := base.Add(time.Duration(i)*20*time.Millisecond - time.Duration(r.IntN(2500))*time.Millisecond)
		// A key now and then with an escape, which the decoder unescapes
		// into its own scratch.
		k := fmt.Sprintf("k%d", r.IntN(40))
		if i%7 == 0 {
			k = `k\u00e9\"` + k[1:]
		}
		// A JSON column's canonical text is in the decoder's scratch too.
		ev := fmt.Sprintf(`{"id":"e%d","k":"%s","g":%d,"x":%d.5,"j":{"v": %d},"ts":%q}`, i, k, r.IntN(9), r.IntN(100)-50, r.IntN(1000), t.Format(time.RFC3339Nano))
		events = append(events, ev)
		if r.IntN(400) == 0 {
			events = append(events, `{"id": "bad", "ts": "not a time"}`) // malformed
		}
		if r.IntN(50) == 0 {
			events = append(events, ev) // a copy
		}
		switch second {
		case "rates":
			if i%25 == 0 {
				rows[len(events)] = append(rows[len(events)], fmt.Sprintf(`{"g":%d,"rate":%d.25,"ts":%q}`, r.IntN(9), r.IntN(5), t.Format(time.RFC3339Nano)))
			}
		case "clicks":
			if r.IntN(3) == 0 {
				row := fmt.Sprintf(`{"k":"k%d","c":%d,"ts":%q}`, r.IntN(40), r.IntN(10), t.Format(time.RFC3339Nano))
				if r.IntN(60) == 0 {
					row = `{"k": "bad", "ts": null}` // malformed
				}
				rows[len(events)] = append(rows[len(events)], row)
			}
		}
	}
	return events, rows
}

type shapeRun struct {
	threads int
	restore bool // checkpoint, then continue in a new query from the checkpoint, halfway
	feed    bool // Feed (decoded in blocks on the shards) instead of Push
}

func runShape(t *testing.T, sql, second string, events []string, rows map[int][]string, run shapeRun) (recs []string, threads int) {
	t.Helper()
	var bad []string
	defer func() { recs = append(recs, bad...) }()
	opts := ubik.DefaultOptions()
	opts.Now = func() time.Time { return time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC) }
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	qo := ubik.QueryOptions{Name: "query", Threads: run.threads, BlockEvents: 97, OnRecord: func(r changelog.Record) error {
		recs = append(recs, fmt.Sprintf("%s %s final=%v rev=%d", r.Key, r.Value, r.Meta.Final, r.Meta.Revision))
		return nil
	}, OnEventError: func(tag int64, _ []byte, err *ubik.EventError) {
		// Outcomes after the records, in their own order: on several
		// threads a record may reach OnRecord after a later event's
		// outcome.
		bad = append(bad, fmt.Sprintf("event %d: %v", tag, err))
	}}
	q, err := eng.Start(sql, qo)
	if err != nil {
		t.Fatal(err)
	}
	threads = q.Threads()
	for i, ev := range events {
		for _, row := range rows[i] {
			if err := q.PushInput(second, []byte(row)); err != nil {
				var ee *ubik.EventError
				if !errors.As(err, &ee) {
					t.Fatalf("%s row %s: %v", second, row, err)
				}
				bad = append(bad, fmt.Sprintf("%s row before event %d: %v", second, i, ee))
			}
		}
		var err error
		if run.feed {
			err = q.Feed([]byte(ev), int64(i))
		} else if err = q.Push([]byte(ev)); err != nil {
			var ee *ubik.EventError
			if errors.As(err, &ee) {
				qo.OnEventError(int64(i), nil, ee) // as Feed reports it
				err = nil
			}
		}
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		switch {
		case i%997 == 996:
			if err := q.EmitEarly(); err != nil {
				t.Fatal(err)
			}
		case run.restore && i == len(events)/2:
			state := map[string][]byte{}
			if err := q.Checkpoint(true, nil, func(k, v []byte) error { state[string(k)] = append([]byte(nil), v...); return nil }); err != nil {
				t.Fatal(err)
			}
			if q, err = eng.Start(sql, qo); err != nil {
				t.Fatal(err)
			}
			for k, v := range state {
				if _, err := q.Restore([]byte(k), v); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.FinishRestore(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return recs, threads
}

func TestThreadsEveryShape(t *testing.T) {
	for i, sh := range threadShapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			events, rows := shapeInput(uint64(i), 6000, sh.second)
			one, _ := runShape(t, sh.sql, sh.second, events, rows, shapeRun{threads: 1})
			if len(one) < 50 {
				t.Fatalf("only %d records: the shape proves nothing", len(one))
			}
			for _, run := range []shapeRun{{threads: 2}, {threads: 3, restore: true}, {threads: 4}, {threads: 2, feed: true}, {threads: 3, feed: true, restore: true}} {
				many, threads := runShape(t, sh.sql, sh.second, events, rows, run)
				if threads != run.threads {
					t.Errorf("threads=%d: the query runs on %d threads", run.threads, threads)
				}
				for j := range max(len(one), len(many)) {
					if j >= len(one) || j >= len(many) || one[j] != many[j] {
						a, b := "(none)", "(none)"
						if j < len(one) {
							a = one[j]
						}
						if j < len(many) {
							b = many[j]
						}
						t.Fatalf("threads=%d restore=%v feed=%v: record %d of %d/%d differs:\n one: %s\nmany: %s", run.threads, run.restore, run.feed, j, len(one), len(many), a, b)
					}
				}
			}
		})
	}
}
