package plan

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ubiksql/ubik/types"
)

// TestViewGolden runs testdata/views.txt: queries over views, explained,
// and the refusals with their positions. -update rewrites it.
func TestViewGolden(t *testing.T) {
	runGolden(t, "testdata/views.txt", compileOutput)
}

// TestViewWatermark holds ViewWatermark to its definition by brute force:
// for a view's watermark wm, the reader's watermark is the smallest
// window start s (a multiple of the slide) whose window is not yet final
// (s + size + lateness > wm).
func TestViewWatermark(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		slide := int64(1 + r.IntN(7))
		size := slide * int64(1+r.IntN(4))
		kind := Hop
		if r.IntN(2) == 0 {
			kind, size = Tumble, slide
		}
		late := int64(r.IntN(10))
		q := &Query{Window: &Window{Kind: kind, Size: size, Slide: slide}, Emit: Emit{Mode: EmitFinal, AllowedLateness: late}}
		wm := int64(r.IntN(200) - 100)
		got := q.ViewWatermark(wm)
		want := int64(math.MaxInt64)
		for s := int64(-300); s <= 300; s++ {
			if s%slide == 0 && s+size+late > wm && s < want {
				want = s
			}
		}
		if got != want {
			t.Fatalf("%v size %d slide %d lateness %d wm %d: got %d, want %d", kind, size, slide, late, wm, got, want)
		}
		if got > wm-late {
			t.Fatalf("reader watermark %d passes the view's %d - lateness %d", got, wm, late)
		}
	}
	q := &Query{Window: &Window{Kind: Tumble, Size: 60e6, Slide: 60e6}}
	for _, wm := range []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 60e6} {
		if got := q.ViewWatermark(wm); got != math.MinInt64 {
			t.Errorf("ViewWatermark(%d) = %d, want MinInt64", wm, got)
		}
	}
	if got := q.ViewWatermark(types.MaxTimestamp); got > types.MaxTimestamp {
		t.Errorf("ViewWatermark(max) = %d overflows", got)
	}
	if got := (&Query{Window: &Window{Kind: Session, Gap: 5}}).ViewWatermark(100); got != math.MinInt64 {
		t.Errorf("session: %d", got)
	}
}
