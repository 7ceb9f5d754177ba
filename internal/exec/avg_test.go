package exec

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// ratAvg is the oracle: the exact mean as a rational, rounded once.
func ratAvg(sum *big.Rat, n int64) float64 {
	f, _ := new(big.Rat).Quo(sum, new(big.Rat).SetInt64(n)).Float64()
	return f
}

func TestAvgDoubleRoundsOnce(t *testing.T) {
	seed := uint64(20261201)
	r := rand.New(rand.NewPCG(seed, 2))
	for trial := 0; trial < 3000; trial++ {
		n := 1 + r.IntN(40)
		var s fsum
		exact := new(big.Rat)
		for range n {
			x := randDouble(r)
			s.add(x)
			exact.Add(exact, new(big.Rat).SetFloat64(x))
		}
		want := ratAvg(exact, int64(n))
		if got := s.avg(int64(n)); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("seed %d trial %d: avg %v, exact %v", seed, trial, got, want)
		}
	}
	// Wide integers over a power of two: means on a midpoint are common.
	for trial := 0; trial < 3000; trial++ {
		n := 1 << (1 + r.IntN(3))
		var s fsum
		exact := new(big.Rat)
		for range n {
			x := float64(r.Int64N(1<<53)) * math.Ldexp(1, r.IntN(3))
			if r.IntN(3) == 0 {
				x = -x
			}
			s.add(x)
			exact.Add(exact, new(big.Rat).SetFloat64(x))
		}
		want := ratAvg(exact, int64(n))
		if got := s.avg(int64(n)); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("seed %d tie trial %d: avg %v, exact %v", seed, trial, got, want)
		}
	}
	// Exact means on a midpoint between two doubles round to the even one,
	// also just below a power of two, where the spacing halves.
	one := 1.0
	up, down := math.Nextafter(one, 2), math.Nextafter(one, 0)
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, up}, 1},
		{[]float64{up, math.Nextafter(up, 2)}, math.Nextafter(up, 2)},
		{[]float64{1, down}, 1},
		{[]float64{down, math.Nextafter(down, 0)}, math.Nextafter(down, 0)},
		{[]float64{3, 1, up}, math.Nextafter(5.0/3, 0)},
		{[]float64{0x1p-1000, 0x1p-1000, 0x1p-1074}, 0x1p-1000},
		{[]float64{1e300, 1e300, -1e300, 1e-300}, 1e300 / 4},
	} {
		for _, sign := range []float64{1, -1} {
			var s fsum
			exact := new(big.Rat)
			for _, x := range c.xs {
				s.add(sign * x)
				exact.Add(exact, new(big.Rat).SetFloat64(sign*x))
			}
			want := ratAvg(exact, int64(len(c.xs)))
			if got := s.avg(int64(len(c.xs))); got != want {
				t.Errorf("avg(%v) = %v, exact %v", c.xs, got, want)
			}
			if len(c.xs) == 2 && want != sign*c.want {
				t.Errorf("oracle avg(%v) = %v, want %v", c.xs, want, sign*c.want)
			}
		}
	}
	// 27.4, 21.1, 4.45: the rounded sum over 3 is 17.650000000000002.
	var s fsum
	for _, x := range []float64{27.4, 21.1, 4.45} {
		s.add(x)
	}
	if got := s.avg(3); got != 17.65 {
		t.Fatalf("avg(27.4, 21.1, 4.45) = %v, want 17.65", got)
	}
	// A sum beyond the double range still has a finite mean.
	var w fsum
	w.add(math.MaxFloat64)
	w.add(math.MaxFloat64)
	if got := w.avg(2); got != math.MaxFloat64 {
		t.Fatalf("avg(max, max) = %v, want %v", got, math.MaxFloat64)
	}
	var inf fsum
	inf.add(math.Inf(1))
	inf.add(1)
	if got := inf.avg(2); !math.IsInf(got, 1) {
		t.Fatalf("avg(+Inf, 1) = %v, want +Inf", got)
	}
}

func TestAvgIntegerAndDecimalRoundOnce(t *testing.T) {
	seed := uint64(20261201)
	r := rand.New(rand.NewPCG(seed, 3))
	for trial := 0; trial < 5000; trial++ {
		n := 1 + r.IntN(20)
		scale := uint8(r.IntN(39))
		var sum types.Int128
		exact := new(big.Int)
		for range n {
			var x int64
			switch r.IntN(3) {
			case 0:
				x = r.Int64N(1000) - 500
			case 1:
				x = int64(r.Uint64())
			default:
				x = r.Int64N(1 << 53)
			}
			v := types.Big(x)
			var err error
			if sum, err = addExact(sum, v); err != nil {
				t.Fatal(err)
			}
			exact.Add(exact, big.NewInt(x))
		}
		d := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
		want := ratAvg(new(big.Rat).SetFrac(exact, d), int64(n))
		if got := exactAvg(sum, int64(n), scale); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("seed %d trial %d: avg %v, exact %v (sum %v, n %d, scale %d)", seed, trial, got, want, exact, n, scale)
		}
	}
	for _, c := range []struct {
		xs    []int64
		scale uint8
		want  float64
	}{
		{[]int64{9060515353853806102, 9140615107960319628, 9112354741735175090}, 0, 9.104495067849767e+18},
		{[]int64{1, 1, 21}, 3, 0.007666666666666666},
	} {
		var sum types.Int128
		for _, x := range c.xs {
			sum, _ = addExact(sum, types.Big(x))
		}
		if got := exactAvg(sum, int64(len(c.xs)), c.scale); got != c.want {
			t.Errorf("avg of %v (scale %d) = %v, want %v", c.xs, c.scale, got, c.want)
		}
	}
}
