package types

import (
	"slices"
	"strings"
)

// CloneRow returns a copy of row that shares no memory with it: the
// cells, and each cell's string, which may point into a decoder's input
// buffer or another row's bytes.
func CloneRow(row []Value) []Value {
	return OwnStrings(slices.Clone(row))
}

// OwnStrings gives each cell of row a string of its own, in place, and
// returns row: for a row whose cells are the caller's but whose strings
// may point into memory that is reused.
func OwnStrings(row []Value) []Value {
	for i := range row {
		if row[i].S != "" {
			row[i].S = strings.Clone(row[i].S)
		}
	}
	return row
}
