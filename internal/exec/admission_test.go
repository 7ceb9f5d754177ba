package exec

import (
	"errors"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestAdmissionEvals: Check fails an event exactly where Process does,
// whether its aggregates have a FILTER or an argument to evaluate (the
// loop over them runs) or only bare columns (it is skipped).
func TestAdmissionEvals(t *testing.T) {
	lines := []string{`{"g":"7","x":1,"event_time":"2026-07-18 10:00:00"}`, `{"g":"a","x":2,"event_time":"2026-07-18 10:00:01"}`}
	for _, tc := range []struct {
		sql          string
		evals, fails bool // fails: the second line fails to evaluate
	}{
		{`SELECT g, count(*) AS c, sum(x) AS s, max(x) AS m FROM flat GROUP BY g`, false, false},
		{`SELECT g, sum(CAST(g AS BIGINT)) AS s FROM flat GROUP BY g`, true, true},
		{`SELECT g, count(*) FILTER (WHERE CAST(g AS BIGINT) > 0) AS c FROM flat GROUP BY g`, true, true},
		{`SELECT g, sum(x) FILTER (WHERE x > 1) AS s FROM flat GROUP BY g`, true, false},
	} {
		prog, err := plan.Compile(identitySource+tc.sql, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := prog.Queries[0]
		adm := NewAdmission(q)
		if adm.evals != tc.evals {
			t.Errorf("%s: evals %v, want %v", tc.sql, adm.evals, tc.evals)
		}
		op, err := New(q, Config{Emit: func(*changelog.Record) error { return nil }, Nanotime: func() int64 { return 1 }})
		if err != nil {
			t.Fatal(err)
		}
		dec := NewQueryDecoder(q)
		for i, l := range lines {
			row, err := dec.Decode([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			_, _, cerr := adm.Check(nil, row)
			perr := op.Process(row)
			var ce, pe *EvalError
			if errors.As(cerr, &ce) != errors.As(perr, &pe) || ce != nil && ce.Where != pe.Where || (cerr != nil) != (tc.fails && i == 1) {
				t.Errorf("%s: %s: Check %v, Process %v", tc.sql, l, cerr, perr)
			}
		}
	}
}
