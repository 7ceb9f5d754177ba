package plan

import (
	"slices"
	"testing"
)

// TestColumnsRead: the columns an expression tree reads, whatever the
// node types on the way (functions, casts, CASE, arithmetic), each once
// and in order; none for a constant.
func TestColumnsRead(t *testing.T) {
	const src = `CREATE SOURCE ev (a VARCHAR, b BIGINT, c DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);
`
	for _, c := range []struct {
		key  string
		want []int
	}{
		{"a", []int{0}},
		{"lower(a) || CAST(b AS VARCHAR)", []int{0, 1}},
		{"CASE WHEN c > 0 THEN b ELSE b + 1 END", []int{1, 2}},
		{"CAST(b AS DOUBLE) * c + b", []int{1, 2}},
		{"'x'", nil},
	} {
		prog, err := Compile(src+"SELECT count(*) AS n FROM ev GROUP BY "+c.key, CompileOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		e := prog.Queries[0].Keys[0].Expr
		got := ColumnsRead(e)
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("GROUP BY %s: reads %v, want %v", c.key, got, c.want)
		}
		want := -1
		if len(c.want) > 0 {
			want = c.want[len(c.want)-1]
		}
		if m := MaxColumn(e); m != want {
			t.Errorf("GROUP BY %s: max column %d, want %d", c.key, m, want)
		}
	}
}
