package ubik_test

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// StartPlan validates the plan it is handed: a broken one is an error
// naming the problem, never a panic.
func TestStartPlanRejectsBrokenPlans(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	src := func() *plan.Source {
		return &plan.Source{Name: "ev", TimeCol: 1, Columns: []plan.Column{{Name: "g", Type: types.Varchar}, {Name: "t", Type: types.Timestamp}}}
	}
	g := &plan.ColRef{Index: 0, T: types.Varchar, Name: "g"}
	for _, c := range []struct {
		name string
		q    *plan.Query
		want string
	}{
		{"nil", nil, "no query"},
		{"empty", &plan.Query{Name: "x"}, "no source"},
		{"time column out of range", &plan.Query{Name: "x", Source: &plan.Source{Name: "ev", TimeCol: 3}}, "event time column 3"},
		{"time column not a timestamp", &plan.Query{Name: "x", Source: &plan.Source{Name: "ev", TimeCol: 0, Columns: []plan.Column{{Name: "g", Type: types.Varchar}}}}, "not TIMESTAMP"},
		{"nil key expression", &plan.Query{Name: "x", Source: src(), Keys: []plan.KeyTerm{{Kind: plan.KeyExpr}}}, "GROUP BY term 1 has no expression"},
		{"key column out of range", &plan.Query{Name: "x", Source: src(), Keys: []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: &plan.ColRef{Index: 7, T: types.Varchar}}}}, "reads column 7"},
		{"window bound without a window", &plan.Query{Name: "x", Source: src(), Keys: []plan.KeyTerm{{Kind: plan.KeyWindowStart}}}, "no window"},
		{"bad window", &plan.Query{Name: "x", Source: src(), Window: &plan.Window{Kind: plan.Tumble, TimeCol: 1}}, "TUMBLE size"},
		{"nil select expression", &plan.Query{Name: "x", Source: src(), Keys: []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: g}}, Select: []plan.OutputColumn{{Name: "g"}}}, "SELECT column 1 (g) has no expression"},
		{"nil aggregate argument", &plan.Query{Name: "x", Source: src(), Aggs: []plan.AggCall{{Func: "count", Args: []plan.Expr{nil}, Type: types.BigInt}}}, "argument 1 has no expression"},
		{"dedup column out of range", &plan.Query{Name: "x", Source: &plan.Source{Name: "ev", TimeCol: 1, Columns: src().Columns, Dedup: &plan.Dedup{Col: 5, Within: 1}}}, "dedup key column 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var q *ubik.Query
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("StartPlan panicked: %v", r)
					}
				}()
				q, err = ubik.StartRawPlan(eng, c.q, ubik.QueryOptions{})
			}()
			if err == nil || q != nil {
				t.Fatalf("StartPlan = %v, %v; want an error", q, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
	// A well-formed hand-built plan starts.
	q, err := ubik.StartRawPlan(eng, &plan.Query{Name: "x", Source: src(), Keys: []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: g}},
		Select: []plan.OutputColumn{{Name: "g", Expr: g}}}, ubik.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
}

// PushRow repairs invalid UTF-8 as the decoders do, without changing the
// caller's row: cells that render alike are one group.
func TestPushRowRepairsUTF8(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var keys []string
	var last string
	q, err := eng.Start(`CREATE SOURCE ev (g VARCHAR) WITH (format = 'jsonl');
SELECT g, count(*) AS n FROM ev GROUP BY g`, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		keys = append(keys, string(r.Key))
		last = string(r.Value)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\xff", "\xfe", "\ufffd"} {
		row := []ubik.Value{ubik.Varchar(s)}
		if err := q.PushRow(row); err != nil {
			t.Fatal(err)
		}
		if ubik.VarcharText(row[0]) != s {
			t.Fatalf("PushRow changed the caller's row: %q", ubik.VarcharText(row[0]))
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if keys[len(keys)-1] != `["\ufffd"]` || last != `{"g": "\ufffd", "n": 3}` {
		t.Fatalf("keys %q, last value %s; want one group [\"\\ufffd\"] with n 3", keys, last)
	}
	// Not only the key: the cell itself is repaired, so a DISTINCT sees
	// one value.
	q, err = eng.Start(`CREATE SOURCE ev (g VARCHAR) WITH (format = 'jsonl');
SELECT count(DISTINCT g) AS d FROM ev`, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		last = string(r.Value)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\xff", "\xfe", "\ufffd"} {
		if err := q.PushRow([]ubik.Value{ubik.Varchar(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if last != `{"d": 1}` {
		t.Fatalf("count(DISTINCT g) = %s, want 1", last)
	}
}
