package ubik_test

import (
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// runWithRestores runs sql over the events, and every `every` events
// checkpoints incrementally into a key-value store (as the Kafka state
// topic does), throws the query away, and restores a fresh one from the
// store. It returns the last record per key and all records.
func runWithRestores(t *testing.T, sql string, evs [][]byte, every int) (map[string]string, []changelog.Record) {
	t.Helper()
	eng, _ := ubik.Open(ubik.DefaultOptions())
	var all []changelog.Record
	opts := ubik.QueryOptions{OnRecord: func(r changelog.Record) error { all = append(all, r.Clone()); return nil }}
	q, err := eng.Start(sql, opts)
	if err != nil {
		t.Fatal(err)
	}
	store := map[string][]byte{}
	for i, ev := range evs {
		if err := q.Push(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if (i+1)%every != 0 {
			continue
		}
		if err := q.Checkpoint(false, nil, func(k, v []byte) error {
			if v == nil {
				delete(store, string(k))
			} else {
				store[string(k)] = append([]byte(nil), v...)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if q, err = eng.Start(sql, opts); err != nil {
			t.Fatal(err)
		}
		for k, v := range store {
			if _, err := q.Restore([]byte(k), v); err != nil {
				t.Fatalf("restore %q: %v", k, err)
			}
		}
		if err := q.FinishRestore(); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, r := range all {
		last[string(r.Key)] = string(r.Value)
	}
	return last, all
}

// TestRestorePoints: checkpointing and restoring at any point gives the same
// final records as an uninterrupted run, with revisions continuing.
func TestRestorePoints(t *testing.T) {
	gen := genOracleEvents(11, 5000)
	evs := make([][]byte, len(gen))
	for i := range gen {
		evs[i] = gen[i].json()
	}
	cases := oracleCases()
	cases = append(cases, oracleCase{name: "dedup", sql: `CREATE SOURCE ev (k VARCHAR, amount DOUBLE, qty BIGINT, price DECIMAL(12,3), ts TIMESTAMP,
		WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (format = 'jsonl', dedup_key = 'qty', dedup_within = '2 seconds');
		SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n, sum(price) AS p FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)`})
	// Re-send some events so the dedup case has copies to drop.
	for i := 0; i < len(evs); i += 10 {
		evs = append(evs[:i+1], evs[i:]...)
		i++
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, _ := runWithRestores(t, c.sql, evs, len(evs)+1)
			for _, every := range []int{1, 97, 1000} {
				if testing.Short() && every == 1 {
					continue
				}
				got, all := runWithRestores(t, c.sql, evs, every)
				if !equalMaps(ref, got) {
					t.Fatalf("restoring every %d events changes the final records", every)
				}
				checkRevisions(t, all, c.name != "continuous")
			}
		})
	}
}
