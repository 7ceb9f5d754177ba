package types

import (
	"fmt"
	"math/big"
)

var pow10Big = func() [39]*big.Int {
	var p [39]*big.Int
	p[0] = big.NewInt(1)
	for i := 1; i < len(p); i++ {
		p[i] = new(big.Int).Mul(p[i-1], big.NewInt(10))
	}
	return p
}()

// ParseDecimal parses a decimal number (optional sign, digits, optional
// fraction, optional exponent) into the unscaled integer of DECIMAL(width,
// scale), rounding half away from zero as DuckDB does when the text has more
// fraction digits than the scale. Text whose integer part needs more than
// width-scale digits is out of range.
func ParseDecimal(text []byte, width, scale uint8) (Int128, error) {
	if !isDecimalText(text) {
		return Int128{}, fmt.Errorf("%w: %q is not a number", ErrBadDecimal, clip(text))
	}
	r, ok := new(big.Rat).SetString(string(text))
	if !ok {
		return Int128{}, fmt.Errorf("%w: %q is not a number", ErrBadDecimal, clip(text))
	}
	r.Mul(r, new(big.Rat).SetInt(pow10Big[scale]))
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	// Round half away from zero.
	m.Abs(m).Lsh(m, 1)
	if m.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if new(big.Int).Abs(q).Cmp(pow10Big[width]) >= 0 {
		return Int128{}, fmt.Errorf("%w: %s does not fit DECIMAL(%d,%d)", ErrBadDecimal, clip(text), width, scale)
	}
	x, _ := Int128FromBig(q)
	return x, nil
}

// isDecimalText accepts [+-]digits[.digits][(e|E)[+-]digits] with at least
// one digit before the exponent (and ".5", "5."), and nothing else: big.Rat
// alone would also take "1/3" and hex.
func isDecimalText(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	digits := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			exp++
			if exp > 4 {
				return false // 10^9999 and beyond: out of any DECIMAL range anyway
			}
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(b)
}
