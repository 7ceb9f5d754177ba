package plan

import (
	"errors"
	"fmt"
	"github.com/ubiksql/ubik/changelog"
	"math"
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/types"
)

func convErr(format string, args ...any) error {
	return &EvalError{Kind: ErrConversion, Msg: "Conversion Error: " + fmt.Sprintf(format, args...)}
}

func rangeErr(format string, args ...any) error {
	return &EvalError{Kind: ErrOutOfRange, Msg: "Out of Range Error: " + fmt.Sprintf(format, args...)}
}

// physName is DuckDB's internal type name used in its error messages.
func physName(t types.Type) string {
	switch t.Kind {
	case types.KindBoolean:
		return "BOOL"
	case types.KindInteger:
		return "INT32"
	case types.KindBigInt:
		return "INT64"
	case types.KindHugeInt:
		return "INT128"
	}
	return t.String()
}

// ---- text (cast to VARCHAR) ----

// ValueText renders a value as DuckDB's CAST(v AS VARCHAR), through the
// changelog encoder's text so that a cast and a key cell print alike.
func ValueText(v types.Value) string {
	if v.Null || v.Kind == types.KindNull {
		return "NULL"
	}
	return string(changelog.AppendText(nil, v))
}

// ---- casts ----

// castFn converts a non-NULL value; NULL handling is the caller's.
type castFn func(v types.Value) (types.Value, error)

