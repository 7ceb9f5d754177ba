package exec

import (
	"errors"
	"math"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
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

// rowFrom builds a row of cells of every kind from fuzz bytes, each
// cell with only the fields its kind uses (types.Value): a kind byte (a
// NULL of it when the byte's high bit is set), then the kind's words,
// or a length byte and the bytes of a VARCHAR (any bytes: invalid UTF-8
// too). A DOUBLE's bits are taken as they are (NaN payloads, -0.0, the
// infinities), and often one of the special doubles.
func rowFrom(b []byte) []types.Value {
	take := func(n int) []byte {
		n = min(n, len(b))
		out := b[:n]
		b = b[n:]
		return out
	}
	word := func() int64 {
		var u uint64
		for i, c := range take(8) {
			u |= uint64(c) << (8 * i)
		}
		return int64(u)
	}
	var row []types.Value
	for len(b) > 0 && len(row) < 64 {
		k := take(1)[0]
		kind := types.Kind(k & 0x7f % 11)
		var v types.Value
		switch kind {
		case types.KindNull:
			v = types.Value{Kind: types.KindNull, Null: true}
		case types.KindBoolean:
			v = types.Bool(word()&1 == 1)
		case types.KindInteger:
			v = types.Int(int32(word()))
		case types.KindBigInt:
			v = types.Big(word())
		case types.KindHugeInt:
			v = types.Value{Kind: types.KindHugeInt, I: word(), Hi: word()}
		case types.KindDecimal:
			v = types.Value{Kind: types.KindDecimal, Scale: uint8(word()) % 39, I: word(), Hi: word()}
		case types.KindDouble:
			w := word()
			if w&0xf0 == 0xf0 {
				v = types.Float([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000001), math.SmallestNonzeroFloat64, math.MaxFloat64}[int(uint64(w)>>8%9)])
			} else {
				v = types.Float(math.Float64frombits(uint64(w)))
			}
		case types.KindVarchar:
			n := 0
			if l := take(1); len(l) > 0 {
				n = int(l[0])
			}
			v = types.Str(string(take(n)))
		case types.KindTimestamp:
			v = types.Value{Kind: types.KindTimestamp, I: word()}
		case types.KindDate:
			v = types.Value{Kind: types.KindDate, I: int64(int32(word()))}
		case types.KindInterval:
			v = types.Value{Kind: types.KindInterval, I: word(), Hi: word()}
		}
		if k&0x80 != 0 && kind != types.KindNull {
			v = types.Value{Kind: v.Kind, Scale: v.Scale, Null: true}
		}
		row = append(row, v)
	}
	return row
}

// sameBits reports whether two cells are equal field for field, a
// DOUBLE by its bits.
func sameBits(a, b types.Value) bool {
	return a.Kind == b.Kind && a.Scale == b.Scale && a.Null == b.Null && a.S == b.S && a.I == b.I && a.Hi == b.Hi &&
		math.Float64bits(a.F) == math.Float64bits(b.F)
}

// FuzzRowCodec: a row of any cells (every kind, NULLs, NaN payloads,
// the infinities, -0.0, DECIMAL and HUGEINT words, any scale, VARCHAR
// bytes that are not UTF-8) comes back from AppendRow and DecodeRow
// equal cell for cell, bit for bit, so the group key bytes and the
// changelog text of each cell are the ones of the row that was sent
// (what a joined row or a view's row carried between two segments must
// keep); encoding is deterministic; and any bytes given to DecodeRow
// give an error or a row, never a panic, and a row that encodes back to
// bytes decoding to it again.
func FuzzRowCodec(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 0xf0, 3, 0, 0, 0, 0, 0, 0, 5, 0xf0, 0, 0, 0, 0, 0, 0, 0}) // -0.0, NaN
	f.Add([]byte{7, 4, 0xff, 'a', '"', '\\', 0x87, 6, 6, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0x88, 8, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0})
	f.Add(AppendRow(nil, []types.Value{types.Str("\xed\xa0\x80"), types.Float(math.Inf(-1)), {Kind: types.KindDecimal, Scale: 38, I: -1, Hi: math.MinInt64}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		row := rowFrom(b)
		enc := AppendRow(nil, row)
		got, err := DecodeRow(enc)
		if err != nil {
			t.Fatalf("%#v: %v", row, err)
		}
		if len(got) != len(row) {
			t.Fatalf("%d cells, want %d", len(got), len(row))
		}
		for i := range row {
			if !sameBits(got[i], row[i]) {
				t.Fatalf("cell %d: %#v, want %#v", i, got[i], row[i])
			}
			if g, w := AppendGroupIdentity(nil, got[i:i+1]), AppendGroupIdentity(nil, row[i:i+1]); string(g) != string(w) {
				t.Fatalf("cell %d: group key %x, want %x", i, g, w)
			}
			if g, w := changelog.AppendCell(nil, got[i]), changelog.AppendCell(nil, row[i]); string(g) != string(w) {
				t.Fatalf("cell %d: text %s, want %s", i, g, w)
			}
		}
		if again := AppendRow(nil, got); string(again) != string(enc) {
			t.Fatalf("encoded twice: %x, then %x", enc, again)
		}
		// Any bytes: a row or an error.
		if r2, err := DecodeRow(b); err == nil {
			r3, err := DecodeRow(AppendRow(nil, r2))
			if err != nil || len(r3) != len(r2) {
				t.Fatalf("%x decodes to %#v, whose encoding decodes to %#v, %v", b, r2, r3, err)
			}
			for i := range r2 {
				if !sameBits(r2[i], r3[i]) {
					t.Fatalf("%x: cell %d %#v, then %#v", b, i, r2[i], r3[i])
				}
			}
		}
	})
}
