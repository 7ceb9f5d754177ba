package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// testSources are registered (as through the Go API) for every binder case.
func testSources() []*Source {
	return []*Source{
		{
			Name: "events",
			Columns: []Column{
				{Name: "customer", Type: types.Varchar}, {Name: "amount", Type: types.Decimal(10, 2)}, {Name: "qty", Type: types.Integer},
				{Name: "price", Type: types.Double}, {Name: "ts", Type: types.Timestamp}, {Name: "other_ts", Type: types.Timestamp},
				{Name: "flag", Type: types.Boolean}, {Name: "d", Type: types.Date}, {Name: "big", Type: types.BigInt}, {Name: "huge", Type: types.HugeInt},
				{Name: "span", Type: types.Interval}, {Name: "payload", Type: types.Varchar, JSON: true},
			},
			TimeCol:        4,
			WatermarkDelay: 5_000_000,
		},
		{
			Name:    "nowm",
			Columns: []Column{{Name: "k", Type: types.Varchar}, {Name: "ts", Type: types.Timestamp}, {Name: "v", Type: types.BigInt}},
			TimeCol: -1,
		},
	}
}

func compileOutput(sql string) string {
	prog, err := Compile(sql, CompileOptions{Sources: testSources(), DefaultName: "q"})
	if err != nil {
		var pe *parser.Error
		if !errors.As(err, &pe) {
			return "non-positioned error: " + err.Error()
		}
		return "error: " + pe.Error() + "\n" + pe.Caret()
	}
	var b strings.Builder
	for _, s := range prog.Sources[2:] {
		b.WriteString(explainSource(s))
	}
	for _, q := range prog.Queries {
		b.WriteString(q.Explain())
	}
	for _, s := range prog.Sinks {
		b.WriteString("sink " + s.Name + " from " + s.Query + explainOptions(s.Options) + "\n")
	}
	return b.String()
}

// TestBindGolden runs testdata/bind.txt (programs, explained) and
// testdata/bind_errors.txt (errors with positions). -update rewrites them.
func TestBindGolden(t *testing.T) {
	runGolden(t, "testdata/bind.txt", compileOutput)
	runGolden(t, "testdata/bind_errors.txt", compileOutput)
}

func TestRegisteredSourceValidation(t *testing.T) {
	bad := []*Source{
		nil,
		{Name: "", Columns: []Column{{Name: "a", Type: types.Integer}}, TimeCol: -1},
		{Name: "s", TimeCol: -1},
		{Name: "s", Columns: []Column{{Name: "a", Type: types.Integer}, {Name: "A", Type: types.Integer}}, TimeCol: -1},
		{Name: "s", Columns: []Column{{Name: "a", Type: types.Integer}}, TimeCol: 0},
		{Name: "s", Columns: []Column{{Name: "a", Type: types.Integer}}, TimeCol: 3},
		{Name: "s", Columns: []Column{{Name: "a", Type: types.Decimal(40, 2)}}, TimeCol: -1},
	}
	for i, s := range bad {
		_, err := Compile("SELECT count(*) FROM s", CompileOptions{Sources: []*Source{s}})
		if !errors.Is(err, ErrInvalidSource) {
			t.Errorf("case %d: error %v, want ErrInvalidSource", i, err)
		}
	}
	src := testSources()
	_, err := Compile("SELECT count(*) FROM events", CompileOptions{Sources: append(src, src[0])})
	if !errors.Is(err, ErrInvalidSource) {
		t.Errorf("duplicate registered source: %v", err)
	}
}
