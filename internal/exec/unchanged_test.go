package exec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// The queries of the change-only tests: a continuous view whose value
// repeats often (a distinct count and a minimum over small domains), and
// the same with REVISION() in the value, which changes with every record
// and must not make an unchanged value a change.
const (
	unchangedQuery    = `SELECT merchant, count(DISTINCT customer) AS c, min(event_id) AS first FROM events GROUP BY merchant`
	unchangedRevQuery = `SELECT merchant, count(DISTINCT customer) AS c, min(event_id) AS first, revision() AS r FROM events GROUP BY merchant`
)

type emitted struct {
	key, val string
	rev      uint64
	final    bool
}

func (e emitted) String() string {
	return fmt.Sprintf("%s %s rev %d final %v", e.key, e.val, e.rev, e.final)
}

func compileOne(t *testing.T, sql string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(benchSource+sql, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

func collectingOp(t *testing.T, q *plan.Query, out *[]emitted) *Operator {
	t.Helper()
	op, err := New(q, Config{Nanotime: func() int64 { return 1 }, Emit: func(r *changelog.Record) error {
		*out = append(*out, emitted{string(r.Key), string(r.Value), r.Meta.Revision, r.Meta.Final})
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// unchangedRows returns n events over few merchants, customers and ids, so
// most events leave their merchant's value as it was.
func unchangedRows(r *rand.Rand, n int) [][]types.Value {
	rows := make([][]types.Value, n)
	for i := range rows {
		rows[i] = []types.Value{types.Str(fmt.Sprintf("e%d", r.IntN(20))), types.Str(fmt.Sprintf("m%d", r.IntN(4))),
			types.Str(fmt.Sprintf("c%d", r.IntN(6))), types.Float(1), types.TS(36000000000 + int64(i)*1000)}
	}
	return rows
}

// expectChanges is the changelog the rule defines for the continuous view:
// after each event its merchant's value, published only when it differs
// from the last one published for the merchant, revisions counting the
// published records from 1. forgetAt >= 0 forgets what was published
// before event forgetAt (a restore from a checkpoint that did not carry
// it).
func expectChanges(rows [][]types.Value, withRev bool, forgetAt int) []emitted {
	custs := map[string]map[string]bool{}
	first := map[string]string{}
	last := map[string]string{}
	revs := map[string]uint64{}
	var out []emitted
	for i, row := range rows {
		if i == forgetAt {
			clear(last)
		}
		m, c, id := row[1].S, row[2].S, row[0].S
		if custs[m] == nil {
			custs[m] = map[string]bool{}
		}
		custs[m][c] = true
		if f, ok := first[m]; !ok || id < f {
			first[m] = id
		}
		val := fmt.Sprintf(`{"merchant": %q, "c": %d, "first": %q`, m, len(custs[m]), first[m])
		if val == last[m] {
			continue
		}
		last[m] = val
		revs[m]++
		if withRev {
			val += fmt.Sprintf(`, "r": %d`, revs[m])
		}
		out = append(out, emitted{fmt.Sprintf(`[%q]`, m), val + "}", revs[m], false})
	}
	return out
}

func sameEmitted(t *testing.T, what string, got, want []emitted) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d\ngot  %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestChangesOnly: a continuous view publishes a record only when its
// value bytes differ from the last record published for its key, with or
// without REVISION() in the value, and revisions stay dense (1, 2, 3, ...
// per key): over random streams the changelog equals the one the rule
// defines, and the suppressed records are counted.
func TestChangesOnly(t *testing.T) {
	for _, withRev := range []bool{false, true} {
		sql := unchangedQuery
		if withRev {
			sql = unchangedRevQuery
		}
		q := compileOne(t, sql)
		for seed := range uint64(30) {
			r := rand.New(rand.NewPCG(seed, 7))
			rows := unchangedRows(r, 50+r.IntN(300))
			var got []emitted
			op := collectingOp(t, q, &got)
			for _, row := range rows {
				if err := op.Process(row); err != nil {
					t.Fatal(err)
				}
			}
			if err := op.Finish(); err != nil {
				t.Fatal(err)
			}
			want := expectChanges(rows, withRev, -1)
			sameEmitted(t, fmt.Sprintf("revision %v seed %d", withRev, seed), got, want)
			if st := op.Stats(); st.RecordsOut != int64(len(want)) || st.UnchangedSuppressed != int64(len(rows)-len(want)) {
				t.Fatalf("seed %d: %d records out, %d suppressed; want %d and %d", seed, st.RecordsOut, st.UnchangedSuppressed, len(want), len(rows)-len(want))
			}
		}
	}
}

// TestChangesOnlyAcrossRestore: what was last published for each key is
// in the checkpoint, so a run stopped at any point and restored (from a
// full checkpoint, or a full one and then an incremental one) continues
// the changelog of an uninterrupted run exactly: no unchanged value is
// published again, no change is suppressed, the counter carries over.
func TestChangesOnlyAcrossRestore(t *testing.T) {
	q := compileOne(t, unchangedQuery)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 11))
		rows := unchangedRows(r, 200)
		cut1, cut2 := r.IntN(100), 100+r.IntN(100)
		store := map[string][]byte{}
		put := func(k, v []byte) error {
			if v == nil {
				delete(store, string(k))
			} else {
				store[string(k)] = append([]byte(nil), v...)
			}
			return nil
		}
		var got []emitted
		op := collectingOp(t, q, &got)
		feed := func(op *Operator, rows [][]types.Value) {
			for _, row := range rows {
				if err := op.Process(row); err != nil {
					t.Fatal(err)
				}
			}
		}
		feed(op, rows[:cut1])
		if err := op.Checkpoint(true, nil, put); err != nil {
			t.Fatal(err)
		}
		feed(op, rows[cut1:cut2])
		if err := op.Checkpoint(false, nil, put); err != nil {
			t.Fatal(err)
		}
		op2 := collectingOp(t, q, &got)
		restoreStore(t, op2, store)
		feed(op2, rows[cut2:])
		want := expectChanges(rows, false, -1)
		sameEmitted(t, fmt.Sprintf("seed %d, restored at %d", seed, cut2), got, want)
		if st := op2.Stats(); st.UnchangedSuppressed != int64(len(rows)-len(want)) {
			t.Fatalf("seed %d: %d suppressed after the restore, want %d", seed, st.UnchangedSuppressed, len(rows)-len(want))
		}
	}
}

func restoreStore(t *testing.T, op *Operator, store map[string][]byte) {
	t.Helper()
	keys := make([]string, 0, len(store))
	for k := range store {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := op.Restore([]byte(k), store[k]); err != nil {
			t.Fatalf("restore %q: %v", k, err)
		}
	}
	op.FinishRestore()
}

// TestChangesOnlyOldCheckpoint: a checkpoint in the format before the
// value hash (version 1) is still restored; it does not say what was
// published, so each key publishes its next record whatever its value
// (as version 1 did), and suppresses from then on.
func TestChangesOnlyOldCheckpoint(t *testing.T) {
	q := compileOne(t, unchangedQuery)
	r := rand.New(rand.NewPCG(3, 3))
	rows := unchangedRows(r, 300)
	const cut = 150
	store := map[string][]byte{}
	var got []emitted
	op := collectingOp(t, q, &got)
	for _, row := range rows[:cut] {
		if err := op.Process(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
		store[string(k)] = toVersion1(t, k, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	op2 := collectingOp(t, q, &got)
	restoreStore(t, op2, store)
	for _, row := range rows[cut:] {
		if err := op2.Process(row); err != nil {
			t.Fatal(err)
		}
	}
	sameEmitted(t, "restored from version 1", got, expectChanges(rows, false, cut))
	if st := op2.Stats(); st.Rows != int64(len(rows)) {
		t.Fatalf("%d rows after the restore, want %d", st.Rows, len(rows))
	}
}

// toVersion1 rewrites a group or meta entry as version 1 wrote it: no
// value hash, nine counters.
func toVersion1(t *testing.T, k, v []byte) []byte {
	t.Helper()
	if v[0] != opStateVersion {
		t.Fatalf("entry %q has version %d, want %d", k, v[0], opStateVersion)
	}
	if string(k) == MetaKey {
		m, err := ParseMeta(v)
		if err != nil {
			t.Fatal(err)
		}
		b := []byte{1}
		b = binary.AppendVarint(b, m.Watermark)
		b = binary.AppendVarint(b, m.MaxEventTime)
		b = binary.AppendUvarint(b, m.Seq)
		for _, c := range m.Counters[:9] {
			b = binary.AppendVarint(b, c)
		}
		b = binary.AppendUvarint(b, uint64(len(m.Position)))
		return append(b, m.Position...)
	}
	r := &reader{b: v[1:]}
	r.varint()
	r.varint()
	r.uvarint()
	r.uvarint()
	r.byte1()
	head := len(v) - len(r.b)
	rest := r.b[1:]
	if r.b[0] == 1 {
		rest = r.b[9:]
	}
	out := append([]byte{1}, v[1:head]...)
	return append(out, rest...)
}

// TestEarlyChangesOnly: an early flush publishes a changed window only
// when its value differs from the last one published; the final record is
// published whatever its value.
func TestEarlyChangesOnly(t *testing.T) {
	q := compileOne(t, `SELECT merchant, count(DISTINCT customer) AS c FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`)
	var got []emitted
	op := collectingOp(t, q, &got)
	ev := func(cust string, sec int64) {
		t.Helper()
		if err := op.Process([]types.Value{types.Str("e"), types.Str("m1"), types.Str(cust), types.Float(1), types.TS(36000000000 + sec*1_000_000)}); err != nil {
			t.Fatal(err)
		}
		if err := op.EmitEarly(); err != nil {
			t.Fatal(err)
		}
	}
	ev("c1", 1) // published: c 1
	ev("c1", 2) // same value: suppressed
	ev("c2", 3) // published: c 2
	ev("c2", 4) // suppressed
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, e.String())
	}
	want := []string{
		`["m1", "1970-01-01 10:00:00"] {"merchant": "m1", "c": 1} rev 1 final false`,
		`["m1", "1970-01-01 10:00:00"] {"merchant": "m1", "c": 2} rev 2 final false`,
		`["m1", "1970-01-01 10:00:00"] {"merchant": "m1", "c": 2} rev 3 final true`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changelog:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if st := op.Stats(); st.UnchangedSuppressed != 2 || st.RecordsOut != 3 {
		t.Fatalf("%d suppressed, %d out; want 2 and 3", st.UnchangedSuppressed, st.RecordsOut)
	}
}

// BenchmarkChangeRecord: a continuous view whose every event changes its
// value (each is published, after its value is hashed) against one whose
// events leave it unchanged (each is rendered, hashed and suppressed).
func BenchmarkChangeRecord(b *testing.B) {
	for _, name := range []string{"changed", "unchanged"} {
		b.Run(name, func(b *testing.B) {
			prog, err := plan.Compile(benchSource+`SELECT merchant, count(*) AS n, max(customer) AS top FROM events GROUP BY merchant`, plan.CompileOptions{})
			if err != nil {
				b.Fatal(err)
			}
			sql := prog.Queries[0]
			if name == "unchanged" {
				prog, _ = plan.Compile(benchSource+`SELECT merchant, max(customer) AS top FROM events GROUP BY merchant`, plan.CompileOptions{})
				sql = prog.Queries[0]
			}
			op, err := New(sql, Config{Nanotime: func() int64 { return 1 }, Emit: func(*changelog.Record) error { return nil }})
			if err != nil {
				b.Fatal(err)
			}
			row := []types.Value{types.Str("e"), types.Str("merchant-0001"), types.Str("customer-0001"), types.Float(1), types.TS(36000000000)}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := op.Process(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRevisionDependence: a value is rendered again with its revision
// fixed exactly when the binder marks a SELECT column as reading
// REVISION(), not when the text of the query merely spells it.
func TestRevisionDependence(t *testing.T) {
	for sql, want := range map[string]bool{
		unchangedRevQuery: true,
		`SELECT merchant, count(*) + revision() AS n FROM events GROUP BY merchant`: true,
		unchangedQuery: false,
		`SELECT merchant, 'revision()' AS note, count(*) AS n FROM events GROUP BY merchant`:   false,
		`SELECT merchant, count(*) AS n FROM events GROUP BY merchant HAVING revision() < 100`: false,
		`SELECT merchant, count(*) AS "Revision()" FROM events GROUP BY merchant`:              false,
	} {
		var got []emitted
		if op := collectingOp(t, compileOne(t, sql), &got); op.revDep != want {
			t.Errorf("%s: renders with the revision fixed: %v, want %v", sql, op.revDep, want)
		}
	}
}
