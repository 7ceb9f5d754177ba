package ubik_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

const standardQuery = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '1' SECOND`

// standardEvents builds n events shaped like shared/docs/performance.md's
// workload: 10k merchants with skew, 1 ms per event, up to 4 s disorder.
func standardEvents(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 9999)
	out := make([][]byte, n)
	base := int64(36000000) // 10:00:00.000 in ms of the day
	for i := range out {
		ms := base + int64(i) - r.Int64N(4000)
		out[i] = fmt.Appendf(nil, `{"event_id":"e%d","merchant":"m%d","customer":"c%d","amount":%d.%02d,"event_time":"2026-07-18 %02d:%02d:%02d.%03d"}`,
			i, z.Uint64(), r.IntN(100000), r.IntN(500), r.IntN(100), ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
	}
	return out
}

// BenchmarkStandardQuery runs the standard query over 1M-event passes and
// reports events/s; allocs/op are per event.
func BenchmarkStandardQuery(b *testing.B) {
	evs := standardEvents(200_000)
	eng, _ := ubik.Open(ubik.DefaultOptions())
	b.ReportAllocs()
	b.ResetTimer()
	var q *ubik.Query
	records := 0
	for i := 0; i < b.N; i++ {
		if i%len(evs) == 0 {
			if q != nil {
				q.Close()
			}
			var err error
			q, err = eng.Start(standardQuery, ubik.QueryOptions{OnRecord: func(changelog.Record) error { records++; return nil }})
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := q.Push(evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
	}
	q.Close()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
