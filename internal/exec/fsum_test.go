package exec

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactSum is the oracle: the exact sum of finite doubles, rounded once
// (nearest even), computed with a wide big.Float.
func exactSum(xs []float64) float64 {
	acc := new(big.Float).SetPrec(widePrec)
	for _, x := range xs {
		acc.Add(acc, new(big.Float).SetFloat64(x))
	}
	f, _ := acc.Float64()
	return f
}

func randDouble(r *rand.Rand) float64 {
	switch r.IntN(5) {
	case 0:
		return float64(r.IntN(100000)) / 100
	case 1:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(2046)+1)<<52) // any finite normal
	case 2:
		return (r.Float64() - 0.5) * 1e300 * 1e8
	case 3:
		return math.Float64frombits(r.Uint64() & (1<<52 - 1)) // subnormal
	default:
		return -float64(r.IntN(1000)) * 0.1
	}
}

func TestFsumExactAndOrderIndependent(t *testing.T) {
	seed := uint64(20261130)
	r := rand.New(rand.NewPCG(seed, 1))
	for trial := 0; trial < 3000; trial++ {
		n := 1 + r.IntN(40)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = randDouble(r)
		}
		want := exactSum(xs)
		var s fsum
		for _, x := range xs {
			s.add(x)
		}
		if got := s.result(); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("seed %d trial %d: fsum %v, exact %v over %v", seed, trial, got, want, xs)
		}
		// Any order, and any split into merged halves, gives the same bits.
		r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		var a, b fsum
		k := r.IntN(n + 1)
		for _, x := range xs[:k] {
			a.add(x)
		}
		for _, x := range xs[k:] {
			b.add(x)
		}
		a.merge(&b)
		if got := a.result(); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("seed %d trial %d: shuffled and merged %v, exact %v", seed, trial, got, want)
		}
	}
}

func TestFsumSpecials(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{[]float64{1e308, 1e308, -1e308, 0.1}, 1e308},
		{[]float64{1e308, 1e308}, math.Inf(1)},
		{[]float64{math.Inf(1), 1}, math.Inf(1)},
		{[]float64{math.Inf(1), math.Inf(-1)}, math.NaN()},
		{[]float64{math.NaN(), 1}, math.NaN()},
		{[]float64{0.1, 0.2, 0.3}, 0.6},
		{[]float64{1e16, 1, -1e16}, 1},
	}
	for _, c := range cases {
		var s fsum
		for _, x := range c.in {
			s.add(x)
		}
		got := s.result()
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("sum %v = %v, want %v", c.in, got, c.want)
		}
	}
}
