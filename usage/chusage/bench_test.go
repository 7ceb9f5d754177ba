package chusage

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage/usagetest"
)

func BenchmarkWrite(b *testing.B) {
	l, _ := newLog(b)
	usagetest.BenchmarkWrite(b, l)
}

// BenchmarkAggregate10M loads 10M events once into the persistent table
// ubik_usage_bench.bench_usage_10m (server-side, filling the same columns
// Write fills; the MATERIALIZED version columns are computed by the server
// as usual) plus 100,000 duplicate copies with different quantities in a
// separate part, so the collapse has real work to do. Run it explicitly:
// go test -run '^$' -bench Aggregate10M -benchtime 3x.
func BenchmarkAggregate10M(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, Options{URL: chURL(), Database: "ubik_usage_bench", Table: "bench_usage_10m"})
	if err != nil {
		b.Fatalf("ClickHouse at %s is required: %v", chURL(), err)
	}
	var n int64
	err = l.selectRows(ctx, `SELECT uniqExact(key) AS n FROM `+l.table, func(d *json.Decoder) error {
		var r struct{ N json.Number }
		err := d.Decode(&r)
		n, _ = r.N.Int64()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if n != usagetest.BenchLoadRows {
		start := time.Now()
		base := strconv.FormatInt(usagetest.BenchBase.UnixMilli(), 10)
		gen := func(limit, qtyOffset string) string {
			return `INSERT INTO ` + l.table + ` (key, event_ms, meter, quantity, dim_names, dim_kv)
				SELECT concat('bench-', toString(number)), ` + base + ` + toInt64(number) * 60, 'api_calls',
				       toDecimal128(number % 100 + ` + qtyOffset + `, 9), ['region', 'tier'],
				       [concat('region\0s', arrayElement(['eu', 'us', 'ap'], number % 3 + 1)), concat('tier\0n', toString(number % 4))]
				FROM system.numbers LIMIT ` + limit
		}
		for _, q := range []string{"TRUNCATE TABLE " + l.table, gen(strconv.Itoa(usagetest.BenchLoadRows), "0"), gen("100000", "1000")} {
			if _, err := l.c.Exec(ctx, q, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("loaded %d events (+100000 duplicate copies) in %s", usagetest.BenchLoadRows, time.Since(start))
	}
	usagetest.BenchmarkAggregate(b, l)
}
