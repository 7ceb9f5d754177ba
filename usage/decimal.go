package usage

import (
	"fmt"
	"math/big"
	"strings"
)

// SumDecimals adds exact decimals. Backends use it to total their groups, so
// the overall Sum is exactly the sum of the group sums.
func SumDecimals(ds ...Decimal) (Decimal, error) {
	total := new(big.Int)
	scale := 0
	type part struct {
		v     *big.Int
		scale int
	}
	parts := make([]part, 0, len(ds))
	for _, d := range ds {
		s := d.String()
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		ip, fp, _ := strings.Cut(s, ".")
		v, ok := new(big.Int).SetString(ip+fp, 10)
		if !ok {
			return "", fmt.Errorf("%w: %q is not a decimal", ErrInvalidValue, d)
		}
		if neg {
			v.Neg(v)
		}
		parts = append(parts, part{v, len(fp)})
		scale = max(scale, len(fp))
	}
	ten := big.NewInt(10)
	for _, p := range parts {
		v := p.v
		if p.scale < scale {
			v = new(big.Int).Mul(v, new(big.Int).Exp(ten, big.NewInt(int64(scale-p.scale)), nil))
		}
		total.Add(total, v)
	}
	s := total.String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return ParseDecimal(s)
}

// Finish fills Sum and Count from the groups and sorts them: the one way
// every backend completes an aggregate. When the query has neither GroupBy
// nor Window, the single group is folded into the totals and dropped.
func Finish(spec AggregateSpec, groups []GroupTotals) (Totals, error) {
	sums := make([]Decimal, len(groups))
	var t Totals
	for i, g := range groups {
		sums[i] = g.Sum
		t.Count += g.Count
	}
	sum, err := SumDecimals(sums...)
	if err != nil {
		return Totals{}, err
	}
	for _, d := range append(sums, sum) {
		if intDigits(d) > MaxQuantityIntDigits {
			return Totals{}, fmt.Errorf("%w: %s", ErrSumOutOfRange, d)
		}
	}
	t.Sum = sum
	if len(spec.GroupBy) > 0 || spec.WindowMs > 0 {
		SortGroups(groups)
		t.Groups = groups
	}
	return t, nil
}

// intDigits is the number of integer digits of a canonical decimal ("0.5"
// has one).
func intDigits(d Decimal) int {
	ip, _, _ := strings.Cut(strings.TrimPrefix(d.String(), "-"), ".")
	return len(ip)
}
