package plan

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/ubiksql/ubik/internal/types"
)

// 128-bit helpers for HUGEINT and DECIMAL arithmetic. They work on the
// magnitude (an unsigned 128-bit pair) and a sign, and never allocate except
// for the rare rescales by more than 19 digits, which go through math/big.

type u128 struct{ hi, lo uint64 }

// pow10u64[i] = 10^i for i <= 19.
var pow10u64 = func() [20]uint64 {
	var t [20]uint64
	t[0] = 1
	for i := 1; i < 20; i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// pow10i128[i] = 10^i for i <= 38, as signed 128-bit values.
var pow10i128 = func() [39]types.Int128 {
	var t [39]types.Int128
	b := big.NewInt(1)
	ten := big.NewInt(10)
	for i := 0; i <= 38; i++ {
		t[i], _ = types.Int128FromBig(b)
		b = new(big.Int).Mul(b, ten)
	}
	return t
}()

var pow10f = func() [39]float64 {
	var t [39]float64
	for i := range t {
		t[i] = math.Pow10(i)
	}
	return t
}()

func absI128(a types.Int128) (u128, bool) {
	neg := a.Hi < 0
	if neg {
		a = a.Neg()
	}
	return u128{uint64(a.Hi), a.Lo}, neg
}

// fromMag converts a magnitude and sign back; ok is false if it does not fit.
func fromMag(m u128, neg bool) (types.Int128, bool) {
	if m.hi > math.MaxInt64 {
		if neg && m.hi == 1<<63 && m.lo == 0 {
			return types.Int128{Hi: math.MinInt64}, true
		}
		return types.Int128{}, false
	}
	r := types.Int128{Hi: int64(m.hi), Lo: m.lo}
	if neg {
		r = r.Neg()
	}
	return r, true
}

// mulI128 multiplies with overflow detection.
func mulI128(a, b types.Int128) (types.Int128, bool) {
	am, an := absI128(a)
	bm, bn := absI128(b)
	if am.hi != 0 && bm.hi != 0 {
		return types.Int128{}, false
	}
	hi, lo := bits.Mul64(am.lo, bm.lo)
	c1h, c1 := bits.Mul64(am.hi, bm.lo)
	c2h, c2 := bits.Mul64(am.lo, bm.hi)
	if c1h != 0 || c2h != 0 {
		return types.Int128{}, false
	}
	var carry uint64
	hi, carry = bits.Add64(hi, c1, 0)
	if carry != 0 {
		return types.Int128{}, false
	}
	hi, carry = bits.Add64(hi, c2, 0)
	if carry != 0 {
		return types.Int128{}, false
	}
	return fromMag(u128{hi, lo}, an != bn)
}

// divModU64 divides a magnitude by d.
func divModU64(m u128, d uint64) (u128, uint64) {
	qh := m.hi / d
	r := m.hi % d
	ql, r := bits.Div64(r, m.lo, d)
	return u128{qh, ql}, r
}

// absLess reports whether |a| < limit (limit positive).
func absLess(a, limit types.Int128) bool {
	if a.Hi < 0 {
		a = a.Neg()
		if a.Hi < 0 { // the minimum value
			return false
		}
	}
	return a.Cmp(limit) < 0
}

// scaleUp multiplies by 10^k with overflow detection.
func scaleUp(a types.Int128, k int) (types.Int128, bool) {
	if k == 0 {
		return a, true
	}
	if k > 38 {
		return a, a.Sign() == 0
	}
	return mulI128(a, pow10i128[k])
}

// scaleDownRound divides by 10^k rounding half away from zero (DuckDB's
// DECIMAL rescale and DECIMAL -> integer rounding).
func scaleDownRound(a types.Int128, k int) types.Int128 {
	if k == 0 {
		return a
	}
	m, neg := absI128(a)
	if k <= 19 {
		d := pow10u64[k]
		q, r := divModU64(m, d)
		if r >= d-r {
			q.lo++
			if q.lo == 0 {
				q.hi++
			}
		}
		res, _ := fromMag(q, neg)
		return res
	}
	// Rare: more than 19 digits at once.
	b := a.Big()
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
	q, r := new(big.Int).QuoRem(b, den, new(big.Int))
	r.Abs(r).Lsh(r, 1)
	if r.Cmp(den) >= 0 {
		if b.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	res, _ := types.Int128FromBig(q)
	return res
}

// i128ToFloat converts the way DuckDB does for DECIMAL -> DOUBLE: the
// integer as a double divided by 10^scale.
func decToFloat(a types.Int128, scale uint8) float64 {
	return a.Float64() / pow10f[scale]
}

// roundHalfEven is DuckDB's (and PostgreSQL's) DOUBLE -> integer rounding:
// std::nearbyint in the default rounding mode.
func roundHalfEven(f float64) float64 { return math.RoundToEven(f) }

// floatToI128 converts an integral double in range to Int128.
func floatToI128(f float64) (types.Int128, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f >= 1.7014118346046923e38 || f < -1.7014118346046923e38 {
		return types.Int128{}, false
	}
	if f >= -9.2e18 && f <= 9.2e18 {
		return types.I128(int64(f)), true
	}
	bf := new(big.Float).SetFloat64(f)
	bi, _ := bf.Int(nil)
	return types.Int128FromBig(bi)
}

// decimal128 helpers on values.

func i128Of(v types.Value) types.Int128 { return types.Int128{Hi: v.Hi, Lo: uint64(v.I)} }

func widenToI128(v types.Value) types.Int128 {
	switch v.Kind {
	case types.KindHugeInt, types.KindDecimal:
		return i128Of(v)
	}
	return types.I128(v.I)
}

// fmtDecimal renders an unscaled integer with scale digits after the point,
// keeping every scale digit (DuckDB: 1.500, -0.005).
func fmtDecimal(a types.Int128, scale uint8) string {
	s := a.String()
	if scale == 0 {
		return s
	}
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	for len(s) <= int(scale) {
		s = "0" + s
	}
	s = s[:len(s)-int(scale)] + "." + s[len(s)-int(scale):]
	if neg {
		s = "-" + s
	}
	return s
}
