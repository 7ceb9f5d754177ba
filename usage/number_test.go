package usage

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// Numbers beyond 2^53 must stay distinct: a float64 would merge them.
func TestNumberDimensionKeepsExactValue(t *testing.T) {
	var a, b Value
	if err := json.Unmarshal([]byte("9007199254740993"), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte("9007199254740992"), &b); err != nil {
		t.Fatal(err)
	}
	if a.Equal(b) || a.Compare(b) != 1 || a.NumText() != "9007199254740993" {
		t.Fatalf("2^53+1 = %v, 2^53 = %v: equal %v, compare %d", a, b, a.Equal(b), a.Compare(b))
	}
	out, _ := json.Marshal(a)
	if string(out) != "9007199254740993" {
		t.Fatalf("marshal: %s", out)
	}
	for _, spelling := range []string{"1", "1.0", "1e0", "10e-1", "0.1e1", "1.000"} {
		v, err := ParseNumber(spelling)
		if err != nil || !v.Equal(Number(1)) || v.NumText() != "1" {
			t.Fatalf("%s: %v %v, want the number 1", spelling, v, err)
		}
	}
	for _, f := range []float64{0.1, -2.5, 1e21, 5e-324, math.MaxFloat64, math.Copysign(0, -1)} {
		if err := checkValue(Number(f)); err != nil {
			t.Fatalf("Number(%v): %v", f, err)
		}
		if Number(f).Num() != f && f != 0 {
			t.Fatalf("Number(%v).Num() = %v", f, Number(f).Num())
		}
	}
	if Number(math.NaN()).Kind() != KindNumber || checkValue(Number(math.NaN())) == nil || checkValue(Number(math.Inf(1))) == nil {
		t.Fatal("a non-finite number passed validation")
	}
}

// The bound on a number's text: MaxNumberBytes characters is taken, one more
// is refused, and so is an exponent that would build a longer text.
func TestNumberDimensionBound(t *testing.T) {
	ok := "1" + strings.Repeat("0", MaxNumberBytes-1)
	if v, err := ParseNumber(ok); err != nil || checkValue(v) != nil {
		t.Fatalf("%d digits: %v", MaxNumberBytes, err)
	}
	if _, err := ParseNumber(ok + "0"); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("%d digits: %v, want ErrInvalidValue", MaxNumberBytes+1, err)
	}
	if _, err := ParseNumber(fmt.Sprintf("1e%d", MaxNumberBytes)); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("1e%d: %v, want ErrInvalidValue", MaxNumberBytes, err)
	}
	if _, err := ParseNumber("1e99999999999"); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("huge exponent: %v", err)
	}
	if _, err := ParseEventJSON([]byte(`{"key":"k","time":1,"meter":"m","quantity":1,"dims":{"a":1e5000}}`)); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("1e5000 in an event: %v", err)
	}
}

// Property: Equal and Compare of numbers agree with exact rational
// arithmetic for random spellings, including ones a float64 merges.
func TestNumberCompareMatchesExactValue(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	gen := func() string {
		var b strings.Builder
		if r.Intn(2) == 0 {
			b.WriteByte('-')
		}
		b.WriteString([]string{"0", "9007199254740992", "9007199254740993", "1", "12"}[r.Intn(5)])
		if r.Intn(2) == 0 {
			b.WriteString("." + []string{"0", "5", "50", "000001", "1"}[r.Intn(5)])
		}
		if r.Intn(3) == 0 {
			fmt.Fprintf(&b, "e%d", r.Intn(7)-3)
		}
		return b.String()
	}
	for i := 0; i < 20000; i++ {
		sa, sb := gen(), gen()
		a, err := ParseNumber(sa)
		if err != nil {
			t.Fatalf("%s: %v", sa, err)
		}
		b, err := ParseNumber(sb)
		if err != nil {
			t.Fatalf("%s: %v", sb, err)
		}
		ra, _ := new(big.Rat).SetString(sa)
		rb, _ := new(big.Rat).SetString(sb)
		want := ra.Cmp(rb)
		if got := a.Compare(b); got != want || a.Equal(b) != (want == 0) {
			t.Fatalf("%s (%s) vs %s (%s): compare %d equal %v, want %d", sa, a, sb, b, got, a.Equal(b), want)
		}
		if rt, _ := new(big.Rat).SetString(a.NumText()); rt.Cmp(ra) != 0 {
			t.Fatalf("%s: canonical text %s has another value", sa, a.NumText())
		}
	}
}

// JSON decoding would turn invalid UTF-8 and unpaired surrogates into
// U+FFFD, merging two different keys; ParseEventJSON refuses them.
func TestParseEventJSONRefusesTextItWouldRepair(t *testing.T) {
	line := func(key string) []byte {
		return []byte(`{"key":"` + key + `","time":1,"meter":"m","quantity":1}`)
	}
	for _, key := range []string{"u\xff", "u\xfe", `u\ud800`, `u\udc00x`, `u\ud800\u0041`, "\xed\xa0\x80"} {
		if _, err := ParseEventJSON(line(key)); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("key %q: %v, want ErrInvalidEvent", key, err)
		}
	}
	for key, want := range map[string]string{`u\ud83d\ude00`: "u😀", "u\ufffd": "u\ufffd", `u\\ud800`: `u\ud800`, "ü": "ü", `\"\\u`: `"\u`} {
		e, err := ParseEventJSON(line(key))
		if err != nil || e.Key != want {
			t.Errorf("key %q: %q %v, want %q", key, e.Key, err, want)
		}
	}
	var v Value
	if err := json.Unmarshal([]byte("\"a\xff\""), &v); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("dimension value with invalid UTF-8: %v", err)
	}
	_, err := ParseEventJSON([]byte(`{"key":"k","time":1,"meter":"m","quantity":1,"dims":{"r":"` + "e\xffu" + `"}}`))
	if err == nil || !strings.Contains(err.Error(), "byte") {
		t.Errorf("dimension with invalid UTF-8: %v", err)
	}
}

// A bound's 7th to 9th fractional digits round it up to the next
// millisecond, as the README says, instead of being cut.
func TestParseBoundTextRoundsUp(t *testing.T) {
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMilli()
	for in, want := range map[string]int64{
		"2026-07-18 10:00:00":               base,
		"2026-07-18 10:00:00.000000":        base,
		"2026-07-18 10:00:00.000000000":     base,
		"2026-07-18 10:00:00.0000001":       base + 1,
		"2026-07-18T10:00:00.000000001Z":    base + 1,
		"2026-07-18T10:00:00.0009999Z":      base + 1,
		"2026-07-18T10:00:00.001Z":          base + 1,
		"2026-07-18T10:00:00.0010001Z":      base + 2,
		"2026-07-18T12:00:00.0000001+02:00": base + 1,
	} {
		got, err := ParseBoundText(in)
		if err != nil || BoundMillis(got) != want {
			t.Errorf("%s: bound %d ms (%v), want %d", in, BoundMillis(got)-base, err, want-base)
		}
	}
}
