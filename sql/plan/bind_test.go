package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/sql/parser"
	"github.com/ubiksql/ubik/types"
)

// testSources are registered (as through the Go API) for every binder case.
func testSources() []*Source {
	return []*Source{
		{
			Name: "events",
			Columns: []Column{
				{"customer", types.Varchar}, {"amount", types.Decimal(10, 2)}, {"qty", types.Integer},
				{"price", types.Double}, {"ts", types.Timestamp}, {"other_ts", types.Timestamp},
				{"flag", types.Boolean}, {"d", types.Date}, {"big", types.BigInt}, {"huge", types.HugeInt},
				{"span", types.Interval},
			},
			TimeCol:        4,
			WatermarkDelay: 5_000_000,
		},
		{
			Name:    "nowm",
			Columns: []Column{{"k", types.Varchar}, {"ts", types.Timestamp}, {"v", types.BigInt}},
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
		{Name: "", Columns: []Column{{"a", types.Integer}}, TimeCol: -1},
		{Name: "s", TimeCol: -1},
		{Name: "s", Columns: []Column{{"a", types.Integer}, {"A", types.Integer}}, TimeCol: -1},
		{Name: "s", Columns: []Column{{"a", types.Integer}}, TimeCol: 0},
		{Name: "s", Columns: []Column{{"a", types.Integer}}, TimeCol: 3},
		{Name: "s", Columns: []Column{{"a", types.Decimal(40, 2)}}, TimeCol: -1},
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
