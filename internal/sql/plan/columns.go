package plan

import (
	"reflect"
	"slices"
)

var (
	exprType   = reflect.TypeFor[Expr]()
	colRefType = reflect.TypeFor[*ColRef]()
)

// ColumnsRead returns the column indexes an expression tree reads, in
// increasing order, each once. It walks the tree's Expr values, in
// fields, slices and arrays, whatever their concrete types, so a new
// expression type needs no change here.
func ColumnsRead(e Expr) []int {
	set := map[int]bool{}
	columnsOf(reflect.ValueOf(e), set)
	out := make([]int, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// MaxColumn is the largest column index e reads (-1: none).
func MaxColumn(e Expr) int {
	cols := ColumnsRead(e)
	if len(cols) == 0 {
		return -1
	}
	return cols[len(cols)-1]
}

func columnsOf(v reflect.Value, set map[int]bool) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			columnsOf(v.Elem(), set)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type() == colRefType {
			set[int(v.Elem().FieldByName("Index").Int())] = true // not Interface: v may come from an unexported field
			return
		}
		if v.Type().Implements(exprType) && v.Elem().Kind() == reflect.Struct {
			columnsOf(v.Elem(), set)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if walked(v.Field(i).Type()) {
				columnsOf(v.Field(i), set)
			}
		}
	case reflect.Slice, reflect.Array:
		if !v.Type().Elem().Implements(exprType) && v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		for i := range v.Len() {
			columnsOf(v.Index(i), set)
		}
	}
}

// walked reports whether a field of type t may hold expressions.
func walked(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer:
		return t.Implements(exprType)
	case reflect.Slice, reflect.Array:
		return true
	case reflect.Struct:
		return t.Implements(exprType)
	}
	return false
}
