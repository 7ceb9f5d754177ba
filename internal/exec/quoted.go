package exec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/types"
)

// quotedNumber converts a JSON string in a numeric column, as DuckDB's
// read_json does with explicit column types (JavaScript producers send
// integers above 2^53 as strings, CDC tools send decimals as strings). The
// rules, per type, are DuckDB 1.5's:
//
//   - DOUBLE: optional leading whitespace, then a number: an optional '-'
//     (no '+'), digits with an optional fraction ('.5' and '5.' included)
//     and an optional exponent; or nan, inf, infinity in any case. No
//     trailing characters (whitespace included), no leading zero before
//     another digit ('01.5'). Rounded to nearest; beyond the range it is
//     ±Inf.
//   - INTEGER, BIGINT: optional whitespace on both sides, then an optional
//     '-' and decimal digits (no leading zero before another digit), or a
//     non-negative 0x hexadecimal or 0b binary literal; no fraction, no
//     exponent; out of the type's range is an error.
//   - HUGEINT: as BIGINT, decimal digits only.
//   - DECIMAL: optional whitespace on both sides around the text an
//     unquoted decimal number accepts (sign, digits, fraction, exponent),
//     rounded half away from zero to the scale.
//
// The string is the JSON string after unescaping. The error text names the
// value and the type; the caller adds the column.
func quotedNumber(b []byte, t types.Type) (types.Value, string) {
	switch t.Kind {
	case types.KindDouble:
		if x, ok := quotedDouble(b); ok {
			return types.Float(x), ""
		}
	case types.KindInteger, types.KindBigInt:
		if x, ok := quotedInt64(b, t.Kind == types.KindInteger); ok {
			return types.Value{Kind: t.Kind, I: x}, ""
		}
	case types.KindHugeInt:
		if x, ok := quotedHugeInt(b); ok {
			return types.Huge(x), ""
		}
	case types.KindDecimal:
		x, err := types.ParseDecimal(trimSpace(b), t.Width, t.Scale)
		if err != nil {
			return types.Value{}, err.Error()
		}
		return types.Dec(x, t.Scale), ""
	}
	return types.Value{}, fmt.Sprintf("cannot cast the string %s to %s", strconv.Quote(clipText(b)), t)
}

func clipText(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// isSpace is DuckDB's whitespace for casts: space, \t, \n, \v, \f, \r.
func isSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func quotedDouble(b []byte) (float64, bool) {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	if len(b) > 1 && b[0] == '0' && isDigit(b[1]) {
		return 0, false
	}
	neg := len(b) > 0 && b[0] == '-'
	rest := b
	if neg {
		rest = b[1:]
	}
	switch strings.ToLower(string(rest)) {
	case "nan":
		return math.NaN(), true
	case "inf", "infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	i, digits := 0, 0
	for i < len(rest) && isDigit(rest[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(rest) && rest[i] == '.' {
		i++
		for i < len(rest) && isDigit(rest[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(rest) && (rest[i] == 'e' || rest[i] == 'E') {
		i++
		if i < len(rest) && (rest[i] == '+' || rest[i] == '-') {
			i++
		}
		exp := 0
		for i < len(rest) && isDigit(rest[i]) {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(rest) {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // ±Inf beyond the range is the value
		return 0, false
	}
	return x, true
}

// intText splits an integer string into its sign and digits after the
// checks BIGINT and HUGEINT share; base is 10, 16 or 2 (the last two only
// when prefixes is set).
func intText(b []byte, prefixes bool) (neg bool, digits []byte, base int, ok bool) {
	b = trimSpace(b)
	if len(b) > 1 && b[0] == '0' && isDigit(b[1]) {
		return false, nil, 0, false
	}
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	base = 10
	if prefixes && !neg && len(b) > 2 && b[0] == '0' {
		switch b[1] {
		case 'x', 'X':
			base, b = 16, b[2:]
		case 'b', 'B':
			base, b = 2, b[2:]
		}
	}
	if len(b) == 0 {
		return false, nil, 0, false
	}
	for _, c := range b {
		switch {
		case isDigit(c) && int(c-'0') < base:
		case base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return false, nil, 0, false
		}
	}
	return neg, b, base, true
}

func quotedInt64(b []byte, int32Range bool) (int64, bool) {
	neg, digits, base, ok := intText(b, true)
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(string(digits), base, 64)
	if err != nil {
		return 0, false
	}
	var x int64
	switch {
	case !neg && u <= math.MaxInt64:
		x = int64(u)
	case neg && u <= 1<<63:
		x = -int64(u) // -(1<<63) wraps to itself, MinInt64
	default:
		return 0, false
	}
	if int32Range && (x < math.MinInt32 || x > math.MaxInt32) {
		return 0, false
	}
	return x, true
}

func quotedHugeInt(b []byte) (types.Int128, bool) {
	neg, digits, _, ok := intText(b, false)
	if !ok {
		return types.Int128{}, false
	}
	v, ok := new(big.Int).SetString(string(digits), 10)
	if !ok {
		return types.Int128{}, false
	}
	if neg {
		v.Neg(v)
	}
	return types.Int128FromBig(v)
}
