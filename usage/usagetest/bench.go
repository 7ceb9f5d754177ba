package usagetest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage"
)

// BenchmarkWrite measures Write in batches of 1000 new events (unique keys,
// three dimensions each) and reports events/s.
func BenchmarkWrite(b *testing.B, l usage.Log) {
	const batch = 1000
	ctx := context.Background()
	evs := make([]usage.Event, batch)
	b.ReportAllocs()
	n := 0
	start := time.Now()
	for b.Loop() {
		for i := range evs {
			evs[i] = usage.Event{
				Key: fmt.Sprintf("bw-%d-%d", start.UnixNano(), n), Time: Base.Add(time.Duration(n) * time.Millisecond),
				Meter: "api_calls", Quantity: usage.Decimal(strconv.Itoa(n % 100)),
				Dims: map[string]usage.Value{"region": usage.String([]string{"eu", "us", "ap"}[n%3]), "tier": usage.Number(float64(n % 4)), "beta": usage.Bool(n%2 == 0)},
			}
			n++
		}
		r, err := l.Write(ctx, evs)
		if err != nil || r.Inserted != batch {
			b.Fatalf("Write: %+v %v", r, err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}

// BenchLoadRows is the size of the aggregate benchmark's data set.
const BenchLoadRows = 10_000_000

// BenchBase is the first event time of the aggregate data set; event i is
// at BenchBase + 60*i ms (about 7 days for 10M events), meter "api_calls",
// quantity i mod 100, region in {eu, us, ap}, tier i mod 4.
var BenchBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkAggregate times Aggregate over a log already loaded with the
// data set above: the whole set, one day with a filter, and the whole set
// grouped by region in 1-hour windows.
func BenchmarkAggregate(b *testing.B, l usage.Log) {
	ctx := context.Background()
	end := BenchBase.Add(time.Duration(BenchLoadRows) * 60 * time.Millisecond)
	cases := []struct {
		name string
		q    usage.AggregateQuery
		want int64
	}{
		{"all_10M", usage.AggregateQuery{Meter: "api_calls", From: BenchBase, To: end}, BenchLoadRows},
		{"one_day_filtered", usage.AggregateQuery{Meter: "api_calls", From: BenchBase, To: BenchBase.Add(24 * time.Hour), Filters: []usage.Filter{usage.Eq("region", usage.String("eu"))}}, 480_000},
		{"all_by_region_1h", usage.AggregateQuery{Meter: "api_calls", From: BenchBase, To: end, GroupBy: []string{"region"}, Window: time.Hour}, BenchLoadRows},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t, err := l.Aggregate(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if t.Count != c.want {
					b.Fatalf("count %d, want %d", t.Count, c.want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/aggregate")
		})
	}
}
