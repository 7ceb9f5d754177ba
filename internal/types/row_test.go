package types

import (
	"testing"
	"unsafe"
)

// TestCloneRow: the copy equals the row and shares neither its cells nor
// any string's bytes; OwnStrings keeps the cells and moves the strings.
func TestCloneRow(t *testing.T) {
	buf := []byte("abcdef")
	s := unsafe.String(&buf[0], len(buf)) // a string pointing into a reused buffer
	row := []Value{{S: s, Kind: KindVarchar}, Int(7), NullOf(Type{Kind: KindVarchar}), {S: "", Kind: KindVarchar}}
	c := CloneRow(row)
	if len(c) != len(row) || &c[0] == &row[0] {
		t.Fatal("the clone shares the row's cells")
	}
	buf[0] = 'X'
	if c[0].S != "abcdef" {
		t.Fatalf("the clone's string changed with the buffer: %q", c[0].S)
	}
	for i := 1; i < len(row); i++ {
		if c[i] != row[i] {
			t.Errorf("cell %d: %+v, want %+v", i, c[i], row[i])
		}
	}
	if CloneRow(nil) != nil {
		t.Error("CloneRow(nil) is not nil")
	}
	buf[0] = 'a'
	own := OwnStrings(row)
	if &own[0] != &row[0] {
		t.Fatal("OwnStrings moved the cells")
	}
	buf[0] = 'Y'
	if row[0].S != "abcdef" {
		t.Fatalf("OwnStrings left the string in the buffer: %q", row[0].S)
	}
}
