package changelog

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// The design seed's examples, verbatim.
func TestSeedExamples(t *testing.T) {
	ws := types.TS(1784368800000000) // 2026-07-18 10:00:00
	key := AppendKey(nil, []types.Value{types.Str("acme"), ws})
	if got, want := string(key), `["acme", "2026-07-18 10:00:00"]`; got != want {
		t.Errorf("key = %s, want %s", got, want)
	}
	val := AppendValue(nil, []string{"merchant", "window_start", "orders"},
		[]types.Value{types.Str("acme"), ws, types.Big(3)})
	if got, want := string(val), `{"merchant": "acme", "window_start": "2026-07-18 10:00:00", "orders": 3}`; got != want {
		t.Errorf("value = %s, want %s", got, want)
	}
	g, err := GroupKey(key, []int{1})
	if err != nil || string(g) != `["acme"]` {
		t.Errorf("GroupKey = %s, %v; want [\"acme\"]", g, err)
	}
}

func TestAppendCellTable(t *testing.T) {
	neg := func(x types.Int128) types.Int128 { return x.Neg() }
	for _, tc := range []struct {
		v    types.Value
		want string
	}{
		// NULL of every kind, and the untyped NULL.
		{types.Value{Kind: types.KindNull}, `null`},
		{types.NullOf(types.Varchar), `null`},
		{types.NullOf(types.Double), `null`},
		{types.NullOf(types.Timestamp), `null`},
		{types.NullOf(types.Decimal(18, 3)), `null`},
		{types.NullOf(types.Interval), `null`},
		{types.NullOf(types.Boolean), `null`},
		{types.Bool(true), `true`},
		{types.Bool(false), `false`},
		{types.Int(math.MinInt32), `-2147483648`},
		{types.Big(math.MaxInt64), `9223372036854775807`},
		{types.Huge(types.Int128{Hi: math.MinInt64}), `-170141183460469231731687303715884105728`},
		{types.Huge(types.Int128{Hi: 1}), `18446744073709551616`},
		{types.Huge(types.I128(-1)), `-1`},
		// DECIMAL keeps every scale digit.
		{types.Dec(types.I128(1500), 3), `1.500`},
		{types.Dec(types.I128(-500), 3), `-0.500`},
		{types.Dec(types.I128(1), 3), `0.001`},
		{types.Dec(types.I128(0), 3), `0.000`},
		{types.Dec(types.I128(12), 0), `12`},
		{types.Dec(types.I128(-12), 0), `-12`},
		{types.Dec(types.I128(5), 1), `0.5`},
		{types.Dec(neg(types.Int128{Hi: math.MaxInt64, Lo: math.MaxUint64}), 38), `-1.70141183460469231731687303715884105727`},
		{types.Dec(types.I128(7), 38), `0.00000000000000000000000000000000000007`},
		// DOUBLE is repr(float).
		{types.Float(0), `0.0`},
		{types.Float(math.Copysign(0, -1)), `-0.0`},
		{types.Float(1), `1.0`},
		{types.Float(-1.5), `-1.5`},
		{types.Float(0.1), `0.1`},
		{types.Float(139.46), `139.46`},
		{types.Float(1e-4), `0.0001`},
		{types.Float(9.999e-5), `9.999e-05`},
		{types.Float(1.234e-5), `1.234e-05`},
		{types.Float(1e15), `1000000000000000.0`},
		{types.Float(9999999999999998), `9999999999999998.0`},
		{types.Float(1e16), `1e+16`},
		{types.Float(1.2345678901234568e17), `1.2345678901234568e+17`},
		{types.Float(1e22), `1e+22`},
		{types.Float(1e100), `1e+100`},
		{types.Float(5e-324), `5e-324`},
		{types.Float(math.MaxFloat64), `1.7976931348623157e+308`},
		{types.Float(math.NaN()), `null`},
		{types.Float(math.Inf(1)), `null`},
		{types.Float(math.Inf(-1)), `null`},
		// VARCHAR is json.dumps(ensure_ascii=True).
		{types.Str(""), `""`},
		{types.Str(`a"b\c/d`), `"a\"b\\c/d"`},
		{types.Str("\n\r\t\b\f\x00\x1f\x7f"), `"\n\r\t\b\f\u0000\u001f\u007f"`},
		{types.Str("é中😀\u2028\ufeff"), `"\u00e9\u4e2d\ud83d\ude00\u2028\ufeff"`},
		{types.Str("\U0010ffff"), `"\udbff\udfff"`},
		{types.Str("a\xffb"), `"a\ufffdb"`},
		{types.Str("\xe2\x82x"), `"\ufffdx"`},                         // truncated sequence: one U+FFFD
		{types.Str("\xf0\x9f\x98"), `"\ufffd"`},                       // truncated at the end
		{types.Str("\xed\xa0\x80"), `"\ufffd\ufffd\ufffd"`},           // encoded surrogate
		{types.Str("\xc0\x80"), `"\ufffd\ufffd"`},                     // overlong
		{types.Str("\xf4\x90\x80\x80"), `"\ufffd\ufffd\ufffd\ufffd"`}, // above U+10FFFF
		// TIMESTAMP and DATE are DuckDB text.
		{types.TS(0), `"1970-01-01 00:00:00"`},
		{types.TS(-1), `"1969-12-31 23:59:59.999999"`},
		{types.TS(1784368800120000), `"2026-07-18 10:00:00.12"`},
		{types.TS(1784368800000010), `"2026-07-18 10:00:00.00001"`},
		{types.DateDays(0), `"1970-01-01"`},
		{types.DateDays(-1), `"1969-12-31"`},
		// INTERVAL is DuckDB text.
		{types.Interv(0, 0, 60_000_000), `"00:01:00"`},
		{types.Interv(0, 1, 0), `"1 day"`},
		{types.Interv(2, 3, 4*microsPerHour+5*microsPerMinute+6_500_000), `"2 months 3 days 04:05:06.5"`},
	} {
		if got := string(AppendCell(nil, tc.v)); got != tc.want {
			t.Errorf("AppendCell(%+v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestAppendCellUnknownKindPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "unknown kind") {
			t.Errorf("recover() = %v, want an unknown kind panic", r)
		}
	}()
	AppendCell(nil, types.Value{Kind: types.Kind(200)})
}

func TestEmptyKeyAndValue(t *testing.T) {
	if got := string(AppendKey(nil, nil)); got != "[]" {
		t.Errorf("AppendKey(nil) = %s", got)
	}
	if got := string(AppendValue(nil, nil, nil)); got != "{}" {
		t.Errorf("AppendValue(nil) = %s", got)
	}
	got, err := NewEncoder(nil).AppendValue([]byte("x"), nil)
	if err != nil || string(got) != "x{}" {
		t.Errorf("Encoder.AppendValue(nil) = %s, %v", got, err)
	}
}

func TestAppendValueMismatchPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("AppendValue with 1 column and 2 cells did not panic")
		}
	}()
	AppendValue(nil, []string{"a"}, []types.Value{types.Big(1), types.Big(2)})
}

