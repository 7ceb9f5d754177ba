package pglander

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// BenchmarkLand: go test -bench . -benchtime=1000000x ./land/pglander
// (1M records over 100k keys), beside BenchmarkCopyCeiling.
func BenchmarkLand(b *testing.B) {
	p := testPool(b)
	l, err := New(context.Background(), Options{Pool: p, Mode: land.Latest, Table: landtest.NS("bench")})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Exec(context.Background(), "DROP TABLE IF EXISTS "+l.Table())
	landtest.BenchLand(b, l, 100_000, 5000)
}

// BenchmarkCopyCeiling is the store's own ceiling: a plain COPY of the
// same rows into a table of the same shape, with no guard and no conflict.
func BenchmarkCopyCeiling(b *testing.B) {
	ctx := context.Background()
	p := testPool(b)
	l, err := New(ctx, Options{Pool: p, Mode: land.History, Table: landtest.NS("copy")})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Exec(ctx, "DROP TABLE IF EXISTS "+l.Table())
	recs := landtest.BenchRecords(b.N, 100_000)
	rows := make([][]any, len(recs))
	for i, r := range recs {
		// History keys on the window too; make every row distinct.
		rows[i] = []any{"bench", string(r.Key), int64(i), int64(r.Meta.Revision), false, r.Meta.WindowEnd, string(r.Key), string(r.Value)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	n, err := p.CopyFrom(ctx, pgx.Identifier{l.o.Table}, []string{"query", "group_key", "window_start", "revision", "final", "window_end", "key", "value"}, pgx.CopyFromRows(rows))
	if err != nil || n != int64(len(rows)) {
		b.Fatalf("COPY: %d rows, %v", n, err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
