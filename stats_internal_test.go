package ubik

import (
	"reflect"
	"testing"

	"github.com/ubiksql/ubik/internal/exec"
)

// TestOperatorStatsCopiesEveryCounter: every counter of the operator has
// a field of the same name and type in Stats, and operatorStats copies
// each one (set to a distinct value), so a counter added to the operator
// cannot silently read zero here.
func TestOperatorStatsCopiesEveryCounter(t *testing.T) {
	var in exec.Stats
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Float64:
			f.SetFloat(float64(i + 1))
		default:
			t.Fatalf("exec.Stats.%s has kind %s; teach this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	out := reflect.ValueOf(operatorStats(in))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		f := out.FieldByName(name)
		if !f.IsValid() {
			t.Errorf("Stats has no field %s", name)
			continue
		}
		if f.Type() != v.Field(i).Type() || !f.Equal(v.Field(i)) {
			t.Errorf("Stats.%s = %v, want %v", name, f, v.Field(i))
		}
	}
}
