package changelog

import (
	"math"
	"math/bits"
	"strconv"
)

// appendDouble appends f as Python's repr(float), which is also DuckDB's
// DOUBLE-to-VARCHAR text: the shortest digits that round-trip, in fixed
// notation with at least one fractional digit when the decimal exponent e of
// the leading digit satisfies -4 <= e < 16, else in scientific notation with
// a signed exponent of at least two digits (1e+16, 1.234e-05, 5e-324).
// NaN and the infinities have no JSON number and render as null.
func appendDouble(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if out, ok := appendShortDecimal(dst, f); ok {
		return out
	}
	return appendDoubleGeneral(dst, f)
}

// pow10 holds the exact doubles 10^0 .. 10^8.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// digitPairs holds "00" .. "99".
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendShortDecimal is appendDouble's shortcut for a double that is the
// correctly rounded value of a decimal n / 10^k with k <= 8 and at most 15
// significant digits in n, 1e-4 <= |f| < 1e15 (prices, sums of prices,
// counts as doubles). Such a decimal's digits are the shortest that round-trip:
// any two decimals of at most 15 significant digits round to different
// doubles (10^15 < 2^52), so no shorter string, and no other of the same
// length, gives f back. It reports false for anything else, which takes
// the general path; FuzzAppendDouble holds the two to the same bytes.
func appendShortDecimal(dst []byte, f float64) ([]byte, bool) {
	a := math.Abs(f)
	if !(a >= 1e-4 && a < 1e15) {
		return dst, false
	}
	for k := 0; k < len(pow10); k++ { // by index: ranging over the array would copy it
		p := pow10[k]
		m := a * p
		if m >= 1e15 {
			return dst, false
		}
		n := uint64(m + 0.5)
		if float64(n)/p != a {
			continue
		}
		// n / 10^k is f's decimal; n has no trailing zero unless k = 0
		// (a smaller k would have matched). Write it fixed: the integer
		// digits, '.', k fraction digits (zero-padded), or ".0"; two
		// digits per division.
		var buf [24]byte
		i := len(buf)
		if k == 0 {
			i--
			buf[i] = '0'
		} else {
			j := k
			for ; j >= 2; j -= 2 {
				q := n / 100
				r := n - q*100
				i -= 2
				buf[i], buf[i+1] = digitPairs[2*r], digitPairs[2*r+1]
				n = q
			}
			if j == 1 {
				q := n / 10
				i--
				buf[i] = byte('0' + n - q*10)
				n = q
			}
		}
		i--
		buf[i] = '.'
		for n >= 100 {
			q := n / 100
			r := n - q*100
			i -= 2
			buf[i], buf[i+1] = digitPairs[2*r], digitPairs[2*r+1]
			n = q
		}
		if n >= 10 {
			i -= 2
			buf[i], buf[i+1] = digitPairs[2*n], digitPairs[2*n+1]
		} else {
			i--
			buf[i] = byte('0' + n)
		}
		if f < 0 {
			i--
			buf[i] = '-'
		}
		return append(dst, buf[i:]...), true
	}
	return dst, false
}

// appendDoubleGeneral is appendDouble for a finite f by strconv's shortest
// digits.
func appendDoubleGeneral(dst []byte, f float64) []byte {
	// Go's shortest 'e' form has the same digits and exponent syntax as
	// Python's repr in scientific notation; both pick the shortest digit
	// string that round-trips, nearest to the exact value on ties.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)

	// e is [-]d[.ddd]e(+|-)dd[d]; take it apart.
	i := 0
	neg := e[0] == '-'
	if neg {
		i = 1
	}
	var digits [17]byte
	nd := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[nd] = e[i]
			nd++
		}
	}
	i++ // 'e'
	expNeg := e[i] == '-'
	exp := 0
	for i++; i < len(e); i++ {
		exp = exp*10 + int(e[i]-'0')
	}
	if expNeg {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		return append(dst, e...)
	}

	if neg {
		dst = append(dst, '-')
	}
	if exp < 0 {
		// 0.000ddd
		dst = append(dst, '0', '.')
		for range -exp - 1 {
			dst = append(dst, '0')
		}
		return append(dst, digits[:nd]...)
	}
	// exp+1 integer digits, padded with zeros when the digits run out.
	if nd <= exp+1 {
		dst = append(dst, digits[:nd]...)
		for range exp + 1 - nd {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	}
	dst = append(dst, digits[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, digits[exp+1:nd]...)
}

// appendInt128 appends the 128-bit two's complement integer (hi, lo) in
// decimal with scale digits after a decimal point: DuckDB's DECIMAL text
// (1.500, -0.500, 0.001) or, with scale 0, a plain integer (HUGEINT).
//
// DuckDB omits the leading 0 of a DECIMAL(s,s) ("0.5" prints ".5"); the
// contract always writes it, because the cell is a JSON number and a Value
// does not carry the width.
func appendInt128(dst []byte, hi int64, lo uint64, scale int) []byte {
	uhi := uint64(hi)
	if hi < 0 {
		dst = append(dst, '-')
		var borrow uint64
		lo, borrow = bits.Sub64(0, lo, 0)
		uhi, _ = bits.Sub64(0, uhi, borrow)
	}
	var buf [40]byte // 2^127 has 39 digits
	n := formatUint128(&buf, uhi, lo)
	digits := buf[len(buf)-n:]
	if scale == 0 {
		return append(dst, digits...)
	}
	if n <= scale {
		dst = append(dst, '0', '.')
		for range scale - n {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[:n-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[n-scale:]...)
}

// formatUint128 writes the decimal digits of the unsigned (hi, lo) at the end
// of buf and returns how many it wrote (at least 1).
func formatUint128(buf *[40]byte, hi, lo uint64) int {
	const e19 = 10_000_000_000_000_000_000
	i := len(buf)
	for hi != 0 {
		// (hi, lo) = q*1e19 + r; the 19 low digits are r, zero-padded.
		var r uint64
		q1 := hi / e19
		lo, r = bits.Div64(hi%e19, lo, e19)
		hi = q1
		for range 19 {
			i--
			buf[i] = byte('0' + r%10)
			r /= 10
		}
	}
	for lo >= 10 {
		i--
		buf[i] = byte('0' + lo%10)
		lo /= 10
	}
	i--
	buf[i] = byte('0' + lo)
	return len(buf) - i
}
