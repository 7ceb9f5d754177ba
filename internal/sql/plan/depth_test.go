package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

func compileErr(sql string) (*Program, *parser.Error, error) {
	prog, err := Compile(sql, CompileOptions{Sources: testSources(), DefaultName: "q"})
	var pe *parser.Error
	errors.As(err, &pe)
	return prog, pe, err
}

// TestFlatChainIsNotNesting: a long flat chain of operators (a generated
// a+a+...+a) is length, not nesting; it compiles and evaluates. Parentheses,
// function calls and prefix operators are nesting, bounded by the parser's
// depth limit; an overlong chain has its own bound and message.
func TestFlatChainIsNotNesting(t *testing.T) {
	for _, op := range []string{"+", "||", " AND ", " OR ", "*"} {
		x := "big"
		switch op {
		case "||":
			x = "customer"
		case " AND ", " OR ":
			x = "flag"
		}
		sql := "SELECT " + strings.Repeat(x+op, 999) + x + " AS v, count(*) AS n FROM events GROUP BY 1"
		prog, _, err := compileErr(sql)
		if err != nil {
			t.Fatalf("1,000-term %q chain: %v", op, err)
		}
		row := make([]types.Value, 12)
		row[0], row[6], row[8] = types.Str("c"), types.Bool(true), types.Big(1)
		v, err := prog.Queries[0].Keys[0].Expr.Eval(row)
		if err != nil {
			t.Fatalf("1,000-term %q chain: eval: %v", op, err)
		}
		if want := map[string]string{"+": "1000", "*": "1", "||": strings.Repeat("c", 1000), " AND ": "true", " OR ": "true"}[op]; ValueText(v) != want {
			t.Fatalf("1,000-term %q chain = %s, want %s", op, ValueText(v), want)
		}
	}
	// A right-nested chain of the same length is nesting.
	sql := "SELECT " + strings.Repeat("big + (", 999) + "big" + strings.Repeat(")", 999) + " AS v, count(*) FROM events GROUP BY 1"
	if _, pe, _ := compileErr(sql); pe == nil || !strings.Contains(pe.Msg, "nested too deeply") {
		t.Fatalf("999 nested parentheses: %v", pe)
	}
	// The nesting bound: maxNesting levels parse, one more does not.
	ok := "SELECT " + strings.Repeat("abs(", MaxNesting-2) + "big" + strings.Repeat(")", MaxNesting-2) + " AS v, count(*) FROM events GROUP BY 1"
	if _, _, err := compileErr(ok); err != nil {
		t.Fatalf("%d nested calls: %v", MaxNesting-2, err)
	}
	bad := "SELECT " + strings.Repeat("abs(", MaxNesting+1) + "big" + strings.Repeat(")", MaxNesting+1) + " AS v, count(*) FROM events GROUP BY 1"
	if _, pe, _ := compileErr(bad); pe == nil || !strings.Contains(pe.Msg, "nested too deeply") {
		t.Fatalf("%d nested calls: %v", MaxNesting+1, pe)
	}
	// The chain bound.
	long := "SELECT " + strings.Repeat("big+", MaxChain) + "big AS v, count(*) FROM events GROUP BY 1"
	if _, pe, _ := compileErr(long); pe == nil || !strings.Contains(pe.Msg, "operators in one expression") {
		t.Fatalf("%d-operator chain: %v", MaxChain, pe)
	}
	atLimit := "SELECT " + strings.Repeat("big+", MaxChain-1) + "big AS v, count(*) FROM events GROUP BY 1"
	if _, _, err := compileErr(atLimit); err != nil {
		t.Fatalf("%d-operator chain: %v", MaxChain-1, err)
	}
}
