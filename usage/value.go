package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a dimension value.
type Kind uint8

// The dimension kinds. The zero Kind is invalid so that a zero Value is
// caught by validation rather than stored as something it is not.
const (
	KindInvalid Kind = iota
	KindNull
	KindBool
	KindNumber
	KindString
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "bool"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	}
	return "invalid"
}

// Value is one typed dimension value: a string, a finite number, a boolean or
// an explicit null. Build it with String, Number, ParseNumber, Bool or Null.
//
// A number is kept as exact decimal text, never as a binary float, so two
// numbers are one value exactly when they are the same decimal: 1, 1.0 and
// 1e0 are one number; 9007199254740993 and 9007199254740992 are two.
type Value struct {
	kind Kind
	s    string // a string's text, or a number's canonical decimal text
	b    bool
}

// MaxNumberBytes bounds the canonical decimal text of a number dimension.
const MaxNumberBytes = MaxDimStringBytes

// String returns a string dimension value.
func String(s string) Value { return Value{kind: KindString, s: s} }

// Number returns the number dimension value of f: its shortest decimal that
// round-trips the float64 (0.1 is "0.1"), exactly. A non-finite f gives a
// value that validation refuses. For integers beyond 2^53, or decimals a
// float64 cannot hold, use ParseNumber.
func Number(f float64) Value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{kind: KindNumber, s: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	d, _ := ParseDecimal(strconv.FormatFloat(f, 'f', -1, 64))
	return Value{kind: KindNumber, s: string(d)}
}

// ParseNumber reads a number as JSON spells it (sign, digits, fraction,
// exponent) exactly and returns it in canonical decimal text: no exponent,
// no trailing fractional zeros, "0" for any zero. The canonical text may be
// at most MaxNumberBytes long.
func ParseNumber(s string) (Value, error) {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > MaxNumberBytes || e < -MaxNumberBytes {
			return Value{}, fmt.Errorf("%w: number %.64s: exponent out of range", ErrInvalidValue, s)
		}
		mant, exp = s[:i], e
	}
	d, err := ParseDecimal(mant)
	if err != nil {
		return Value{}, fmt.Errorf("%w: %.64q is not a number", ErrInvalidValue, s)
	}
	d = shift(d, exp)
	if len(d) > MaxNumberBytes {
		return Value{}, fmt.Errorf("%w: number %.64s is %d characters as a decimal, at most %d", ErrInvalidValue, s, len(d), MaxNumberBytes)
	}
	return Value{kind: KindNumber, s: string(d)}, nil
}

// Bool returns a boolean dimension value.
func Bool(b bool) Value { return Value{kind: KindBool, b: b} }

// Null returns an explicit null dimension value (distinct from a missing
// dimension).
func Null() Value { return Value{kind: KindNull} }

// Kind reports the value's type.
func (v Value) Kind() Kind { return v.kind }

// Str returns the string of a KindString value ("" otherwise).
func (v Value) Str() string {
	if v.kind != KindString {
		return ""
	}
	return v.s
}

// Num returns the float64 nearest to a KindNumber value (0 otherwise). It
// can round; NumText is exact.
func (v Value) Num() float64 {
	if v.kind != KindNumber {
		return 0
	}
	f, _ := strconv.ParseFloat(v.s, 64)
	return f
}

// NumText returns the exact canonical decimal text of a KindNumber value
// ("" otherwise).
func (v Value) NumText() string {
	if v.kind != KindNumber {
		return ""
	}
	return v.s
}

// BoolVal returns the boolean of a KindBool value (false otherwise).
func (v Value) BoolVal() bool { return v.b }

// Equal is typed equality: values of different kinds are never equal, and
// numbers are equal when their exact decimal values are.
func (v Value) Equal(o Value) bool {
	if v.kind != o.kind {
		return false
	}
	if v.kind == KindBool {
		return v.b == o.b
	}
	return v.s == o.s
}

// Compare orders values: null < bool < number < string, then by value
// (numbers by exact decimal value). It is the order groups are reported in.
func (v Value) Compare(o Value) int {
	if v.kind != o.kind {
		if v.kind < o.kind {
			return -1
		}
		return 1
	}
	switch v.kind {
	case KindString:
		return strings.Compare(v.s, o.s)
	case KindNumber:
		return compareDecimal(v.s, o.s)
	case KindBool:
		switch {
		case !v.b && o.b:
			return -1
		case v.b && !o.b:
			return 1
		}
	}
	return 0
}

// compareDecimal orders two canonical decimal texts by value.
func compareDecimal(a, b string) int {
	an, bn := strings.HasPrefix(a, "-"), strings.HasPrefix(b, "-")
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	c := compareMagnitude(strings.TrimPrefix(a, "-"), strings.TrimPrefix(b, "-"))
	if an {
		return -c
	}
	return c
}

// compareMagnitude orders two canonical unsigned decimal texts: the longer
// integer part is larger (there are no leading zeros), then digit by digit.
func compareMagnitude(a, b string) int {
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	if len(ai) != len(bi) {
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(ai, bi); c != 0 {
		return c
	}
	return strings.Compare(af, bf) // no trailing zeros: a prefix is smaller
}

func (v Value) String() string {
	switch v.kind {
	case KindNull:
		return "null"
	case KindBool:
		return strconv.FormatBool(v.b)
	case KindNumber:
		return v.s
	case KindString:
		return strconv.Quote(v.s)
	}
	return "<invalid>"
}

// MarshalJSON renders the value as the JSON value of its kind.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.kind {
	case KindNull:
		return []byte("null"), nil
	case KindBool:
		return strconv.AppendBool(nil, v.b), nil
	case KindNumber:
		if err := checkNumber(v.s); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidValue, err)
		}
		return []byte(v.s), nil
	case KindString:
		return json.Marshal(v.s)
	}
	return nil, fmt.Errorf("%w: invalid kind", ErrInvalidValue)
}

// UnmarshalJSON reads a JSON string, number, boolean or null. Objects and
// arrays are rejected: dimensions are scalar.
func (v *Value) UnmarshalJSON(b []byte) error {
	if err := checkJSONText(b); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidValue, err)
	}
	var raw any
	d := json.NewDecoder(bytesReader(b))
	d.UseNumber()
	if err := d.Decode(&raw); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidValue, err)
	}
	switch x := raw.(type) {
	case nil:
		*v = Null()
	case bool:
		*v = Bool(x)
	case string:
		*v = String(x)
	case json.Number:
		n, err := ParseNumber(string(x))
		if err != nil {
			return err
		}
		*v = n
	default:
		return fmt.Errorf("%w: a dimension must be a string, number, boolean or null, not %s", ErrInvalidValue, jsonKind(raw))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
