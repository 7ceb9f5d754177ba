package exec

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestRestoreKeepsGroupNumbers: checkpoint entries are keyed by a group's
// creation number, so a restored operator must number its new groups after
// every restored one. Otherwise a new (group, window) takes the number of
// a restored one of the same group key, its entry overwrites the restored
// entry in the host's store (a compacted topic keeps one value per key),
// and the next restore has lost that window. The operator is restored,
// creates new windows for the same keys, checkpoints incrementally, is
// restored again, and its finals must equal an uninterrupted run's; also
// when the host's store lost the meta entry (which carries the counter).
func TestRestoreKeepsGroupNumbers(t *testing.T) {
	prog, err := plan.Compile(benchSource+`SELECT merchant, count(*) AS n, sum(amount) AS s FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	const merchants = 5
	// Three phases, each one minute of events for every merchant; the
	// last event of each phase closes the window before.
	phase := func(p int) [][]types.Value {
		var rows [][]types.Value
		for i := 0; i < 40; i++ {
			rows = append(rows, []types.Value{types.Str(fmt.Sprint(i)), types.Str(fmt.Sprintf("m%d", i%merchants)), types.Str("c"),
				types.Float(float64(i + 1)), types.TS(36000000000 + int64(p)*60_000_000 + int64(i)*1_000_000)})
		}
		return rows
	}
	type run struct {
		op     *Operator
		finals map[string]string
	}
	newOp := func(finals map[string]string) *Operator {
		op, err := New(q, Config{Nanotime: func() int64 { return 1 }, Emit: func(r *changelog.Record) error {
			if r.Meta.Final {
				finals[string(r.Key)] = string(r.Value)
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	feed := func(op *Operator, rows [][]types.Value) {
		for _, row := range rows {
			if err := op.Process(row); err != nil {
				t.Fatal(err)
			}
		}
	}
	ref := map[string]string{}
	refOp := newOp(ref)
	for p := 0; p < 4; p++ {
		feed(refOp, phase(p))
	}

	for _, loseMeta := range []bool{false, true} {
		t.Run(fmt.Sprintf("lose meta=%v", loseMeta), func(t *testing.T) {
			store := map[string][]byte{}
			put := func(k, v []byte) error {
				if v == nil {
					delete(store, string(k))
				} else {
					store[string(k)] = append([]byte(nil), v...)
				}
				return nil
			}
			restore := func(finals map[string]string) *Operator {
				op := newOp(finals)
				keys := make([]string, 0, len(store))
				for k := range store {
					if loseMeta && k == MetaKey {
						continue
					}
					keys = append(keys, k)
				}
				sort.Strings(keys) // groups first ("g..." < "m"), as the Kafka host loads them
				for _, k := range keys {
					if _, err := op.Restore([]byte(k), store[k]); err != nil {
						t.Fatal(err)
					}
				}
				op.FinishRestore()
				return op
			}
			got := map[string]string{}
			op := newOp(got)
			feed(op, phase(0))
			if err := op.Checkpoint(false, nil, put); err != nil {
				t.Fatal(err)
			}
			for p := 1; p < 4; p++ {
				// The first events of a phase open the next window while
				// the previous one is still open (the watermark delay):
				// the store then holds both windows of a merchant.
				rows := phase(p)
				for _, part := range [][][]types.Value{rows[:3], rows[3:]} {
					op = restore(got)
					feed(op, part)
					if err := op.Checkpoint(false, nil, put); err != nil {
						t.Fatal(err)
					}
					live := 0
					for k := range store {
						if strings.HasPrefix(k, "g") {
							live++
						}
					}
					if want := int(op.Stats().LiveGroups); live != want {
						t.Fatalf("in phase %d the store holds %d group entries, the operator %d live groups: a new group's entry overwrote a restored one", p, live, want)
					}
				}
			}
			if len(got) != len(ref) {
				t.Fatalf("%d finals, the uninterrupted run %d", len(got), len(ref))
			}
			for k, v := range ref {
				if got[k] != v {
					t.Errorf("key %q: final %s, uninterrupted %s", k, got[k], v)
				}
			}
		})
	}
}
