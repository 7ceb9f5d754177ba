package exec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// wideSource declares n BIGINT columns c0..c(n-1) and an event time; the
// line sets every column, in reverse order (so no key is where a column
// search would start).
func wideSource(n int, json bool) (*plan.Source, []byte) {
	src := &plan.Source{Name: "wide"}
	var b strings.Builder
	b.WriteString(`{"ts":"2026-07-18 10:00:00"`)
	for i := 0; i < n; i++ {
		src.Columns = append(src.Columns, plan.Column{Name: fmt.Sprintf("c%d", i), Type: types.BigInt})
	}
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, `,"c%d":%d`, i, i)
	}
	b.WriteString(`}`)
	src.Columns = append(src.Columns, plan.Column{Name: "ts", Type: types.Timestamp})
	src.TimeCol = n
	if json {
		src.Columns = append(src.Columns, plan.Column{Name: "j", Type: types.Varchar, JSON: true})
	}
	return src, []byte(b.String())
}

// BenchmarkDecodeWide: one event that sets every one of many declared
// columns, per op, on both paths.
func BenchmarkDecodeWide(b *testing.B) {
	for _, n := range []int{10, 1000, 20000} {
		for _, ref := range []bool{false, true} {
			name := fmt.Sprintf("cols=%d/scan", n)
			if ref {
				name = fmt.Sprintf("cols=%d/fastjson", n)
			}
			b.Run(name, func(b *testing.B) {
				src, line := wideSource(n, false)
				d := NewDecoder(src)
				d.noScan = ref
				for b.Loop() {
					if _, err := d.Decode(line); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Decoding is linear in the event: 20,000 declared columns, all set, take
// milliseconds per event on either path (a search per field took 1.2 s).
func TestDecodeWideIsLinear(t *testing.T) {
	for _, json := range []bool{false, true} {
		src, line := wideSource(20000, json)
		d := NewDecoder(src)
		best := time.Hour
		for range 3 {
			start := time.Now()
			row, err := d.Decode(line)
			if err != nil {
				t.Fatal(err)
			}
			if row[19999].I != 19999 || row[0].I != 0 {
				t.Fatalf("c19999 = %v, c0 = %v", row[19999], row[0])
			}
			best = min(best, time.Since(start))
		}
		if best > 150*time.Millisecond {
			t.Errorf("json column %v: %v per 20,000-column event, want linear time (under 150ms)", json, best)
		}
	}
}
