package ubik

import (
	"time"
	"unsafe"

	"github.com/ubiksql/ubik/internal/types"
)

// Value is one typed cell of a row given to PushRow, PushTableRow or
// PushInputRow. Its type must be its column's (a NULL fits any column).
type Value struct{ v types.Value }

// Null is a SQL NULL.
func Null() Value { return Value{types.Value{Kind: types.KindNull, Null: true}} }

// Bool is a BOOLEAN.
func Bool(b bool) Value { return Value{types.Bool(b)} }

// Integer is an INTEGER (32 bits).
func Integer(i int32) Value { return Value{types.Int(i)} }

// BigInt is a BIGINT.
func BigInt(i int64) Value { return Value{types.Big(i)} }

// Double is a DOUBLE.
func Double(f float64) Value { return Value{types.Float(f)} }

// Varchar is a VARCHAR (invalid UTF-8 is repaired as a decoder does).
func Varchar(s string) Value { return Value{types.Str(s)} }

// Timestamp is a TIMESTAMP, to the microsecond.
func Timestamp(t time.Time) Value { return Value{types.TS(t.UnixMicro())} }

// TimestampMicros is a TIMESTAMP given in microseconds since the epoch.
func TimestampMicros(us int64) Value { return Value{types.TS(us)} }

// Date is a DATE given in days since the epoch.
func Date(days int64) Value { return Value{types.DateDays(days)} }

// Decimal is a DECIMAL: unscaled / 10^scale.
func Decimal(unscaled int64, scale uint8) Value { return Value{types.Dec(types.I128(unscaled), scale)} }

// Interval is an INTERVAL of months, days and microseconds.
func Interval(months, days int32, micros int64) Value {
	return Value{types.Interv(months, days, micros)}
}

// cells is row as the engine's cells, without a copy: a Value is one
// types.Value, so the two slices have one layout (and the engine may keep
// the row as it kept the caller's slice before).
func cells(row []Value) []types.Value {
	if len(row) == 0 {
		return nil
	}
	return unsafe.Slice((*types.Value)(unsafe.Pointer(unsafe.SliceData(row))), len(row))
}
