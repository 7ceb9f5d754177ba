package plan

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
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

// FuzzCompileViews is FuzzCompile's check over scripts with views over
// views: no panic, every error positioned inside the text, every compiled
// expression evaluates; and a reader's source is the view's SELECT list.
func FuzzCompileViews(f *testing.F) {
	for _, s := range []string{
		"CREATE VIEW m AS SELECT customer, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, sum(amount) AS t FROM events GROUP BY customer, TUMBLE(ts, INTERVAL '1' MINUTE); SELECT customer, TUMBLE_START(ws, INTERVAL '1' HOUR), sum(t) FROM m GROUP BY customer, TUMBLE(ws, INTERVAL '1' HOUR)",
		"CREATE VIEW m AS SELECT window_start, count(*) AS n FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)) GROUP BY window_start EMIT FINAL ALLOWED LATENESS INTERVAL '1' MINUTE; CREATE VIEW h AS SELECT n, count(*) FROM m GROUP BY n; CREATE SINK s FROM h WITH (path = 'x')",
		"CREATE VIEW c AS SELECT customer, count(*) AS n FROM events GROUP BY customer; SELECT sum(n) FROM c",
		"CREATE VIEW s AS SELECT customer, SESSION_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM events GROUP BY customer, SESSION(ts, INTERVAL '1' MINUTE); SELECT window_start, sum(n) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ws), INTERVAL '1' HOUR)) GROUP BY window_start",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		prog, err := Compile(sql, CompileOptions{Sources: testSources(), DefaultName: "q"})
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("Compile(%q) panicked: %v", sql, err)
			}
			var pe *parser.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Compile(%q): non-positioned error %T %v", sql, err, err)
			}
			if pe.Pos < 0 || pe.Pos > len(sql) {
				t.Fatalf("Compile(%q): position %d outside the text", sql, pe.Pos)
			}
			return
		}
		for _, q := range prog.Queries {
			exerciseQuery(t, sql, q)
			if v := q.Source.View; v != nil {
				if len(q.Source.Columns) != len(v.Select) || v.Window == nil || v.Emit.Mode != EmitFinal {
					t.Fatalf("Compile(%q): %s reads %s, which is not a final view, or its columns are not the view's", sql, q.Name, v.Name)
				}
				if err := q.Validate(); err != nil {
					t.Fatalf("Compile(%q): %v", sql, err)
				}
			}
		}
	})
}
