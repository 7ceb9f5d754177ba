package pgusage

import (
	"context"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage/usagetest"
)

func BenchmarkWrite(b *testing.B) {
	l, _ := newLog(b)
	usagetest.BenchmarkWrite(b, l)
}

// BenchmarkAggregate10M loads 10M events once into the persistent table
// bench_usage_10m (server-side, through the same columns Write fills; a
// few minutes the first time) and times Aggregate over it. Run it
// explicitly: go test -run '^$' -bench Aggregate10M -benchtime 3x.
func BenchmarkAggregate10M(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, Options{DSN: dsn(), Table: "bench_usage_10m"})
	if err != nil {
		b.Fatalf("PostgreSQL at %s is required: %v", redact(dsn()), err)
	}
	defer l.Close()
	var n int64
	if err := l.pool.QueryRow(ctx, `SELECT count(*) FROM `+l.table).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n != usagetest.BenchLoadRows {
		start := time.Now()
		_, err := l.pool.Exec(ctx, `TRUNCATE `+l.table)
		if err == nil {
			_, err = l.pool.Exec(ctx, `INSERT INTO `+l.table+` (key, event_ms, meter, quantity, dims)
				SELECT 'bench-' || i, $1::bigint + i * 60, 'api_calls', (i % 100)::numeric,
				       jsonb_build_object('region', (ARRAY['eu','us','ap'])[i % 3 + 1], 'tier', i % 4)
				FROM generate_series(0, $2::bigint - 1) AS i`, usagetest.BenchBase.UnixMilli(), usagetest.BenchLoadRows)
		}
		if err == nil {
			_, err = l.pool.Exec(ctx, `VACUUM ANALYZE `+l.table)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("loaded %d events in %s", usagetest.BenchLoadRows, time.Since(start))
	}
	usagetest.BenchmarkAggregate(b, l)
}
