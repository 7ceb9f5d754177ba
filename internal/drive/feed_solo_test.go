package drive

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestSoloFeedIsFeed: a query on one thread fed in blocks (soloFeed) gives
// the host what it gives fed record by record: the same records, the same
// outcomes (tag, record, sequence number, error text) in the same order,
// and exact counters after every call, whatever the calls between the
// feeds (stats, a pushed event, a watermark, a checkpoint, a line too
// long). The events hold the cells a copy could get wrong: strings the
// decoder unescapes (which it keeps in its own buffer, not the record),
// NaN, infinities, -0.0 and NULL keys, malformed lines and a HAVING that
// fails for some groups.
func TestSoloFeedIsFeed(t *testing.T) {
	q := compile(t, `CREATE SOURCE s (k VARCHAR, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n, sum(v) AS s, max(k) AS mk FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) HAVING count(*) * 4611686018427387904 > 0;`)
	keys := []string{`"a\"b"`, `"\u00e9\\n"`, `null`, `"plain"`, `"tab\there"`, `"\ud83d\ude00"`}
	vals := []string{`1.5`, `"NaN"`, `"-Infinity"`, `-0.0`, `null`, `2`}
	var lines []string
	for i := range 700 {
		switch {
		case i%97 == 13:
			lines = append(lines, `{"k": "broken"`)
		case i%131 == 7:
			lines = append(lines, `{"k": "x", "v": 1}`) // no event time
		default:
			lines = append(lines, fmt.Sprintf(`{"k": %s, "v": %s, "ts": "2026-07-18 10:00:%02d.%03d"}`, keys[i%len(keys)], vals[i/3%len(vals)], i/12%60, i%1000))
		}
	}
	want := soloTrace(t, q, lines, true)
	got := soloTrace(t, q, lines, false)
	if got != want {
		t.Fatalf("fed in blocks:\n%s\nrecord by record:\n%s", got, want)
	}
	for _, s := range []string{"error at 14", "HAVING", `"a\"b"`, "seq="} {
		if !strings.Contains(want, s) {
			t.Fatalf("the trace lacks %q:\n%s", s, want)
		}
	}
}

// TestSoloFeedComputedColumns: a source with computed columns decodes
// into the deriver's row, not the block's (soloFeed.keep): fed in blocks,
// the host sees what it sees record by record, the computed strings
// (upper of an unescaped key) and times (from milliseconds) included.
func TestSoloFeedComputedColumns(t *testing.T) {
	q := compile(t, `CREATE SOURCE s (k VARCHAR, ms BIGINT, ku AS upper(k) || '!', ts AS TO_TIMESTAMP_LTZ(ms, 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
SELECT ku, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n, max(k) AS mk FROM s
GROUP BY ku, TUMBLE(ts, INTERVAL '1' SECOND);`)
	keys := []string{`"a\"b"`, `"\u00e9x"`, `null`, `"plain"`}
	var lines []string
	for i := range 500 {
		if i%89 == 5 {
			lines = append(lines, `{"k": "x"}`) // no time to compute
			continue
		}
		lines = append(lines, fmt.Sprintf(`{"k": %s, "ms": %d}`, keys[i%len(keys)], 1784368800000+int64(i)*37))
	}
	want := soloTrace(t, q, lines, true)
	if got := soloTrace(t, q, lines, false); got != want {
		t.Fatalf("fed in blocks:\n%s\nrecord by record:\n%s", got, want)
	}
	for _, s := range []string{`A\"B!`, `\u00c9X!`, "error at"} {
		if !strings.Contains(want, s) {
			t.Fatalf("the trace lacks %q:\n%s", s, want)
		}
	}
}

// soloTrace feeds lines to a graph of q and writes down what the host
// sees: in blocks of 64 records, or (oneByOne) record by record.
func soloTrace(t *testing.T, pq *plan.Query, lines []string, oneByOne bool) string {
	t.Helper()
	var b strings.Builder
	cfg := Config{
		Emit: func(r *changelog.Record) error {
			fmt.Fprintf(&b, "rec %s %s rev=%d final=%v\n", r.Key, r.Value, r.Meta.Revision, r.Meta.Final)
			return nil
		},
		OnEventError: func(tag int64, raw []byte, err *EventError) {
			fmt.Fprintf(&b, "error at %d seq=%d %q: %v\n", tag, err.Seq, raw, err.Err)
		},
	}
	if oneByOne {
		cfg.Late = func(*exec.LateEvent) {} // a late hook keeps it off the block path
	} else {
		cfg.BlockEvents = 64
	}
	g, err := NewQueryGraph(pq, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, blocks := g.primary.d.feeder.(*soloFeed)
	if blocks == oneByOne {
		t.Fatalf("block feed %v, want %v", blocks, !oneByOne)
	}
	for i, l := range lines {
		if err := g.Feed([]byte(l), int64(i+1)); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		switch i % 150 {
		case 20:
			fmt.Fprintf(&b, "counts %+v\n", g.primary.d.Counts())
		case 45:
			fmt.Fprintf(&b, "push %v\n", g.Push([]byte(`{"k": "p", "v": 1, "ts": "2026-07-18 10:00:30"}`)))
		case 70:
			fmt.Fprintf(&b, "watermark %d\n", g.Watermark())
		case 95:
			fmt.Fprintf(&b, "report %v\n", g.ReportMalformedAt(int64(-i), fmt.Errorf("line %d too long", i)))
		case 120:
			n := 0
			err := g.Checkpoint(true, []byte("pos"), func(k, v []byte) error { n++; return nil })
			fmt.Fprintf(&b, "checkpoint %d entries %v\n", n, err)
		}
	}
	fmt.Fprintf(&b, "close %v\ncounts %+v\n", g.Close(), g.primary.d.Counts())
	return b.String()
}