// intRange returns the bounds of an integer type.
func intRange(k types.Kind) (int64, int64) {
	if k == types.KindInteger {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func mkInt(k types.Kind, i int64) types.Value { return types.Value{Kind: k, I: i} }

func castOutOfRange(from types.Type, text string, to types.Type) error {
	return convErr("Type %s with value %s can't be cast because the value is out of range for the destination type %s", physName(from), text, physName(to))
}

// castFunc returns the conversion from one type to another, or ok=false when
// SQL has no such cast.
func castFunc(from, to types.Type) (castFn, bool) {
	if from.Kind == types.KindNull {
		return func(types.Value) (types.Value, error) { return types.NullOf(to), nil }, true
	}
	if from == to {
		return func(v types.Value) (types.Value, error) { return v, nil }, true
	}
	if to.Kind == types.KindVarchar {
		return func(v types.Value) (types.Value, error) { return types.Str(ValueText(v)), nil }, true
	}
	if from.Kind == types.KindVarchar {
		return castFromText(to), true
	}
	switch to.Kind {
	case types.KindBoolean:
		switch from.Kind {
		case types.KindInteger, types.KindBigInt, types.KindHugeInt, types.KindDecimal:
			return func(v types.Value) (types.Value, error) { return types.Bool(v.I != 0 || v.Hi != 0), nil }, true
		case types.KindDouble:
			return func(v types.Value) (types.Value, error) { return types.Bool(v.F != 0), nil }, true
		}
	case types.KindInteger, types.KindBigInt:
		lo, hi := intRange(to.Kind)
		k := to.Kind
		switch from.Kind {
		case types.KindBoolean:
			return func(v types.Value) (types.Value, error) { return mkInt(k, v.I), nil }, true
		case types.KindInteger, types.KindBigInt:
			return func(v types.Value) (types.Value, error) {
				if v.I < lo || v.I > hi {
					return types.Value{}, castOutOfRange(from, strconv.FormatInt(v.I, 10), to)
				}
				return mkInt(k, v.I), nil
			}, true
		case types.KindHugeInt, types.KindDecimal:
			return func(v types.Value) (types.Value, error) {
				x := i128Of(v)
				if from.Kind == types.KindDecimal {
					x = scaleDownRound(x, int(v.Scale))
				}
				if !x.IsInt64() || int64(x.Lo) < lo || int64(x.Lo) > hi {
					return types.Value{}, castOutOfRange(from, ValueText(v), to)
				}
				return mkInt(k, int64(x.Lo)), nil
			}, true
		case types.KindDouble:
			return func(v types.Value) (types.Value, error) {
				r := roundHalfEven(v.F)
				if !(r >= float64(lo) && r < -float64(lo)) || (k == types.KindInteger && r > float64(hi)) {
					return types.Value{}, castOutOfRange(from, ValueText(types.Float(v.F)), to)
				}
				return mkInt(k, int64(r)), nil
			}, true
		}
	case types.KindHugeInt:
		switch from.Kind {
		case types.KindBoolean, types.KindInteger, types.KindBigInt:
			return func(v types.Value) (types.Value, error) { return types.Huge(types.I128(v.I)), nil }, true
		case types.KindDecimal:
			return func(v types.Value) (types.Value, error) {
				return types.Huge(scaleDownRound(i128Of(v), int(v.Scale))), nil
			}, true
		case types.KindDouble:
			return func(v types.Value) (types.Value, error) {
				x, ok := floatToI128(roundHalfEven(v.F))
				if !ok {
					return types.Value{}, castOutOfRange(from, ValueText(types.Float(v.F)), to)
				}
				return types.Huge(x), nil
			}, true
		}
	case types.KindDouble:
		switch from.Kind {
		case types.KindBoolean, types.KindInteger, types.KindBigInt:
			return func(v types.Value) (types.Value, error) { return types.Float(float64(v.I)), nil }, true
		case types.KindHugeInt:
			return func(v types.Value) (types.Value, error) { return types.Float(i128Of(v).Float64()), nil }, true
		case types.KindDecimal:
			return func(v types.Value) (types.Value, error) { return types.Float(decToFloat(i128Of(v), v.Scale)), nil }, true
		}
	case types.KindDecimal:
		limit := pow10i128[to.Width]
		scale := to.Scale
		overflow := func(v types.Value) error {
			return convErr("Could not cast value %s to %s", ValueText(v), to)
		}
		switch from.Kind {
		case types.KindBoolean, types.KindInteger, types.KindBigInt, types.KindHugeInt:
			return func(v types.Value) (types.Value, error) {
				x, ok := scaleUp(widenToI128(v), int(scale))
				if !ok || !absLess(x, limit) {
					return types.Value{}, overflow(v)
				}
				return types.Dec(x, scale), nil
			}, true
		case types.KindDecimal:
			return func(v types.Value) (types.Value, error) {
				x := i128Of(v)
				ok := true
				if scale >= v.Scale {
					x, ok = scaleUp(x, int(scale-v.Scale))
				} else {
					x = scaleDownRound(x, int(v.Scale-scale))
				}
				if !ok || !absLess(x, limit) {
					return types.Value{}, overflow(v)
				}
				return types.Dec(x, scale), nil
			}, true
		case types.KindDouble:
			lim := pow10f[to.Width]
			return func(v types.Value) (types.Value, error) {
				f := roundHalfEven(v.F * pow10f[scale])
				if !(f > -lim && f < lim) {
					return types.Value{}, overflow(v)
				}
				x, ok := floatToI128(f)
				if !ok {
					return types.Value{}, overflow(v)
				}
				return types.Dec(x, scale), nil
			}, true
		}
	case types.KindTimestamp:
		if from.Kind == types.KindDate {
			return func(v types.Value) (types.Value, error) { return types.TS(v.I * usPerDay), nil }, true
		}
	case types.KindDate:
		if from.Kind == types.KindTimestamp {
			return func(v types.Value) (types.Value, error) { return types.DateDays(floorDiv(v.I, usPerDay)), nil }, true
		}
	}
	return nil, false
}

// castFromText parses VARCHAR into to, trimming surrounding whitespace as
// DuckDB does.
func castFromText(to types.Type) castFn {
	fail := func(s string) error {
		return convErr("Could not convert string '%s' to %s", s, physName(to))
	}
	switch to.Kind {
	case types.KindBoolean:
		return func(v types.Value) (types.Value, error) {
			switch strings.ToLower(strings.TrimSpace(v.S)) {
			case "true", "t", "1", "yes", "y", "on":
				return types.Bool(true), nil
			case "false", "f", "0", "no", "n", "off":
				return types.Bool(false), nil
			}
			return types.Value{}, fail(v.S)
		}
	case types.KindInteger, types.KindBigInt, types.KindHugeInt:
		return func(v types.Value) (types.Value, error) {
			x, ok := parseIntText(strings.TrimSpace(v.S))
			if !ok {
				return types.Value{}, fail(v.S)
			}
			if to.Kind == types.KindHugeInt {
				return types.Huge(x), nil
			}
			lo, hi := intRange(to.Kind)
			if !x.IsInt64() || int64(x.Lo) < lo || int64(x.Lo) > hi {
				return types.Value{}, fail(v.S)
			}
			return mkInt(to.Kind, int64(x.Lo)), nil
		}
	case types.KindDouble:
		return func(v types.Value) (types.Value, error) {
			s := strings.TrimSpace(v.S)
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				var ne *strconv.NumError
				if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
					return types.Value{}, fail(v.S)
				}
				return types.Value{}, fail(v.S)
			}
			if strings.ContainsAny(s, "xXpP_") { // Go-only syntaxes (hex floats, digit separators)
				return types.Value{}, fail(v.S)
			}
			return types.Float(f), nil
		}
	case types.KindDecimal:
		return func(v types.Value) (types.Value, error) {
			x, ok := parseDecimalText(strings.TrimSpace(v.S), to.Width, to.Scale)
			if !ok {
				return types.Value{}, convErr("Could not convert string \"%s\" to %s", v.S, to)
			}
			return types.Dec(x, to.Scale), nil
		}
	case types.KindTimestamp:
		return func(v types.Value) (types.Value, error) {
			us, ok := ParseTimestamp(v.S)
			if !ok {
				return types.Value{}, convErr("invalid timestamp field format: \"%s\", expected format is (YYYY-MM-DD HH:MM:SS[.US][±HH:MM| ZONE])", v.S)
			}
			return types.TS(us), nil
		}
	case types.KindDate:
		return func(v types.Value) (types.Value, error) {
			d, ok := ParseDate(v.S)
			if !ok {
				return types.Value{}, convErr("invalid date field format: \"%s\", expected format is (YYYY-MM-DD)", v.S)
			}
			return types.DateDays(d), nil
		}
	case types.KindInterval:
		return func(v types.Value) (types.Value, error) {
			iv, msg := parseInterval(v.S)
			if msg != "" {
				return types.Value{}, convErr("Could not convert string '%s' to INTERVAL: %s", v.S, msg)
			}
			return types.Interv(int32(iv.months), int32(iv.days), iv.micros), nil
		}
	}
	return func(v types.Value) (types.Value, error) { return types.Value{}, fail(v.S) }
}