func TestEncoderCellCount(t *testing.T) {
	e := NewEncoder([]string{"a", "b"})
	dst := []byte("keep")
	got, err := e.AppendValue(dst, []types.Value{types.Big(1)})
	if !errors.Is(err, ErrCellCount) {
		t.Fatalf("err = %v, want ErrCellCount", err)
	}
	if string(got) != "keep" {
		t.Errorf("dst changed on error: %q", got)
	}
}

// TestEncoderMatchesAppendValue: the Encoder's pre-escaped column names give
// the same bytes as AppendValue, for random hostile columns and cells.
func TestEncoderMatchesAppendValue(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 2000 {
		n := rng.IntN(8)
		cols := make([]string, n)
		cells := make([]types.Value, n)
		for i := range n {
			cols[i] = randString(rng)
			cells[i] = randCell(rng)
		}
		e := NewEncoder(cols)
		orig := append([]string(nil), cols...)
		for i := range cols {
			cols[i] = "mutated" // NewEncoder must have copied
		}
		want := AppendValue(nil, orig, cells)
		got, err := e.AppendValue(nil, cells)
		if err != nil || string(got) != string(want) {
			t.Fatalf("seed %d: Encoder = %s (%v), AppendValue = %s", seed, got, err, want)
		}
		if k := e.AppendKey(nil, cells); string(k) != string(AppendKey(nil, cells)) {
			t.Fatalf("seed %d: Encoder.AppendKey differs", seed)
		}
	}
}

// TestNoAllocations: with a buffer that has room, rendering a row of every
// kind allocates nothing.
func TestNoAllocations(t *testing.T) {
	cols := []string{"merchant", "window_start", "orders", "sum", "max", "d", "dec", "huge", "iv", "b", "n", "bad"}
	cells := []types.Value{
		types.Str("acme \u00e9\U0001F600 \"q\""), types.TS(1784368800123456), types.Big(3), types.Float(139.46),
		types.Float(1e-7), types.DateDays(20000), types.Dec(types.I128(-1500), 3),
		types.Huge(types.Int128{Hi: 5, Lo: 7}), types.Interv(14, 3, -1_500_000), types.Bool(true),
		types.NullOf(types.Double), types.Str("\xff\xe2\x82"),
	}
	e := NewEncoder(cols)
	buf := make([]byte, 0, 4096)
	key := []byte(`["acme", "2026-07-18 10:00:00"]`)
	allocs := testing.AllocsPerRun(200, func() {
		buf = AppendKey(buf[:0], cells)
		buf = AppendValue(buf[:0], cols, cells)
		buf, _ = e.AppendValue(buf[:0], cells)
		buf, _ = AppendGroupKey(buf[:0], key, []int{1})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per row, want 0", allocs)
	}
}
