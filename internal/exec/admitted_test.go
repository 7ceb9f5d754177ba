package exec

import (
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestProcessAdmitted: with its own query's Admission, ProcessAdmitted
// emits what Process does; with an Admission of another query (compiled
// apart, though alike) the key is not trusted: a corrupt one is ignored and
// the GROUP BY evaluated, as ProcessKeyed does.
func TestProcessAdmitted(t *testing.T) {
	const sql = `SELECT g, x, count(*) AS c FROM flat GROUP BY g, x`
	compile := func() *plan.Query {
		prog, err := plan.Compile(identitySource+sql, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return prog.Queries[0]
	}
	lines := []string{`{"g":"a","x":1,"event_time":"2026-07-18 10:00:00"}`, `{"g":"b","x":-0.0,"event_time":"2026-07-18 10:00:01"}`, `{"g":"a","x":1,"event_time":"2026-07-18 10:00:02"}`}
	want := recordText(runLines(t, sql, lines))
	q, other := compile(), compile()
	for _, tc := range []struct {
		name    string
		adm     *Admission
		corrupt bool
	}{{"own", NewAdmission(q), false}, {"other, corrupt key", NewAdmission(other), true}, {"none, corrupt key", nil, true}} {
		var recs []changelog.Record
		var clock int64
		op, err := New(NoFilter(q), Config{Emit: func(r *changelog.Record) error { recs = append(recs, r.Clone()); return nil },
			Nanotime: func() int64 { clock++; return clock }})
		if err != nil {
			t.Fatal(err)
		}
		dec, own := NewQueryDecoder(q), NewAdmission(q)
		for _, l := range lines {
			row, err := dec.Decode([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			key, pass, err := own.Check(nil, row)
			if err != nil || !pass {
				t.Fatalf("%s: check %v %v", l, pass, err)
			}
			if tc.corrupt {
				key = []byte{8, 3, 'a'}
			}
			if err := op.ProcessAdmitted(row, key, tc.adm); err != nil {
				t.Fatal(err)
			}
		}
		if err := op.Finish(); err != nil {
			t.Fatal(err)
		}
		if got := recordText(recs); got != want {
			t.Fatalf("%s: got\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}
