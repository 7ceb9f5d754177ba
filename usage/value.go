package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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
// an explicit null. Build it with String, Number, Bool or Null.
type Value struct {
	kind Kind
	s    string
	n    float64
	b    bool
}

// String returns a string dimension value.
func String(s string) Value { return Value{kind: KindString, s: s} }

// Number returns a number dimension value. -0 is stored as 0 so that equal
// numbers have one representation.
func Number(f float64) Value {
	if f == 0 {
		f = 0
	}
	return Value{kind: KindNumber, n: f}
}

// Bool returns a boolean dimension value.
func Bool(b bool) Value { return Value{kind: KindBool, b: b} }

// Null returns an explicit null dimension value (distinct from a missing
// dimension).
func Null() Value { return Value{kind: KindNull} }

// Kind reports the value's type.
func (v Value) Kind() Kind { return v.kind }

// Str returns the string of a KindString value ("" otherwise).
func (v Value) Str() string { return v.s }

// Num returns the number of a KindNumber value (0 otherwise).
func (v Value) Num() float64 { return v.n }

// BoolVal returns the boolean of a KindBool value (false otherwise).
func (v Value) BoolVal() bool { return v.b }

// Equal is typed equality: values of different kinds are never equal.
func (v Value) Equal(o Value) bool {
	if v.kind != o.kind {
		return false
	}
	switch v.kind {
	case KindString:
		return v.s == o.s
	case KindNumber:
		return v.n == o.n
	case KindBool:
		return v.b == o.b
	}
	return true
}

// Compare orders values: null < bool < number < string, then by value. It is
// the order groups are reported in.
func (v Value) Compare(o Value) int {
	if v.kind != o.kind {
		if v.kind < o.kind {
			return -1
		}
		return 1
	}
	switch v.kind {
	case KindString:
		switch {
		case v.s < o.s:
			return -1
		case v.s > o.s:
			return 1
		}
	case KindNumber:
		switch {
		case v.n < o.n:
			return -1
		case v.n > o.n:
			return 1
		}
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

// FormatNumber is the canonical text of a number dimension: the shortest
// decimal that round-trips the float64. Both backends and the JSON encoding
// use it, so equal numbers always have equal text.
func FormatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func (v Value) String() string {
	switch v.kind {
	case KindNull:
		return "null"
	case KindBool:
		return strconv.FormatBool(v.b)
	case KindNumber:
		return FormatNumber(v.n)
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
		if math.IsNaN(v.n) || math.IsInf(v.n, 0) {
			return nil, fmt.Errorf("%w: non-finite number", ErrInvalidValue)
		}
		return []byte(FormatNumber(v.n)), nil
	case KindString:
		return json.Marshal(v.s)
	}
	return nil, fmt.Errorf("%w: invalid kind", ErrInvalidValue)
}

// UnmarshalJSON reads a JSON string, number, boolean or null. Objects and
// arrays are rejected: dimensions are scalar.
func (v *Value) UnmarshalJSON(b []byte) error {
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
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%w: number %s is out of range", ErrInvalidValue, x)
		}
		*v = Number(f)
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
