package changelog

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// doubleSeeds are the boundary cases of appendShortDecimal: the edges of its
// range, values just inside and outside them, integers, prices, sums that
// are not short decimals, and the neighbours of short decimals.
var doubleSeeds = []float64{
	0, math.Copysign(0, -1), 1, -1, 5, 10, 1000, 0.1, 0.2, 0.3, 0.1 + 0.2, 153.98, -153.98, 999.99,
	1e-4, 1e-5, 9.999e-5, 0.00012345, 0.00012345678, 1e15, 1e15 - 1, 999999999999999.9, 99999999999999.98,
	1e16, 123456789012345, 12345678901234.5, 1234567890123.45, 0.123456789012345, 179482.31000000003,
	math.Nextafter(153.98, 0), math.Nextafter(153.98, 1000), math.MaxFloat64, math.SmallestNonzeroFloat64,
	2.5e-7, 1e22, 4.35, 2.675, 1.005, 1e-4 * 3, 7e-4, 0.3e-3,
}

// TestAppendDoubleShortcut holds appendDouble (with its short-decimal
// shortcut) to the general strconv path over the seeds, every price of a
// few thousand cents, and random doubles of every magnitude, and checks
// that the shortcut does take the common cases.
func TestAppendDoubleShortcut(t *testing.T) {
	check := func(f float64) {
		t.Helper()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		got := appendDouble(nil, f)
		want := appendDoubleGeneral(nil, f)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendDouble(%v) = %s, general path %s", f, got, want)
		}
		if back, err := strconv.ParseFloat(string(got), 64); err != nil || back != f {
			t.Fatalf("appendDouble(%v) = %s does not round-trip", f, got)
		}
	}
	for _, f := range doubleSeeds {
		check(f)
		check(-f)
	}
	for c := range 100000 {
		check(float64(c) / 100)
		check(float64(c) * 0.01)
		check(float64(c)/1000 + 12345)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		check(math.Float64frombits(rng.Uint64()))
		check(rng.Float64() * math.Pow(10, float64(rng.IntN(40)-20)))
		check(float64(rng.Int64N(1e15)) / pow10[rng.IntN(len(pow10))])
	}
	// Every digit count of n against every k: the digit pairs and the odd
	// digit on either side of the point.
	for d := 1; d <= 15; d++ {
		lo := int64(math.Pow(10, float64(d-1)))
		for _, n := range []int64{lo, lo + 1, lo + 7, 2*lo - 1, 10*lo - 1, lo*10 - lo/2 - 3} {
			for k := range pow10 {
				check(float64(n) / pow10[k])
			}
		}
	}
	for _, f := range []float64{153.98, 0.1, 1000, 0.0001, 12345678901234.5} {
		if _, ok := appendShortDecimal(nil, f); !ok {
			t.Errorf("appendShortDecimal(%v) declined a short decimal", f)
		}
	}
	tenth, fifth := 0.1, 0.2
	for _, f := range []float64{tenth + fifth, 1e15, 1e-5, 0, 179482.31000000003} {
		if _, ok := appendShortDecimal(nil, f); ok {
			t.Errorf("appendShortDecimal(%v) took a value outside its domain", f)
		}
	}
}

// FuzzAppendDouble: for any double, appendDouble writes the general path's
// bytes (the shortcut never changes a byte).
func FuzzAppendDouble(f *testing.F) {
	for _, s := range doubleSeeds {
		f.Add(math.Float64bits(s))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		for _, x := range []float64{v, math.Round(v*100) / 100, math.Trunc(v), float64(int64(bits>>12)) / 1000} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			got := appendDouble(nil, x)
			want := appendDoubleGeneral(nil, x)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendDouble(%v) = %s, general path %s", x, got, want)
			}
		}
	})
}
