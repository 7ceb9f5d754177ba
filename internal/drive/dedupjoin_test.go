package drive

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// dedupJoinSQL is an inner temporal join whose stream has a dedup key.
const dedupJoinSQL = `CREATE SOURCE ev (id VARCHAR, tier BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (dedup_key = 'id', dedup_within = '1 hour');
CREATE TABLE prices (tier BIGINT, price BIGINT, vf TIMESTAMP, PRIMARY KEY (tier) NOT ENFORCED, WATERMARK FOR vf AS vf);
SELECT p.price, count(*) AS n, sum(e.v) AS s FROM ev e JOIN prices FOR SYSTEM_TIME AS OF e.ts AS p ON e.tier = p.tier
GROUP BY p.price, TUMBLE(e.ts, INTERVAL '1' MINUTE)`

// The input dedup runs before a temporal join, as the plan places it
// (Decode -> Dedup -> TemporalJoin) and as the Kafka dedup stage runs
// it: the first copy of a key is the one that reaches the query, even
// when the join then drops it (no version valid at its time: a, or late
// at the join: c); a later copy that would join is a duplicate, on one
// thread as on several, the table's versions known in advance or not.
func TestDedupBeforeTemporalJoin(t *testing.T) {
	q := compile(t, dedupJoinSQL)
	ev := func(id string, tier, v int, sec int) []byte {
		return fmt.Appendf(nil, `{"id":%q,"tier":%d,"v":%d,"ts":"2026-07-18 10:00:%02d"}`, id, tier, v, sec)
	}
	events := [][]byte{
		ev("a", 2, 100, 10),    // tier 2 has no version: dropped by the join
		ev("a", 1, 1000, 11),   // a later copy of a: a duplicate
		ev("b", 1, 1, 12),      // joins
		ev("b", 1, 10, 13),     // a duplicate
		ev("c", 1, 10000, 5),   // late at the join (behind 10:00:12 less no lateness)
		ev("c", 1, 100000, 14), // a later copy of c: a duplicate
		ev("d", 1, 2, 15),      // joins
	}
	for _, threads := range []int{1, 2, 3} {
		for _, tableFirst := range []bool{true, false} {
			name := fmt.Sprintf("threads %d, table first %v", threads, tableFirst)
			var recs []string
			cfg := Config{Threads: threads, Emit: func(r *changelog.Record) error {
				recs = append(recs, fmt.Sprintf("%s=%s", r.Key, r.Value))
				return nil
			}}
			var lates []string
			if threads == 1 {
				cfg.Late = func(e *exec.LateEvent) { lates = append(lates, string(e.Event)+": "+e.Reason) }
			}
			d, err := New(q, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d.Threads() != threads {
				t.Fatalf("%s: the driver runs %d threads", name, d.Threads())
			}
			table := func() {
				if err := d.PushInput(1, []byte(`{"tier":1,"price":3,"vf":"2026-07-18 09:00:00"}`)); err != nil {
					t.Fatal(err)
				}
				if err := d.EndInput(1); err != nil {
					t.Fatal(err)
				}
			}
			if tableFirst {
				table()
			}
			for _, raw := range events {
				if err := d.Push(raw); err != nil {
					t.Fatal(err)
				}
			}
			if !tableFirst {
				table()
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			s := d.Stats()
			if s.Duplicates != 3 || s.DedupLate != 0 || s.DedupKeys != 4 {
				t.Errorf("%s: %d duplicates, %d dedup-late, %d keys; want 3 (the later copies of a, b and c), 0, 4", name, s.Duplicates, s.DedupLate, s.DedupKeys)
			}
			if c := d.Counts(); c.Late != 1 {
				t.Errorf("%s: %d events late, want 1 (the first copy of c, at the join)", name, c.Late)
			}
			if len(recs) == 0 || !strings.Contains(recs[len(recs)-1], `"n": 2, "s": 3`) {
				t.Errorf("%s: the window counts b and d alone (n 2, s 3); records:\n%s", name, strings.Join(recs, "\n"))
			}
			if threads == 1 && !slices.ContainsFunc(lates, func(l string) bool { return strings.Contains(l, `"c"`) && strings.Contains(l, "temporal join") }) {
				t.Errorf("%s: the first copy of c is not reported late at the join: %q", name, lates)
			}
		}
	}
}

// A driver checkpointed while events wait in the join (their copies
// already decided) and restored goes on as the one not stopped; a state
// without the marker entry, written while the dedup ran after the join,
// is refused, saying what to do.
func TestDedupBeforeTemporalJoinRestore(t *testing.T) {
	q := compile(t, dedupJoinSQL)
	var events [][]byte
	for i := 0; i < 60; i++ {
		// Copies of k0..k19 under another tier, every third of them
		// without a version; times out of order within the delay.
		events = append(events, fmt.Appendf(nil, `{"id":"k%d","tier":%d,"v":%d,"ts":"2026-07-18 10:%02d:%02d"}`, i%20, i%3, i, i/30, (i*7)%30+i/2%30))
	}
	table := []byte(`{"tier":1,"price":3,"vf":"2026-07-18 09:00:00"}` + "\n" + `{"tier":0,"price":2,"vf":"2026-07-18 10:00:20"}`)
	for _, threads := range []int{1, 3} {
		want, wantStats, saved := dedupJoinRun(t, q, threads, events, table, 30, nil)
		if wantStats.Duplicates == 0 {
			t.Fatalf("threads %d: no duplicates: the test needs some", threads)
		}
		got, gotStats, _ := dedupJoinRun(t, q, threads, events, table, 30, saved)
		if !slices.Equal(got, want) || gotStats.Duplicates != wantStats.Duplicates || gotStats.DedupKeys != wantStats.DedupKeys {
			t.Errorf("threads %d: restored: %d duplicates, %d keys, records\n%s\nnot stopped: %d, %d,\n%s", threads,
				gotStats.Duplicates, gotStats.DedupKeys, strings.Join(got, "\n"), wantStats.Duplicates, wantStats.DedupKeys, strings.Join(want, "\n"))
		}
		d, err := New(q, Config{Threads: threads, Emit: func(*changelog.Record) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		var rerr error
		for _, e := range saved {
			if string(e[0]) != joinDedupKey {
				if _, rerr = d.Restore(e[0], e[1]); rerr != nil {
					break
				}
			}
		}
		if rerr == nil {
			rerr = d.FinishRestore() // entries come in any order: the refusal waits for all of them
		}
		if !errors.Is(rerr, ErrBadState) || !strings.Contains(rerr.Error(), "start the query over from an empty state") {
			t.Errorf("threads %d: a state without the marker restored: %v", threads, rerr)
		}
		// The marker last, after the meta entry: restored.
		d, err = New(q, Config{Threads: threads, Emit: func(*changelog.Record) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		slices.SortStableFunc(saved, func(a, b [2][]byte) int { return strings.Compare(string(b[0]), string(a[0])) })
		for _, e := range saved {
			if _, err := d.Restore(e[0], e[1]); err != nil {
				t.Fatalf("threads %d: restore in reverse key order: %v", threads, err)
			}
		}
		if err := d.FinishRestore(); err != nil {
			t.Errorf("threads %d: a state with the marker after its meta entry refused: %v", threads, err)
		}
	}
}

// dedupJoinRun runs a driver of q over events then the table's rows
// (the events wait in the join meanwhile), checkpointing before event at
// (saved, when restore is nil) or restored from restore and pushing the
// events from at. It returns the records, the counters and the entries.
func dedupJoinRun(t *testing.T, q *plan.Query, threads int, events [][]byte, table []byte, at int, restore [][2][]byte) ([]string, exec.Stats, [][2][]byte) {
	t.Helper()
	var recs []string
	d, err := New(q, Config{Threads: threads, Emit: func(r *changelog.Record) error {
		recs = append(recs, fmt.Sprintf("%s=%s", r.Key, r.Value))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var saved [][2][]byte
	from := 0
	if restore != nil {
		for _, e := range restore {
			if _, err := d.Restore(e[0], e[1]); err != nil {
				t.Fatal(err)
			}
		}
		d.FinishRestore()
		from = at
	}
	for i := from; i < len(events); i++ {
		if i == at && restore == nil {
			if err := d.Checkpoint(true, nil, func(k, v []byte) error {
				saved = append(saved, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Push(events[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, row := range bytes.Split(table, []byte("\n")) {
		if err := d.PushInput(1, row); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return recs, d.Stats(), saved
}
