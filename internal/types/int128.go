package types

import (
	"math/big"
	"math/bits"
)

// Int128 is a signed 128-bit two's complement integer. It backs HUGEINT and
// DECIMAL so that sum over BIGINT never overflows silently (DuckDB widens the
// same way). Written here rather than imported because the few operations we
// need (add with overflow check, compare, format) are short and allocation
// free on the hot path; formatting goes through math/big and is off it.
type Int128 struct {
	Hi int64
	Lo uint64
}

// I128 widens an int64.
func I128(x int64) Int128 { return Int128{Hi: x >> 63, Lo: uint64(x)} }

// Add returns a+b and whether the addition overflowed.
func (a Int128) Add(b Int128) (Int128, bool) {
	lo, c := bits.Add64(a.Lo, b.Lo, 0)
	hi := a.Hi + b.Hi + int64(c)
	// Signed overflow: both operands have the same sign and the result differs.
	overflow := (a.Hi >= 0) == (b.Hi >= 0) && (hi >= 0) != (a.Hi >= 0)
	return Int128{Hi: hi, Lo: lo}, overflow
}

// Neg returns -a (wrapping for the minimum value).
func (a Int128) Neg() Int128 {
	lo, b := bits.Sub64(0, a.Lo, 0)
	return Int128{Hi: -a.Hi - int64(b), Lo: lo}
}

// Sub returns a-b and whether it overflowed.
func (a Int128) Sub(b Int128) (Int128, bool) {
	lo, br := bits.Sub64(a.Lo, b.Lo, 0)
	hi := a.Hi - b.Hi - int64(br)
	overflow := (a.Hi >= 0) != (b.Hi >= 0) && (hi >= 0) != (a.Hi >= 0)
	return Int128{Hi: hi, Lo: lo}, overflow
}

// Cmp compares a and b: -1, 0 or +1.
func (a Int128) Cmp(b Int128) int {
	switch {
	case a.Hi < b.Hi:
		return -1
	case a.Hi > b.Hi:
		return 1
	case a.Lo < b.Lo:
		return -1
	case a.Lo > b.Lo:
		return 1
	}
	return 0
}

// IsInt64 reports whether a fits in an int64.
func (a Int128) IsInt64() bool { return a.Hi == int64(a.Lo)>>63 }

// Sign returns -1, 0 or +1.
func (a Int128) Sign() int {
	if a.Hi < 0 {
		return -1
	}
	if a.Hi == 0 && a.Lo == 0 {
		return 0
	}
	return 1
}

// Big converts to a math/big integer.
func (a Int128) Big() *big.Int {
	b := new(big.Int).SetUint64(uint64(a.Hi))
	b.Lsh(b, 64)
	b.Or(b, new(big.Int).SetUint64(a.Lo))
	if a.Hi < 0 {
		b.Sub(b, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return b
}

// Int128FromBig converts from math/big; ok is false if b does not fit.
func Int128FromBig(b *big.Int) (Int128, bool) {
	if b.BitLen() > 127 {
		// -2^127 has BitLen 128 but fits.
		min := new(big.Int).Lsh(big.NewInt(1), 127)
		min.Neg(min)
		if b.Cmp(min) != 0 {
			return Int128{}, false
		}
		return Int128{Hi: -1 << 63, Lo: 0}, true
	}
	m := new(big.Int).Set(b)
	if m.Sign() < 0 {
		m.Add(m, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	lo := new(big.Int).And(m, new(big.Int).SetUint64(^uint64(0))).Uint64()
	hi := new(big.Int).Rsh(m, 64).Uint64()
	return Int128{Hi: int64(hi), Lo: lo}, true
}

// String formats a in decimal.
func (a Int128) String() string {
	if a.IsInt64() {
		return big.NewInt(int64(a.Lo)).String()
	}
	return a.Big().String()
}

// Float64 converts a to the nearest double.
func (a Int128) Float64() float64 {
	if a.IsInt64() {
		return float64(int64(a.Lo))
	}
	f, _ := new(big.Float).SetInt(a.Big()).Float64()
	return f
}
