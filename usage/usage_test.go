package usage

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func FuzzDecodeCursor(f *testing.F) {
	f.Add(Cursor{Started: true, Store: 'p', Fingerprint: 7, A: 123, B: 456}.Encode())
	f.Add(Cursor{Started: true, Store: 'c', Fingerprint: 9, A: -1, K: "key'\x00"}.Encode())
	f.Add("")
	f.Add("AQ")
	f.Add("!!!")
	f.Fuzz(func(t *testing.T, s string) {
		for _, store := range []byte{'p', 'c'} {
			c, err := DecodeCursor(s, store, 9)
			if err != nil {
				if !errors.Is(err, ErrInvalidCursor) {
					t.Fatalf("error %v does not wrap ErrInvalidCursor", err)
				}
				continue
			}
			if s != "" && c.Encode() != s {
				t.Fatalf("cursor %q decodes to %+v which re-encodes to %q", s, c, c.Encode())
			}
		}
	})
}

func TestCursorRoundTripAndBinding(t *testing.T) {
	c := Cursor{Started: true, Store: 'c', Fingerprint: 42, A: 1796017984000, B: -3, K: "k\x00'é"}
	got, err := DecodeCursor(c.Encode(), 'c', 42)
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := DecodeCursor(c.Encode(), 'p', 42); !errors.Is(err, ErrCursorMismatch) {
		t.Fatalf("other store: %v", err)
	}
	if _, err := DecodeCursor(c.Encode(), 'c', 43); !errors.Is(err, ErrCursorMismatch) {
		t.Fatalf("other query: %v", err)
	}
	a, _ := ListQuery{Meter: "m", Filters: []Filter{Eq("d", Number(5))}}.Spec()
	b, _ := ListQuery{Meter: "m", Filters: []Filter{Eq("d", String("5"))}}.Spec()
	if a.Fingerprint == b.Fingerprint {
		t.Fatal("number and string filters share a fingerprint")
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]Decimal{
		"0": "0", "-0.000": "0", "12.500000000": "12.5", "007": "7", "-1.10": "-1.1", ".5": "0.5", "5.": "5",
		"+3": "3", "12345678901234567890.123456789": "12345678901234567890.123456789",
	} {
		got, err := ParseDecimal(in)
		if err != nil || got != want {
			t.Errorf("ParseDecimal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-", ".", "1e5", "1.2.3", "abc", " 1", "--1"} {
		if _, err := ParseDecimal(bad); err == nil {
			t.Errorf("ParseDecimal(%q) accepted", bad)
		}
	}
}

// TestSumDecimalsExact compares SumDecimals with integer arithmetic on
// random nano-unit amounts (seeded).
func TestSumDecimalsExact(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		var ds []Decimal
		var want int64
		for i := rng.Intn(20); i >= 0; i-- {
			n := rng.Int63n(2_000_000_000_000) - 1_000_000_000_000
			want += n
			d, err := ParseDecimal(nanoText(n))
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		got, err := SumDecimals(ds...)
		w, _ := ParseDecimal(nanoText(want))
		if err != nil || got != w {
			t.Fatalf("seed %d: SumDecimals(%v) = %s, want %s", seed, ds, got, w)
		}
	}
}

func nanoText(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := strings.Repeat("0", 10) + itoa(n)
	s = strings.TrimLeft(s[:len(s)-9], "0") + "." + s[len(s)-9:]
	if strings.HasPrefix(s, ".") {
		s = "0" + s
	}
	if neg {
		s = "-" + s
	}
	return s
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestParseQuantity: a quantity is read exactly as DECIMAL(38,9); one that
// does not fit (a 10th fractional digit, a 30th integer digit) is refused.
func TestParseQuantity(t *testing.T) {
	max38 := "99999999999999999999999999999.999999999"
	for in, want := range map[string]string{
		"0": "0.000000000", "1.5": "1.500000000", "0.1": "0.100000000", "-2": "-2.000000000", "1.50": "1.500000000",
		"1e15": "1000000000000000.000000000", "1.5e3": "1500.000000000", "2E-9": "0.000000002", "-0.000000001": "-0.000000001",
		"12345678901234567890123456789.123456789": "12345678901234567890123456789.123456789", max38: max38,
		"-" + max38: "-" + max38, "0.1234567890000": "0.123456789", "1e28": "10000000000000000000000000000.000000000",
		"123456789.123456789": "123456789.123456789",
	} {
		q, err := ParseQuantity(in)
		if err != nil {
			t.Errorf("ParseQuantity(%s): %v", in, err)
			continue
		}
		if got := FormatQuantity(q); got != want {
			t.Errorf("FormatQuantity(ParseQuantity(%s)) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"0.0000000001", "1e-10", "100000000000000000000000000000", "1e29", "1" + max38, "NaN", "Infinity", "", "1e", "0x10", "1.5.5", "1e99999"} {
		if q, err := ParseQuantity(in); !errors.Is(err, ErrBadQuantity) {
			t.Errorf("ParseQuantity(%s) = %v, %v; want ErrBadQuantity", in, q, err)
		}
	}
}

func TestBoundMillis(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := base.UnixMilli()
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{base, ms}, {base.Add(time.Nanosecond), ms + 1}, {base.Add(999 * time.Microsecond), ms + 1},
		{base.Add(time.Millisecond), ms + 1}, {time.Time{}, 0}, {time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), MaxMillis},
	} {
		if got := BoundMillis(c.t); got != c.want {
			t.Errorf("BoundMillis(%s) = %d, want %d", c.t, got, c.want)
		}
	}
	// An event at sub-millisecond time t is stored at floor(t); for it,
	// "t < bound" and "floor(t) < BoundMillis(bound)" must agree.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		ev := base.Add(time.Duration(rng.Int63n(5_000_000)))
		bound := base.Add(time.Duration(rng.Int63n(5_000_000)))
		evMs, _ := EventMillis(ev)
		evMs = ev.Truncate(time.Millisecond).UnixMilli()
		if ev.Truncate(time.Millisecond).Before(bound) != (evMs < BoundMillis(bound)) {
			t.Fatalf("event %s, bound %s disagree", ev, bound)
		}
	}
}

func TestParseEventJSON(t *testing.T) {
	e, err := ParseEventJSON([]byte(`{"key":"k1","time":"2026-07-18T10:00:00.123Z","meter":"api","quantity":3.5,"dims":{"r":"eu","n":2,"b":true,"z":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != "k1" || e.Time.UnixMilli() != time.Date(2026, 7, 18, 10, 0, 0, 123e6, time.UTC).UnixMilli() || e.Quantity != "3.5" ||
		!e.Dims["r"].Equal(String("eu")) || !e.Dims["n"].Equal(Number(2)) || !e.Dims["b"].Equal(Bool(true)) || !e.Dims["z"].Equal(Null()) {
		t.Fatalf("parsed %+v", e)
	}
	e, err = ParseEventJSON([]byte(`{"key":"k","time":1700000000000,"meter":"m","quantity":1}`))
	if err != nil || e.Time.UnixMilli() != 1700000000000 {
		t.Fatalf("epoch ms time: %+v %v", e, err)
	}
	for in, want := range map[string]error{
		`{"key":"k","time":"yesterday","meter":"m","quantity":1}`:        ErrBadTime,
		`{"key":"k","time":1.5,"meter":"m","quantity":1}`:                ErrBadTime,
		`{"key":"k","time":1,"meter":"m"}`:                               ErrBadQuantity,
		`{"key":"k","time":1,"meter":"m","quantity":"1"}`:                ErrBadQuantity,
		`{"key":"k","time":1,"meter":"m","quantity":1,"dims":{"a":[1]}}`: ErrInvalidEvent,
		`{"key":"k","time":1,"meter":"m","quantity":1,"extra":1}`:        ErrInvalidEvent,
		`{"key":"k","time":1,"meter":"m","quantity":1e999}`:              ErrBadQuantity,
		`{"key":"k","time":1,"meter":"m","quantity":1} {"again":1}`:      ErrInvalidEvent,
		`not json`: ErrInvalidEvent,
		`{"key":"k","time":1,"meter":"m","quantity":1,"dims":{"a":{"b":1}}}`: ErrInvalidEvent,
	} {
		if _, err := ParseEventJSON([]byte(in)); !errors.Is(err, want) {
			t.Errorf("ParseEventJSON(%s) = %v, want %v", in, err, want)
		}
	}
}

func TestValueJSONAndNull(t *testing.T) {
	var m map[string]Value
	if err := json.Unmarshal([]byte(`{"a":null,"b":5,"c":"5","d":false}`), &m); err != nil {
		t.Fatal(err)
	}
	if m["a"].Kind() != KindNull || m["b"].Kind() != KindNumber || m["c"].Kind() != KindString || m["d"].Kind() != KindBool {
		t.Fatalf("kinds: %v", m)
	}
	if Number(5).Equal(String("5")) || Null().Equal(String("")) || !Number(math.Copysign(0, -1)).Equal(Number(0)) {
		t.Fatal("typed equality")
	}
	b, _ := json.Marshal(map[string]Value{"n": Number(1e21), "z": Null()})
	if string(b) != `{"n":1000000000000000000000,"z":null}` {
		t.Fatalf("marshal: %s", b)
	}
}

func TestPrepareKeepsFirstAndReportsIndexes(t *testing.T) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Prepare([]Event{
		{Key: "a", Time: ts, Meter: "m", Quantity: "1"},
		{Key: "", Time: ts, Meter: "m", Quantity: "1"},
		{Key: "a", Time: ts, Meter: "m", Quantity: "2"},
		{Key: "b", Time: ts.Add(1500 * time.Microsecond), Meter: "m", Quantity: "NaN"},
		{Key: "c", Time: ts.Add(1500 * time.Microsecond), Meter: "m", Quantity: "3"},
	})
	if len(b.Rows) != 2 || b.Rows[0].Quantity != "1.000000000" || b.BatchDuplicate != 1 || len(b.Invalid) != 2 {
		t.Fatalf("%+v", b)
	}
	if b.Invalid[0].Index != 1 || !errors.Is(b.Invalid[0], ErrMissingKey) || b.Invalid[1].Index != 3 || !errors.Is(b.Invalid[1], ErrBadQuantity) {
		t.Fatalf("invalid: %v", b.Err())
	}
	if b.Rows[1].Millis != ts.UnixMilli()+1 {
		t.Fatalf("sub-millisecond time not truncated: %d", b.Rows[1].Millis)
	}
	if !strings.Contains(b.Err().Error(), "event 3") {
		t.Fatalf("error text does not name the index: %v", b.Err())
	}
}
