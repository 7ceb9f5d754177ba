package changelog

import "github.com/ubiksql/ubik/types"

// AppendCell appends the contract rendering of one cell to dst.
// TODO(encoder helper): implement per docs/contract.md.
func AppendCell(dst []byte, v types.Value) []byte { panic("changelog: AppendCell not implemented yet") }

// AppendKey appends the key array for cells to dst: "[" cell ", " cell "]".
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

// AppendValue appends the value object {"col": cell, ...}.
// TODO(encoder helper): replaced by the real implementation.
func AppendValue(dst []byte, cols []string, cells []types.Value) []byte {
	panic("changelog: AppendValue not implemented yet")
}
