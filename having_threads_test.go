package ubik_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// A HAVING (or a SELECT) that fails to render a record, or an aggregate
// that fails to fold an event, skips it and is counted on any number of
// threads; each fed event's error reaches OnEventError as on one thread
// (its tag, its bytes, the same *EventError, in input order among the
// malformed events and the events WHERE failed for), and a call that is
// not a push returns the error of its own records: the same outcomes, the
// same records, the same counters on 1, 2 and 4 threads.

var havingQueries = []struct{ name, sql, second string }{
	{"windows finalized by later events", `SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n, sum(v) AS sv
  FROM ev WHERE 1000000000000000000 * g > 0 GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)
  HAVING 1000000000000000000 * count(*) > 0`, ""},
	{"change records", `SELECT k, TUMBLE_START(ts, INTERVAL '2' SECOND) AS w, count(*) AS n
  FROM ev WHERE 1000000000000000000 * g > 0 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND)
  HAVING 1000000000000000000 * count(*) > 0 EMIT CHANGES`, ""},
	{"a SELECT and a sum that overflow", `SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, 1000000000000000000 * count(*) AS big, sum(v) AS sv
  FROM ev WHERE 1000000000000000000 * g > 0 GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)`, ""},
	{"sessions", `SELECT k, SESSION_START(ts, INTERVAL '300' MILLISECOND) AS s, count(*) AS n
  FROM ev WHERE 1000000000000000000 * g > 0 GROUP BY k, SESSION(ts, INTERVAL '300' MILLISECOND)
  HAVING 1000000000000000000 * count(*) > 0`, ""},
	{"a view's reader", `CREATE VIEW per AS SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS w, count(*) AS n, sum(v) AS sv
  FROM ev WHERE 1000000000000000000 * g > 0 GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);
CREATE VIEW query AS SELECT k, TUMBLE_START(w, INTERVAL '2' SECOND) AS w2, max(n) AS n, count(*) AS c FROM per GROUP BY k, TUMBLE(w, INTERVAL '2' SECOND)
  HAVING 1000000000000000000 * max(n) > 0`, ""},
	{"behind a temporal join", `CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '1' SECOND) AS w, count(*) AS n, sum(e.v * p.p) AS sv
  FROM ev e LEFT JOIN t FOR SYSTEM_TIME AS OF e.ts AS p ON e.k = p.k WHERE 1000000000000000000 * e.g > 0
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '1' SECOND) HAVING 1000000000000000000 * count(*) > 0`, "t"},
	{"behind an interval join", `CREATE SOURCE c (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '1' SECOND) AS w, count(*) AS n, sum(e.v) AS sv
  FROM ev e JOIN c ON c.k = e.k AND c.ts BETWEEN e.ts AND e.ts + INTERVAL '999' MILLISECOND WHERE 1000000000000000000 * e.g > 0
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '1' SECOND) HAVING 1000000000000000000 * count(*) > 0`, "c"},
}

// havingSecond is the rows of a join's second input (its source named
// second): a version of each key of havingInput before its first event,
// or one row of each key at every whole second of it (each event joins
// the one in its second).
func havingSecond(second string) []string {
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "crowded"}
	var out []string
	for s := -1; s <= 242; s++ {
		for i, k := range keys {
			ts := base.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano)
			switch {
			case second == "c":
				out = append(out, fmt.Sprintf(`{"k":%q,"ts":%q}`, k, ts))
			case s == -1:
				out = append(out, fmt.Sprintf(`{"k":%q,"p":%d,"vf":%q}`, k, i+1, ts))
			}
		}
	}
	return out
}

// havingInput is events over a few minutes, each key's windows now and
// then crowded past nine events (the HAVINGs overflow), with malformed
// lines, events WHERE fails for (g of 10), and sums that overflow.
func havingInput(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 3))
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var out []string
	for i := range n {
		t := base.Add(time.Duration(i)*40*time.Millisecond - time.Duration(r.IntN(300))*time.Millisecond)
		k, g, v := fmt.Sprintf("k%d", r.IntN(6)), 1+r.IntN(8), int64(r.IntN(100))
		switch {
		case i%97 == 13:
			k = "crowded" // ten and more in a window
		case r.IntN(150) == 0:
			g = 10
		case r.IntN(300) == 0:
			v = 1 << 62
		}
		out = append(out, fmt.Sprintf(`{"k":%q,"g":%d,"v":%d,"ts":%q}`, k, g, v, t.Format(time.RFC3339Nano)))
		if r.IntN(200) == 0 {
			out = append(out, `{"k": "bad", "ts": "not a time"}`)
		}
	}
	return out
}

// havingRun feeds events to sql on threads (the watermark advanced and
// the early emission forced midway) and returns what the host saw.
func havingRun(t *testing.T, sql, second string, events []string, threads int, csv bool) (seen []string, stats ubik.Stats) {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var recs, outcomes []string
	format := "'jsonl'"
	if csv {
		format = "'csv', header = 'false'"
	}
	q, err := eng.Start(`CREATE SOURCE ev (k VARCHAR, g BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = `+format+`);
`+sql, ubik.QueryOptions{Name: "query", Threads: threads, BlockEvents: 97,
		OnRecord: func(r changelog.Record) error {
			recs = append(recs, fmt.Sprintf("%s %s final=%v rev=%d", r.Key, r.Value, r.Meta.Final, r.Meta.Revision))
			return nil
		},
		OnEventError: func(tag int64, event []byte, err *ubik.EventError) {
			outcomes = append(outcomes, fmt.Sprintf("line %d %s: %v", tag, event, err))
		}})
	if err != nil {
		t.Fatal(err)
	}
	if q.Threads() != threads {
		t.Fatalf("the query runs on %d threads, not %d", q.Threads(), threads)
	}
	calls := func(what string, err error) { outcomes = append(outcomes, fmt.Sprintf("%s: %v", what, err)) }
	if second != "" {
		// The second input first, whole: every event joins as it is fed.
		for _, row := range havingSecond(second) {
			if err := q.PushInput(second, []byte(row)); err != nil {
				t.Fatal(err)
			}
		}
		calls("end "+second, q.EndInput(second))
	}
	for i, ev := range events {
		if csv {
			ev = csvOf(ev)
		}
		if err := q.Feed([]byte(ev), int64(i+1)); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if i == len(events)/2 {
			// Past every open window but the last few seconds'.
			calls("advance", q.AdvanceWatermark(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*40*time.Millisecond+time.Second)))
		}
	}
	calls("emit early", q.EmitEarly())
	calls("close", q.Close())
	st := q.Stats()
	st.LatencyP50, st.LatencyP99, st.LatencyMax, st.LatencyCount, st.LiveGroupsPeak, st.StateBytesPeak = 0, 0, 0, 0, 0, 0
	return append(recs, outcomes...), st
}

