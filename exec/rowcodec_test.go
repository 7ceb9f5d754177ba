package exec

import (
	"errors"
	"math"
	"testing"

	"github.com/ubiksql/ubik/types"
)

// TestRowCodec: every cell comes back bit for bit, the edge cells first;
// a cut or padded row is bad state, never a wrong row.
func TestRowCodec(t *testing.T) {
	negZero := math.Copysign(0, -1)
	row := []types.Value{
		{Kind: types.KindVarchar, Null: true},
		{Kind: types.KindVarchar, S: ""},
		{Kind: types.KindVarchar, S: "\xff\xfe q\"\t\u00e9\U0001F600"},
		{Kind: types.KindDouble, F: negZero},
		{Kind: types.KindDouble, F: math.NaN()},
		{Kind: types.KindDouble, F: math.Inf(-1)},
		{Kind: types.KindDouble, F: 1e-300},
		{Kind: types.KindDecimal, Scale: 6, I: -1, Hi: -1},
		{Kind: types.KindHugeInt, I: math.MinInt64, Hi: math.MaxInt64},
		{Kind: types.KindTimestamp, I: math.MinInt64},
		types.Bool(true),
		{Kind: types.KindInterval, I: 5, Hi: int64(-3)<<32 | int64(uint32(7))},
	}
	b := AppendRow([]byte("x"), row)
	got, err := DecodeRow(b[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(row) {
		t.Fatalf("%d cells, want %d", len(got), len(row))
	}
	for i := range row {
		w, g := row[i], got[i]
		if w.Kind != g.Kind || w.Scale != g.Scale || w.Null != g.Null || w.S != g.S || w.I != g.I || w.Hi != g.Hi || math.Float64bits(w.F) != math.Float64bits(g.F) {
			t.Errorf("cell %d: %+v, want %+v", i, g, w)
		}
	}
	if r, err := DecodeRow(AppendRow(nil, nil)); err != nil || len(r) != 0 {
		t.Errorf("empty row: %v %v", r, err)
	}
	for _, bad := range [][]byte{nil, b[1 : len(b)-1], append(append([]byte{}, b[1:]...), 0), {0xff, 0xff, 0xff, 0x7f}} {
		if _, err := DecodeRow(bad); !errors.Is(err, ErrBadState) {
			t.Errorf("%x: %v, want ErrBadState", bad, err)
		}
	}
}
