package exec

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// The three equality rules, each checked against its definition written
// out here over random keys of one to three cells drawn from the values
// where the rules differ: NULL, NaN (several payloads and signs), ±Inf,
// ±0, other doubles, strings valid and invalid, integers, decimals.

// eqPool returns a random value of the kind k (0 DOUBLE, 1 VARCHAR,
// 2 BIGINT, 3 DECIMAL(10,2)), NULL one time in eight.
func eqPool(r *rand.Rand, k int) types.Value {
	typ := []types.Type{types.Double, types.Varchar, types.BigInt, types.Decimal(10, 2)}[k]
	if r.IntN(8) == 0 {
		return types.NullOf(typ)
	}
	switch k {
	case 0:
		return types.Float([]float64{math.NaN(), -math.NaN(), math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000002),
			math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1.5, -1.5, 5e-324, math.MaxFloat64}[r.IntN(12)])
	case 1:
		return types.Str([]string{"", "a", "A", "x\xffy", "x\xfey", "x\ufffdy", "é", "e\u0301", "\x00"}[r.IntN(9)])
	case 2:
		return types.Big(r.Int64N(5) - 2)
	}
	v := types.Dec(types.Int128{Lo: uint64(r.Int64N(3)), Hi: 0}, 2)
	return v
}

func eqKey(r *rand.Rand, kinds []int) []types.Value {
	out := make([]types.Value, len(kinds))
	for i, k := range kinds {
		out[i] = eqPool(r, k)
	}
	return out
}

// sqlEqual is SQL's = on two non-NULL cells of one type, with NaN equal
// to NaN (PostgreSQL's rule); strings compare as they render (the
// decoder repairs invalid UTF-8 before any rule sees a value).
func sqlEqual(a, b types.Value, repair bool) bool {
	switch a.Kind {
	case types.KindDouble:
		if math.IsNaN(a.F) || math.IsNaN(b.F) {
			return math.IsNaN(a.F) && math.IsNaN(b.F)
		}
		return a.F == b.F
	case types.KindVarchar:
		if repair {
			return changelog.RepairUTF8(a.S) == changelog.RepairUTF8(b.S)
		}
		return a.S == b.S
	}
	return a.I == b.I && a.Hi == b.Hi
}

func eachPair(t *testing.T, check func(r *rand.Rand, a, b []types.Value)) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 32))
	for range 20000 {
		kinds := make([]int, 1+r.IntN(3))
		for i := range kinds {
			kinds[i] = r.IntN(4)
		}
		check(r, eqKey(r, kinds), eqKey(r, kinds))
	}
}

// Join equality: keys meet exactly when no cell is NULL and every cell
// is SQL-equal; and keys that meet are one group, so a host may route a
// join's rows by group identity.
func TestJoinEqualityProperty(t *testing.T) {
	eachPair(t, func(_ *rand.Rand, a, b []types.Value) {
		want := true
		for i := range a {
			want = want && !a[i].Null && !b[i].Null && sqlEqual(a[i], b[i], true)
		}
		ka, oka := joinKeyOf(a)
		kb, okb := joinKeyOf(b)
		if got := oka && okb && string(ka) == string(kb); got != want {
			t.Fatalf("%v and %v: join keys equal %v, want %v", a, b, got, want)
		}
		if want && string(AppendGroupIdentity(nil, a)) != string(AppendGroupIdentity(nil, b)) {
			t.Fatalf("%v and %v join but are not one group", a, b)
		}
	})
}

// joinKeyOf is the join key of cells as the joins take it: none (false)
// when a cell is NULL.
func joinKeyOf(cells []types.Value) ([]byte, bool) {
	for _, c := range cells {
		if c.Null {
			return nil, false
		}
	}
	return appendJoinKey(nil, cells), true
}

// Distinct identity: two values are one exactly when both are NULL or
// neither is and they are SQL-equal, strings byte for byte (IS NOT
// DISTINCT FROM).
func TestDistinctIdentityProperty(t *testing.T) {
	eachPair(t, func(_ *rand.Rand, a, b []types.Value) {
		for i := range a {
			want := a[i].Null == b[i].Null && (a[i].Null || sqlEqual(a[i], b[i], false))
			if got := string(appendDistinctCell(nil, a[i])) == string(appendDistinctCell(nil, b[i])); got != want {
				t.Fatalf("%#v and %#v: distinct identity equal %v, want %v", a[i], b[i], got, want)
			}
		}
	})
}

// Group identity: two keys are one group exactly when every cell renders
// as the same contract key text (NULL, NaN and ±Inf all as null).
func TestGroupIdentityRule(t *testing.T) {
	eachPair(t, func(_ *rand.Rand, a, b []types.Value) {
		want := true
		for i := range a {
			want = want && keyCellText(a[i]) == keyCellText(b[i])
		}
		if got := string(AppendGroupIdentity(nil, a)) == string(AppendGroupIdentity(nil, b)); got != want {
			t.Fatalf("%v and %v: group identities equal %v, want %v", a, b, got, want)
		}
	})
}
