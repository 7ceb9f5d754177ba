package changelog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/ubiksql/ubik/internal/types"
)

var hostileStrings = []string{
	"", "acme", `"`, `\`, `\"`, "\\u0000", "/", "</script>", "\x00", "\x1f", "\x7f", "\n\r\t\b\f",
	"é", "中文", "😀", "\U0010ffff", "\ufffd", "\ufeff", "\u2028\u2029", "\uffff",
	"\xff", "\xfe\xff", "\x80", "\xc0\x80", "\xc1\xbf", "\xc2", "\xe2\x82", "\xe2\x82x", "\xe0\x80\x80",
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x9f\x98", "\xf0\x9f\x98x", "\xf4\x90\x80\x80", "\xf5\x80",
	"a\xffb\xe2\x82\xacc\xf0\x9f\x98\x80d\xf0\x9f", "\"\\/\b\f\n\r\t\x01\x7f\u0080\u00ff",
}

// FuzzAppendCellString: for any bytes, the VARCHAR rendering is printable
// ASCII, valid JSON, decodes to the U+FFFD-repaired string, and survives
// SplitKey as one cell.
func FuzzAppendCellString(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendCell(nil, types.Str(s))
		for i, b := range out {
			if b < 0x20 || b > 0x7e {
				t.Fatalf("AppendCell(%q) byte %d is %#02x, want printable ASCII: %s", s, i, b, out)
			}
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("AppendCell(%q) = %s is not a JSON string: %v", s, out, err)
		}
		want := RepairUTF8(s)
		if got != want {
			t.Fatalf("AppendCell(%q) = %s decodes to %q, want %q", s, out, got, want)
		}
		if !utf8.ValidString(want) || RepairUTF8(want) != want {
			t.Fatalf("RepairUTF8(%q) = %q is not a valid fixed point", s, want)
		}
		// Valid UTF-8 passes through unchanged.
		if utf8.ValidString(s) && want != s {
			t.Fatalf("RepairUTF8 changed valid %q to %q", s, want)
		}
		key := AppendKey(nil, []types.Value{types.Str(s), types.Str(s)})
		parts, err := SplitKey(key)
		if err != nil || len(parts) != 2 || !bytes.Equal(parts[0], out) || !bytes.Equal(parts[1], out) {
			t.Fatalf("SplitKey(%s) = %q, %v", key, parts, err)
		}
	})
}

// FuzzSplitKey: SplitKey never panics; it accepts exactly the JSON arrays of
// scalars that encoding/json accepts (given valid UTF-8), its parts are the
// array's elements; and for keys AppendKey built from cells derived from the
// input it returns each cell's rendering.
func FuzzSplitKey(f *testing.F) {
	for _, s := range []string{
		`[]`, `["acme", "2026-07-18 10:00:00"]`, `[null, true, false, 0, -1.5e+300, "\ud83d\ude00"]`,
		`[`, `]`, `[,]`, `["a",]`, `[1 2]`, `[[1]]`, `[{}]`, `["\u12"]`, `["\x"]`, "[\"\x00\"]", "[\"\xff\"]",
		`[01]`, `[-]`, `[1.]`, `[1e]`, `[NaN]`, `[Infinity]`, `[tru]`, `[] []`, `["\"]`, `["\\"]`,
		" [ 1 , 2 ] ", "[\"\\", `{"a": 1}`, `"a"`, `1`, ``, "\ufeff[]",
	} {
		f.Add([]byte(s))
	}
	for _, s := range hostileStrings {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parts, err := SplitKey(data)
		if err != nil {
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Offset < 0 || ke.Offset > len(data) || parts != nil {
				t.Fatalf("SplitKey(%q) = %q, %v: want nil and a *KeyError within the input", data, parts, err)
			}
			if utf8.Valid(data) && isScalarArray(data) {
				t.Fatalf("SplitKey(%q) rejected a JSON array of scalars: %v", data, err)
			}
		} else {
			if !json.Valid(data) || !isScalarArray(data) {
				t.Fatalf("SplitKey(%q) accepted what encoding/json rejects", data)
			}
			var elems []json.RawMessage
			if err := json.Unmarshal(data, &elems); err != nil || len(elems) != len(parts) {
				t.Fatalf("SplitKey(%q) = %q, encoding/json gives %q (%v)", data, parts, elems, err)
			}
			for i := range parts {
				if !bytes.Equal(parts[i], elems[i]) {
					t.Fatalf("SplitKey(%q)[%d] = %s, encoding/json gives %s", data, i, parts[i], elems[i])
				}
			}
		}

		// Round trip through AppendKey over cells derived from the input.
		cells := cellsFromBytes(data)
		key := AppendKey(nil, cells)
		parts, err = SplitKey(key)
		if err != nil || len(parts) != len(cells) {
			t.Fatalf("SplitKey(AppendKey) = %q, %v for %d cells; key %s", parts, err, len(cells), key)
		}
		for i, c := range cells {
			if want := AppendCell(nil, c); !bytes.Equal(parts[i], want) {
				t.Fatalf("SplitKey(%s)[%d] = %s, want %s", key, i, parts[i], want)
			}
		}
		if !json.Valid(key) {
			t.Fatalf("AppendKey = %s is not valid JSON", key)
		}
		g, err := GroupKey(key, []int{0})
		if err != nil || !json.Valid(g) {
			t.Fatalf("GroupKey(%s, [0]) = %s, %v", key, g, err)
		}
	})
}

// isScalarArray reports whether data is JSON (per encoding/json) whose top
// level is an array of strings, numbers, booleans and nulls.
func isScalarArray(data []byte) bool {
	var elems []json.RawMessage
	if json.Unmarshal(data, &elems) != nil || elems == nil { // `null` decodes to a nil slice
		return false
	}
	for _, e := range elems {
		switch e[0] {
		case '[', '{':
			return false
		}
	}
	return true
}

// cellsFromBytes derives a row of cells of every kind from fuzz input.
func cellsFromBytes(data []byte) []types.Value {
	u64 := func(i int) uint64 {
		var b [8]byte
		copy(b[:], data[min(i, len(data)):])
		return binary.LittleEndian.Uint64(b[:])
	}
	return []types.Value{
		types.Str(string(data)),
		types.Float(math.Float64frombits(u64(0))),
		types.Big(int64(u64(8))),
		types.TS(int64(u64(0))),
		types.DateDays(int64(int32(u64(4)))),
		types.Dec(types.Int128{Hi: int64(u64(0)), Lo: u64(8)}, uint8(u64(16)%39)),
		types.Huge(types.Int128{Hi: int64(u64(8)), Lo: u64(0)}),
		types.Interv(int32(u64(0)), int32(u64(4)), int64(u64(8))),
		types.Bool(len(data)%2 == 0),
		types.NullOf(types.Varchar),
	}
}
