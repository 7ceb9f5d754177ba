package ubik_test

import (
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// BenchmarkViewGraph compares the per-second view alone with the graph of
// the view and the ten-second query over it (viewOracleSQL), over the
// same events: the graph's cost over the view is the typed rows, the
// markers and the reader's operator.
func BenchmarkViewGraph(b *testing.B) {
	evs := genOracleEvents(3, 20000)
	lines := make([][]byte, len(evs))
	for i := range evs {
		lines[i] = evs[i].json()
	}
	for _, name := range []string{"secs", "tens"} {
		b.Run(name, func(b *testing.B) {
			eng, _ := ubik.Open(ubik.DefaultOptions())
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				n := 0
				q, err := eng.Start(viewOracleSQL, ubik.QueryOptions{Name: name, OnRecord: func(changelog.Record) error { n++; return nil }})
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range lines {
					if err := q.Push(l); err != nil {
						b.Fatal(err)
					}
				}
				if err := q.Close(); err != nil || n == 0 {
					b.Fatal(err, n)
				}
			}
			b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
