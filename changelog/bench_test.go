package changelog

import (
	"testing"

	"github.com/ubiksql/ubik/internal/types"
)

// The standard query's row: GROUP BY merchant, TUMBLE(event_time, 1 minute)
// with count(*), sum(amount), max(amount).
var (
	stdColumns = []string{"merchant", "window_start", "count", "sum", "max"}
	stdRow     = []types.Value{
		types.Str("m3471"),
		types.TS(1784368800000000), // 2026-07-18 10:00:00
		types.Big(1287),
		types.Float(179482.31000000003),
		types.Float(499.87),
	}
	stdKey = stdRow[:2]
)

func reportRows(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkAppendKey(b *testing.B) {
	b.Run("group2", func(b *testing.B) { // the standard key: merchant, window_start
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = AppendKey(buf[:0], stdKey)
		}
		reportRows(b)
	})
	b.Run("row5", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = AppendKey(buf[:0], stdRow)
		}
		reportRows(b)
	})
}

func BenchmarkAppendValue(b *testing.B) {
	b.Run("func", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = AppendValue(buf[:0], stdColumns, stdRow)
		}
		reportRows(b)
	})
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		e := NewEncoder(stdColumns)
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf, _ = e.AppendValue(buf[:0], stdRow)
		}
		reportRows(b)
	})
}

// BenchmarkRecord renders one whole changelog record of the standard query:
// its key and its value.
func BenchmarkRecord(b *testing.B) {
	b.ReportAllocs()
	e := NewEncoder(stdColumns)
	key := make([]byte, 0, 64)
	val := make([]byte, 0, 256)
	for b.Loop() {
		key = e.AppendKey(key[:0], stdKey)
		val, _ = e.AppendValue(val[:0], stdRow)
	}
	reportRows(b)
}

func BenchmarkAppendCell(b *testing.B) {
	for _, bc := range []struct {
		name string
		v    types.Value
	}{
		{"varchar_ascii", types.Str("merchant-00042")},
		{"varchar_unicode", types.Str("Café Zürich 中文 😀")},
		{"bigint", types.Big(1287)},
		{"double_fixed", types.Float(179482.31000000003)},
		{"double_sci", types.Float(1.234e-7)},
		{"timestamp", types.TS(1784368800123456)},
		{"date", types.DateDays(20652)},
		{"decimal", types.Dec(types.I128(123456789), 3)},
		{"hugeint", types.Huge(types.Int128{Hi: 1 << 40, Lo: 12345})},
		{"interval", types.Interv(14, 3, 4*microsPerHour+500_000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 128)
			for b.Loop() {
				buf = AppendCell(buf[:0], bc.v)
			}
		})
	}
}

// The consumer side: a lander splitting a key or deriving the group key.
func BenchmarkSplitKey(b *testing.B) {
	key := []byte(`["m3471", "2026-07-18 10:00:00"]`)
	b.Run("AppendSplitKey", func(b *testing.B) {
		b.ReportAllocs()
		parts := make([][]byte, 0, 8)
		for b.Loop() {
			parts, _ = AppendSplitKey(parts[:0], key)
		}
	})
	b.Run("AppendGroupKey", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		pos := []int{1}
		for b.Loop() {
			buf, _ = AppendGroupKey(buf[:0], key, pos)
		}
	})
}
