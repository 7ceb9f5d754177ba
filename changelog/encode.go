package changelog

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ubiksql/ubik/internal/types"
)

// ContractVersion is the version of the key/value byte contract this package
// produces (docs/contract.md). It only moves forward; a change to any byte
// the encoder writes for an existing input is a new version.
const ContractVersion = 1

// AppendCell appends the contract rendering of one cell to dst:
//
//	NULL (any kind)        null
//	BOOLEAN                true | false
//	INTEGER/BIGINT/HUGEINT decimal digits
//	DECIMAL                exact digits with all scale digits: 1.500, -0.500, 12
//	DOUBLE                 Python repr(float) = DuckDB's cast text; NaN/±Inf -> null
//	VARCHAR                JSON string, json.dumps(ensure_ascii=True) escaping
//	TIMESTAMP              "YYYY-MM-DD HH:MM:SS[.ffffff]" (DuckDB text)
//	DATE                   "YYYY-MM-DD" (DuckDB text)
//	INTERVAL               DuckDB text, e.g. "1 year 2 months 3 days 04:05:06.5"
//
// It never allocates beyond growing dst. It panics on a Kind outside the
// types package's closed set, which only a corrupted Value can carry.
func AppendCell(dst []byte, v types.Value) []byte {
	if v.Null {
		return append(dst, "null"...)
	}
	switch v.Kind {
	case types.KindNull:
		// An untyped NULL literal never carries a value.
		return append(dst, "null"...)
	case types.KindBoolean:
		if v.I != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case types.KindInteger, types.KindBigInt:
		return strconv.AppendInt(dst, v.I, 10)
	case types.KindHugeInt:
		return appendInt128(dst, v.Hi, uint64(v.I), 0)
	case types.KindDecimal:
		return appendInt128(dst, v.Hi, uint64(v.I), int(v.Scale))
	case types.KindDouble:
		return appendDouble(dst, v.F)
	case types.KindVarchar:
		return AppendString(dst, v.S)
	case types.KindTimestamp:
		dst = append(dst, '"')
		dst = appendTimestampText(dst, v.I)
		return append(dst, '"')
	case types.KindDate:
		dst = append(dst, '"')
		dst = appendDateText(dst, v.I)
		return append(dst, '"')
	case types.KindInterval:
		months, days, micros := v.IntervalParts()
		dst = append(dst, '"')
		dst = appendIntervalText(dst, months, days, micros)
		return append(dst, '"')
	}
	panic(fmt.Sprintf("changelog: AppendCell: unknown kind %v", v.Kind))
}

// AppendKey appends the key array for cells to dst: "[" cell ", " cell "]",
// and "[]" for no cells.
func AppendKey(dst []byte, cells []types.Value) []byte {
	dst = append(dst, '[')
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, ',', ' ')
		}
		dst = AppendCell(dst, c)
	}
	return append(dst, ']')
}

// AppendValue appends the value object {"col": cell, ...} to dst, columns in
// the given order (SELECT order), with separators ", " and ": ", and "{}" for
// no columns. Column names are escaped like VARCHAR cells and written as
// given, duplicates included.
//
// cols and cells must have the same length; a mismatch is a programming
// error in the caller and panics. Hot paths should use an Encoder, which
// escapes the column names once and reports a mismatch as an error.
func AppendValue(dst []byte, cols []string, cells []types.Value) []byte {
	if len(cols) != len(cells) {
		panic(fmt.Sprintf("changelog: AppendValue: %d columns but %d cells", len(cols), len(cells)))
	}
	dst = append(dst, '{')
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, ',', ' ')
		}
		dst = AppendString(dst, cols[i])
		dst = append(dst, ':', ' ')
		dst = AppendCell(dst, c)
	}
	return append(dst, '}')
}

// Encoder renders the value objects of one query. It holds the column names
// escaped once, so rendering a row is a sequence of appends with no
// allocation beyond growing the caller's buffer. An Encoder is immutable
// after NewEncoder and safe for concurrent use.
type Encoder struct {
	cols []string
	// prefix holds, back to back, the fragment written before each cell:
	// `"col0": ` for the first column and `, "colN": ` for the others;
	// ends[i] is the end offset of column i's fragment.
	prefix []byte
	ends   []int
}

// NewEncoder returns an Encoder for a value object with the given columns
// (SELECT order). The slice is copied.
func NewEncoder(columns []string) *Encoder {
	e := &Encoder{cols: append([]string(nil), columns...), ends: make([]int, len(columns))}
	for i, c := range columns {
		if i > 0 {
			e.prefix = append(e.prefix, ',', ' ')
		}
		e.prefix = AppendString(e.prefix, c)
		e.prefix = append(e.prefix, ':', ' ')
		e.ends[i] = len(e.prefix)
	}
	return e
}

// Columns returns the encoder's column names. The caller must not modify the
// returned slice.
func (e *Encoder) Columns() []string { return e.cols }

// AppendKey appends the key array for cells; it is the package AppendKey,
// here so that an engine can hold one object per query.
func (e *Encoder) AppendKey(dst []byte, cells []types.Value) []byte {
	return AppendKey(dst, cells)
}

// AppendValue appends the value object for one row. It returns dst unchanged
// and an error wrapping ErrCellCount when len(cells) differs from the number
// of columns.
func (e *Encoder) AppendValue(dst []byte, cells []types.Value) ([]byte, error) {
	if len(cells) != len(e.cols) {
		return dst, fmt.Errorf("%w: %d columns but %d cells", ErrCellCount, len(e.cols), len(cells))
	}
	dst = append(dst, '{')
	start := 0
	for i, c := range cells {
		dst = append(dst, e.prefix[start:e.ends[i]]...)
		start = e.ends[i]
		dst = AppendCell(dst, c)
	}
	return append(dst, '}'), nil
}

// AppendPrefix appends the fragment written before column i's cell in a
// value object: `"col0": ` for the first column, `, "colN": ` for the
// others. With AppendCell (or the bytes AppendCell wrote for an equal cell
// earlier) it lets a hot path build the same object as AppendValue piece by
// piece: '{', then per column the prefix and the cell, then '}'.
func (e *Encoder) AppendPrefix(dst []byte, i int) []byte {
	start := 0
	if i > 0 {
		start = e.ends[i-1]
	}
	return append(dst, e.prefix[start:e.ends[i]]...)
}

// AppendText appends DuckDB's CAST(v AS VARCHAR) text of a non-NULL value:
// the cell rendering without JSON quoting, with nan, inf and -inf for the
// non-finite doubles. SQL casts to VARCHAR use it, so a cast and a key cell
// can never disagree on how a value prints.
func AppendText(dst []byte, v types.Value) []byte {
	switch v.Kind {
	case types.KindVarchar:
		return append(dst, v.S...)
	case types.KindTimestamp:
		return appendTimestampText(dst, v.I)
	case types.KindDate:
		return appendDateText(dst, v.I)
	case types.KindInterval:
		months, days, micros := v.IntervalParts()
		return appendIntervalText(dst, months, days, micros)
	case types.KindDouble:
		switch {
		case math.IsNaN(v.F):
			return append(dst, "nan"...)
		case math.IsInf(v.F, 1):
			return append(dst, "inf"...)
		case math.IsInf(v.F, -1):
			return append(dst, "-inf"...)
		}
	}
	v.Null = false
	return AppendCell(dst, v)
}
