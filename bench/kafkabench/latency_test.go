package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// nearestRank is the oracle: the q-quantile of the sorted values by the
// nearest-rank definition.
func nearestRank(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestHistQuantilesMatchSortedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 3, 10, 99, 100, 101, 1000, 12345} {
		h := newHist()
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = rng.Int64N(3000)
			if rng.IntN(50) == 0 {
				vals[i] = histCap + rng.Int64N(5000) // beyond the buckets
			}
			h.add(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			want := nearestRank(vals, q)
			if want > histCap {
				want = vals[n-1] // the last bucket reports the max
			}
			if got := h.quantile(q); got != want {
				t.Fatalf("n=%d q=%v: got %d, want %d", n, q, got, want)
			}
		}
		if h.max != vals[n-1] || h.n != int64(n) {
			t.Fatalf("n=%d: max %d count %d, want %d and %d", n, h.max, h.n, vals[n-1], n)
		}
	}
}

func TestHistEmptyAndNegative(t *testing.T) {
	h := newHist()
	if got := h.quantile(0.5); got != -1 {
		t.Fatalf("empty: got %d, want -1", got)
	}
	h.add(-5)
	h.add(3)
	if got := h.quantile(0.5); got != 0 {
		t.Fatalf("a negative latency counts as 0: got p50 %d", got)
	}
	if got := h.quantile(1); got != 3 {
		t.Fatalf("got max quantile %d, want 3", got)
	}
}

func TestIntField(t *testing.T) {
	pat := fieldPattern("max_sent_ms")
	for _, c := range []struct {
		value string
		want  int64
		ok    bool
	}{
		{`{"grp": "g1", "window_start": "2026-12-06 10:00:00", "events": 3, "max_sent_ms": 1765015200123}`, 1765015200123, true},
		{`{"max_sent_ms": -42, "events": 1}`, -42, true},
		// A string cell holding the name, quotes escaped, is not the member.
		{`{"grp": "x\"max_sent_ms\": 9", "max_sent_ms": 17}`, 17, true},
		{`{"grp": "max_sent_ms", "max_sent_ms": 18}`, 18, true},
		{`{"grp": "g1", "max_sent_ms": null}`, 0, false},
		{`{"grp": "g1", "events": 5}`, 0, false},
	} {
		got, ok := intField([]byte(c.value), pat)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %d %t, want %d %t", c.value, got, ok, c.want, c.ok)
		}
	}
}

func record(value string, final bool, windowEndUs string) *kgo.Record {
	fin := "false"
	if final {
		fin = "true"
	}
	hs := []kgo.RecordHeader{{Key: "ubik.query", Value: []byte("q")}, {Key: "ubik.final", Value: []byte(fin)}}
	if windowEndUs != "" {
		hs = append(hs, kgo.RecordHeader{Key: "ubik.window_end", Value: []byte(windowEndUs)})
	}
	return &kgo.Record{Value: []byte(value), Headers: hs}
}

func TestFreshnessSortsRecords(t *testing.T) {
	pat := fieldPattern("max_sent_ms")
	const start, warmEnd = 1_000_000, 1_005_000
	f := newFreshness(30)
	// During the warm-up: counted, not timed.
	f.record(record(`{"max_sent_ms": 1000100}`, false, "1005000000"), pat, 1_000_200, start, warmEnd)
	// Early records after it, 80 and 120 ms late.
	f.record(record(`{"max_sent_ms": 1006000}`, false, "1010000000"), pat, 1_006_080, start, warmEnd)
	f.record(record(`{"max_sent_ms": 1007000}`, false, "1010000000"), pat, 1_007_120, start, warmEnd)
	// A final 1300 ms after its newest event, 1100 ms after its window's end.
	f.record(record(`{"max_sent_ms": 1009800}`, true, "1010000000"), pat, 1_011_100, start, warmEnd)
	// A value without the column.
	f.record(record(`{"events": 1}`, false, ""), pat, 1_008_000, start, warmEnd)

	if f.early.read != 4 || f.early.warm != 1 || f.early.unparsed != 1 || f.early.lat.n != 2 {
		t.Fatalf("early: read %d warm %d unparsed %d timed %d", f.early.read, f.early.warm, f.early.unparsed, f.early.lat.n)
	}
	if got := f.early.lat.quantile(0.5); got != 80 {
		t.Fatalf("early p50 %d, want 80", got)
	}
	if f.early.lat.max != 120 {
		t.Fatalf("early max %d, want 120", f.early.lat.max)
	}
	if f.final.lat.n != 1 || f.final.lat.max != 1300 {
		t.Fatalf("final: %d timed, max %d; want 1 and 1300", f.final.lat.n, f.final.lat.max)
	}
	if f.afterEnd.lat.n != 1 || f.afterEnd.lat.max != 1100 {
		t.Fatalf("final after window end: %d timed, max %d; want 1 and 1100", f.afterEnd.lat.n, f.afterEnd.lat.max)
	}
	if f.perSecond[0] != 100 || f.perSecond[6] != 80 || f.perSecond[7] != 120 {
		t.Fatalf("per second: %v", f.perSecond[:8])
	}
}
