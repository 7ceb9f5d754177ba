package exec

import (
	"encoding/binary"
	"fmt"

	"github.com/ubiksql/ubik/internal/types"
)

// AppendRow appends a lossless binary form of row to dst: the cell count,
// then each cell as the checkpoint writes values (kind, scale, NULL, the
// bytes of a VARCHAR, the bits of a DOUBLE, the two words of every other
// kind). DecodeRow reads it back equal cell for cell, -0.0, NaN payloads,
// invalid UTF-8 and HUGEINT and DECIMAL words included. A Kafka host
// carries a view's final rows to the reader's partition in this form.
//
// The bytes are not a contract: they are stable only within one version
// of the engine.
func AppendRow(dst []byte, row []types.Value) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	for _, v := range row {
		dst = appendValue(dst, v)
	}
	return dst
}

// DecodeRow parses AppendRow's bytes. Truncated or trailing bytes are an
// ErrBadState error.
func DecodeRow(b []byte) ([]types.Value, error) {
	r := &reader{b: b}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(b)) { // every cell takes at least 3 bytes
		r.fail("row cell count")
	}
	if r.err != nil {
		return nil, r.err // before the count sizes anything
	}
	row := make([]types.Value, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		row = append(row, r.value())
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after a row", ErrBadState, len(r.b))
	}
	return row, nil
}
