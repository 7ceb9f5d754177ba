package drive

import (
	"errors"
	"slices"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestNodePushBatch: the head node takes a batch of many rows as it takes
// them one push at a time: the same changelog and counters, on one thread
// and on several. A push stops at the first row not applied cleanly and
// says how many it took; the caller goes on after it.
func TestNodePushBatch(t *testing.T) {
	// The second query fails to evaluate NaN and 1e400 as a BIGINT.
	for _, sql := range []string{testSQL, `CREATE SOURCE orders (merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '0' SECOND);
SELECT merchant, COUNT(*) AS n FROM orders WHERE CAST(amount AS BIGINT) >= 0
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`} {
		for _, threads := range []int{1, 2} {
			pushBatch(t, compile(t, sql), threads)
		}
	}
}

func pushBatch(t *testing.T, q *plan.Query, threads int) {
	var one, batched []changelog.Record
	collect := func(out *[]changelog.Record) func(*changelog.Record) error {
		return func(r *changelog.Record) error { *out = append(*out, r.Clone()); return nil }
	}
	d1, err := New(q, Config{Emit: collect(&one), Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d1, events(), nil)
	d2, err := New(q, Config{Emit: collect(&batched), Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	b := &rowBatch{}
	for _, e := range events() {
		row, err := d2.decode(e)
		if err != nil || row == nil {
			continue
		}
		b.rows = append(b.rows, slices.Clone(row))
		b.raws = append(b.raws, e)
	}
	stops := 0
	for len(b.rows) > 0 {
		n, err := d2.first.push(0, b)
		var ee *EventError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if n < 1 || n > len(b.rows) || err == nil && n != len(b.rows) {
			t.Fatalf("push took %d of %d rows (err %v)", n, len(b.rows), err)
		}
		stops++
		b.rows, b.raws = b.rows[n:], b.raws[n:]
	}
	if want := d1.Counts().EvalErrors + 1; int64(stops) != want {
		t.Errorf("%s, threads %d: %d pushes for %d evaluation errors", q.Name, threads, stops, want-1)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if len(one) == 0 || !slices.EqualFunc(one, batched, sameRecord) {
		t.Errorf("threads %d: a batch gave %d records, one at a time %d, or they differ", threads, len(batched), len(one))
	}
	if c1, c2 := d1.Counts(), d2.Counts(); c1 != c2 {
		t.Errorf("threads %d: counts %+v one at a time, %+v in a batch", threads, c1, c2)
	}
}

func sameRecord(a, b changelog.Record) bool {
	return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) && a.Meta.Final == b.Meta.Final &&
		a.Meta.Revision == b.Meta.Revision && a.Meta.WindowStart == b.Meta.WindowStart
}