func TestHavingFailsOnEveryThreadCount(t *testing.T) {
	for i, c := range havingQueries {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			events := havingInput(uint64(i), 6000)
			// CSV is decoded one by one by the host's goroutine, JSON
			// lines in blocks on the shards'.
			for _, csv := range []bool{false, true} {
				havingEveryThreads(t, c.sql, c.second, events, csv)
			}
		})
	}
}

func havingEveryThreads(t *testing.T, sql, second string, events []string, csv bool) {
	one, st1 := havingRun(t, sql, second, events, 1, csv)
	if st1.EvalErrors < 20 || st1.Malformed == 0 || st1.RecordsOut < 100 {
		t.Fatalf("one thread: %+v: the input proves nothing", st1)
	}
	n := 0
	for _, s := range one {
		if s[:4] == "line" && strings.Contains(s, "Overflow") {
			n++
		}
	}
	if n < 20 {
		t.Fatalf("one thread reported %d events that failed to evaluate: the input proves nothing", n)
	}
	for _, threads := range []int{2, 4} {
		many, st := havingRun(t, sql, second, events, threads, csv)
		if st != st1 {
			t.Errorf("csv=%v threads=%d: stats\n%+v\none thread's:\n%+v", csv, threads, st, st1)
		}
		if j := havingDiff(one, many); j >= 0 {
			t.Fatalf("csv=%v threads=%d: line %d of %d/%d differs:\n one: %s\nmany: %s", csv, threads, j, len(one), len(many), lineAt(one, j), lineAt(many, j))
		}
	}
}

// csvOf is a CSV line of an event of havingInput (k,g,v,ts); a malformed
// one stays malformed.
func csvOf(ev string) string {
	var e struct {
		K    string
		G, V int64
		TS   string
	}
	if json.Unmarshal([]byte(ev), &e) != nil || e.G == 0 {
		return "bad"
	}
	return fmt.Sprintf("%s,%d,%d,%s", e.K, e.G, e.V, e.TS)
}

func havingDiff(a, b []string) int {
	if slices.Equal(a, b) {
		return -1
	}
	for j := range max(len(a), len(b)) {
		if lineAt(a, j) != lineAt(b, j) {
			return j
		}
	}
	return -1
}

func lineAt(s []string, j int) string {
	if j < len(s) {
		return s[j]
	}
	return "(none)"
}

// TestJoinTableErrorsStayTheTables: a temporal join's table push that
// releases waiting events, whose rows finalize a window that fails its
// HAVING, returns the window's error on one thread; on several threads
// the window is rendered batches later and its error is returned by a
// later table push, never by a stream push (whose errors are its own
// events').
func TestJoinTableErrorsStayTheTables(t *testing.T) {
	const sql = `CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
SELECT e.k, TUMBLE_START(e.ts, INTERVAL '1' SECOND) AS w, count(*) AS n FROM ev e LEFT JOIN t FOR SYSTEM_TIME AS OF e.ts AS p ON e.k = p.k
  GROUP BY e.k, TUMBLE(e.ts, INTERVAL '1' SECOND) HAVING 1000000000000000000 * count(*) > 0`
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	var one []string
	for _, threads := range []int{1, 2} {
		eng, err := ubik.Open(ubik.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		q, err := eng.Start(sql, ubik.QueryOptions{Threads: threads, OnRecord: func(changelog.Record) error { return nil }})
		if err != nil || q.Threads() != threads {
			t.Fatalf("%v, %d threads", err, q.Threads())
		}
		var table []string
		for r := range 3000 {
			ts := base.Add(time.Duration(r) * time.Second).Format(time.RFC3339Nano)
			for range 12 { // they wait for the table; their window fails
				if err := q.Push(fmt.Appendf(nil, `{"k":"a","ts":%q}`, ts)); err != nil {
					t.Fatalf("%d threads: a stream push returned %v", threads, err)
				}
			}
			next := base.Add(time.Duration(r+1) * time.Second).Format(time.RFC3339Nano)
			if err := q.PushTable(fmt.Appendf(nil, `{"k":"a","p":1,"vf":%q}`, next)); err != nil {
				table = append(table, err.Error())
			}
		}
		if threads == 1 {
			one = table
		}
		// One error per push: a push whose own window's error is merged
		// during it leaves an earlier one waiting, and those still
		// waiting at Close are counted only.
		if len(table) < len(one)*9/10 || len(one) < 2900 || !strings.Contains(table[0], "HAVING") {
			t.Fatalf("%d threads: %d table pushes returned an error, %d on one thread (%v)", threads, len(table), len(one), table[:min(len(table), 1)])
		}
		q.Close()
	}
}
