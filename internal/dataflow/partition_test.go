package dataflow

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSatisfiesIsSound: whenever Satisfies(have, need) holds for two
// column placements under one rule, any two rows equal on need's columns
// are placed together by have (they are equal on have's columns), over
// random placements and rows of small random values. And it is not
// vacuous: it holds for some pairs and fails for others.
func TestSatisfiesIsSound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const width = 5
	pick := func() []int {
		var cols []int
		for c := range width {
			if r.IntN(3) == 0 {
				cols = append(cols, c)
			}
		}
		return cols
	}
	row := func() []int {
		v := make([]int, width)
		for i := range v {
			v[i] = r.IntN(3)
		}
		return v
	}
	equalOn := func(a, b []int, cols []int) bool {
		return !slices.ContainsFunc(cols, func(c int) bool { return a[c] != b[c] })
	}
	held, failed := 0, 0
	for range 5000 {
		have := Partitioning{Kind: Hash, Cols: pick()}
		need := Partitioning{Kind: Hash, Cols: pick()}
		if !Satisfies(have, need) {
			failed++
			continue
		}
		held++
		if len(have.Cols) == 0 {
			t.Fatalf("an empty placement satisfies %v", need.Cols)
		}
		for range 50 {
			a, b := row(), row()
			if equalOn(a, b, need.Cols) && !equalOn(a, b, have.Cols) {
				t.Fatalf("have %v satisfies need %v, but rows %v and %v, equal on need's columns, are apart", have.Cols, need.Cols, a, b)
			}
		}
	}
	if held == 0 || failed == 0 {
		t.Fatalf("held %d, failed %d: the property is vacuous", held, failed)
	}
}

// TestSatisfiesRules: a placement under one equality rule satisfies a
// need under another only when its rule is group identity and the need's
// join equality (values that join are always one group: the property
// exec.TestJoinEqualityProperty holds; a join equality keeps apart NULLs
// that group identity folds, so never the other way), an expression
// placement serves only the same expressions, and the kinds match as
// documented.
func TestSatisfiesRules(t *testing.T) {
	g := Partitioning{Kind: Hash, Rule: GroupIdentity, Cols: []int{0}}
	j := Partitioning{Kind: Hash, Rule: JoinEquality, Cols: []int{0}}
	e := Partitioning{Kind: Hash, Rule: GroupIdentity, Exprs: []string{"lower(k)"}}
	for _, c := range []struct {
		have, need Partitioning
		want       bool
	}{
		{g, j, true}, {j, g, false}, {g, g, true}, {j, j, true},
		{e, e, true}, {e, g, false}, {g, e, false},
		{Partitioning{Kind: Single}, g, true}, {g, Partitioning{Kind: Single}, false},
		{Partitioning{Kind: Any}, g, false}, {g, Partitioning{Kind: Any}, true},
		{Partitioning{Kind: Broadcast}, Partitioning{Kind: Broadcast}, true}, {g, Partitioning{Kind: Broadcast}, false},
	} {
		if got := Satisfies(c.have, c.need); got != c.want {
			t.Errorf("Satisfies(%s, %s) = %v, want %v", c.have, c.need, got, c.want)
		}
	}
}
