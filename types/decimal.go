package types

import (
	"errors"
	"fmt"
	"math/big"
)

// ErrBadDecimal is returned (wrapped) for text that is not a decimal in range.
var ErrBadDecimal = errors.New("types: bad decimal")

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
