// Package types defines ubik's SQL types and the runtime Value that carries
// one cell. It is a leaf package: it imports nothing from the project, and
// every other layer (parser, planner, executor, changelog encoder) shares it.
//
// Semantics follow DuckDB: INTEGER is 32-bit, BIGINT 64-bit, HUGEINT 128-bit,
// DECIMAL(p,s) is an exact scaled integer (128-bit here for every width),
// TIMESTAMP is microseconds since 1970-01-01 00:00:00 UTC (no zone), DATE is
// days since 1970-01-01, INTERVAL is (months, days, microseconds).
package types

import "fmt"

// Kind is the family of a SQL type.
type Kind uint8

// The kinds. KindNull is the type of an untyped NULL literal only; a NULL cell
// of a typed column keeps its column's kind and sets Value.Null.
const (
	KindNull Kind = iota
	KindBoolean
	KindInteger // 32-bit signed
	KindBigInt  // 64-bit signed
	KindHugeInt // 128-bit signed (DuckDB's sum over integers)
	KindDouble
	KindDecimal // exact; Type.Width and Type.Scale
	KindVarchar
	KindTimestamp // microseconds since the Unix epoch, no time zone
	KindDate      // days since the Unix epoch
	KindInterval  // months, days, microseconds
)

var kindNames = [...]string{
	KindNull:      "NULL",
	KindBoolean:   "BOOLEAN",
	KindInteger:   "INTEGER",
	KindBigInt:    "BIGINT",
	KindHugeInt:   "HUGEINT",
	KindDouble:    "DOUBLE",
	KindDecimal:   "DECIMAL",
	KindVarchar:   "VARCHAR",
	KindTimestamp: "TIMESTAMP",
	KindDate:      "DATE",
	KindInterval:  "INTERVAL",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Type is a full SQL type. Width and Scale are meaningful for DECIMAL only.
type Type struct {
	Kind  Kind
	Width uint8 // DECIMAL precision, 1..38
	Scale uint8 // DECIMAL scale, 0..Width
}

// Convenience types.
var (
	Null      = Type{Kind: KindNull}
	Boolean   = Type{Kind: KindBoolean}
	Integer   = Type{Kind: KindInteger}
	BigInt    = Type{Kind: KindBigInt}
	HugeInt   = Type{Kind: KindHugeInt}
	Double    = Type{Kind: KindDouble}
	Varchar   = Type{Kind: KindVarchar}
	Timestamp = Type{Kind: KindTimestamp}
	Date      = Type{Kind: KindDate}
	Interval  = Type{Kind: KindInterval}
)

// Decimal returns DECIMAL(width, scale).
func Decimal(width, scale uint8) Type { return Type{Kind: KindDecimal, Width: width, Scale: scale} }

func (t Type) String() string {
	if t.Kind == KindDecimal {
		return fmt.Sprintf("DECIMAL(%d,%d)", t.Width, t.Scale)
	}
	return t.Kind.String()
}

// IsNumeric reports whether t is an integer, decimal or double type.
func (t Type) IsNumeric() bool {
	switch t.Kind {
	case KindInteger, KindBigInt, KindHugeInt, KindDouble, KindDecimal:
		return true
	}
	return false
}

// Value is one cell. It is a plain value type (no pointers besides S) so rows
// can be copied and compared cheaply.
//
// Field use by kind:
//
//	BOOLEAN    I = 0 or 1
//	INTEGER    I (fits int32)
//	BIGINT     I
//	HUGEINT    128-bit two's complement: high word Hi, low word uint64(I)
//	DECIMAL    unscaled 128-bit integer as for HUGEINT; the scale is Scale
//	DOUBLE     F
//	VARCHAR    S (valid UTF-8 is not guaranteed; the encoder repairs it)
//	TIMESTAMP  I = microseconds since epoch
//	DATE       I = days since epoch
//	INTERVAL   I = microseconds, Hi = months<<32 | uint32(days)
//
// A SQL NULL has Null set; its Kind is the column's kind (or KindNull for an
// untyped NULL).
type Value struct {
	S     string
	I     int64
	Hi    int64
	F     float64
	Kind  Kind
	Scale uint8
	Null  bool
}

// NullOf returns a NULL of type t.
func NullOf(t Type) Value { return Value{Kind: t.Kind, Scale: t.Scale, Null: true} }

// Bool returns a BOOLEAN value.
func Bool(b bool) Value {
	v := Value{Kind: KindBoolean}
	if b {
		v.I = 1
	}
	return v
}

// Int returns an INTEGER value.
func Int(i int32) Value { return Value{Kind: KindInteger, I: int64(i)} }

// Big returns a BIGINT value.
func Big(i int64) Value { return Value{Kind: KindBigInt, I: i} }

// Huge returns a HUGEINT value from a 128-bit integer.
func Huge(x Int128) Value { return Value{Kind: KindHugeInt, I: int64(x.Lo), Hi: x.Hi} }

// Float returns a DOUBLE value.
func Float(f float64) Value { return Value{Kind: KindDouble, F: f} }

// Str returns a VARCHAR value.
func Str(s string) Value { return Value{Kind: KindVarchar, S: s} }

// TS returns a TIMESTAMP value from microseconds since the epoch.
func TS(us int64) Value { return Value{Kind: KindTimestamp, I: us} }

// DateDays returns a DATE value from days since the epoch.
func DateDays(d int64) Value { return Value{Kind: KindDate, I: d} }

// Dec returns a DECIMAL value from an unscaled 128-bit integer and a scale.
func Dec(unscaled Int128, scale uint8) Value {
	return Value{Kind: KindDecimal, I: int64(unscaled.Lo), Hi: unscaled.Hi, Scale: scale}
}

// Interv returns an INTERVAL value.
func Interv(months, days int32, micros int64) Value {
	return Value{Kind: KindInterval, I: micros, Hi: int64(months)<<32 | int64(uint32(days))}
}

// Int128 returns the 128-bit integer of a HUGEINT or DECIMAL value.
func (v Value) Int128() Int128 { return Int128{Hi: v.Hi, Lo: uint64(v.I)} }

// Bool reports the truth of a BOOLEAN value (false for NULL).
func (v Value) Bool() bool { return !v.Null && v.I != 0 }

// IntervalParts splits an INTERVAL value.
func (v Value) IntervalParts() (months, days int32, micros int64) {
	return int32(v.Hi >> 32), int32(uint32(v.Hi)), v.I
}