// parseIntText parses an integer, accepting a fractional part that is
// rounded half away from zero ('2.5' -> 3), as DuckDB does.
func parseIntText(s string) (types.Int128, bool) {
	if s == "" {
		return types.Int128{}, false
	}
	neg := false
	i := 0
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		i++
	}
	var acc types.Int128
	digits := 0
	ten := types.I128(10)
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		var ok bool
		if acc, ok = mulI128(acc, ten); !ok {
			return acc, false
		}
		var of bool
		if acc, of = acc.Add(types.I128(int64(s[i] - '0'))); of {
			return acc, false
		}
		digits++
	}
	roundUp := false
	if i < len(s) && s[i] == '.' {
		i++
		fd := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if fd == 0 && s[i] >= '5' {
				roundUp = true
			}
			fd++
		}
		if digits == 0 && fd == 0 {
			return acc, false
		}
	} else if digits == 0 {
		return acc, false
	}
	if i != len(s) {
		return acc, false
	}
	if roundUp {
		var of bool
		if acc, of = acc.Add(types.I128(1)); of {
			return acc, false
		}
	}
	if neg {
		acc = acc.Neg()
	}
	return acc, true
}

// parseDecimalText parses exact decimal text ("-12.345", "1e3") into an
// unscaled integer of the given scale, rounding half away from zero, and
// checks it fits width digits.
func parseDecimalText(s string, width, scale uint8) (types.Int128, bool) {
	if s == "" {
		return types.Int128{}, false
	}
	neg := false
	i := 0
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		i++
	}
	var digits []byte
	point := -1
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits = append(digits, c)
		} else if c == '.' && point < 0 {
			point = len(digits)
		} else {
			break
		}
	}
	if len(digits) == 0 {
		return types.Int128{}, false
	}
	if point < 0 {
		point = len(digits)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 100 || e < -100 {
			return types.Int128{}, false
		}
		point += e
		i = len(s)
	}
	if i != len(s) {
		return types.Int128{}, false
	}
	// value = 0.digits * 10^point ; we want round(value * 10^scale)
	keep := point + int(scale) // number of leading digits that are integral after scaling
	var acc types.Int128
	ten := types.I128(10)
	for j := 0; j < keep; j++ {
		d := int64(0)
		if j < len(digits) && j >= 0 {
			d = int64(digits[j] - '0')
		}
		var ok, of bool
		if acc, ok = mulI128(acc, ten); !ok {
			return acc, false
		}
		if acc, of = acc.Add(types.I128(d)); of {
			return acc, false
		}
	}
	if keep >= 0 && keep < len(digits) && digits[keep] >= '5' {
		acc, _ = acc.Add(types.I128(1))
	}
	if keep < 0 {
		acc = types.Int128{}
	}
	if !absLess(acc, pow10i128[width]) {
		return acc, false
	}
	if neg {
		acc = acc.Neg()
	}
	return acc, true
}

// TextParser returns the function that reads a column of type t from text
// the way CAST(text AS t) does (used for CSV input, so a CSV cell and a SQL
// cast agree). The text is not trimmed beyond what the cast itself trims.
func TextParser(t types.Type) (func(string) (types.Value, error), bool) {
	if t.Kind == types.KindVarchar {
		return func(s string) (types.Value, error) { return types.Str(s), nil }, true
	}
	f := castFromText(t)
	if f == nil {
		return nil, false
	}
	return func(s string) (types.Value, error) { return f(types.Str(s)) }, true
}
