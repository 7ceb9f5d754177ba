package kafka

import (
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
)

// BenchmarkKafkaPipeline measures events/s through the broker: the
// standard shape (per-merchant one-minute totals, EMIT EARLY every second)
// from a 4-partition topic through the repartition stage, the aggregating
// stage, state checkpoints and the sink, all in transactions, on an
// in-process kfake broker. b.N is the number of events; the clock runs from
// the pipeline's start until the aggregating stage has applied them all.
func BenchmarkKafkaPipeline(b *testing.B) {
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			c := cluster(b)
			addrs := c.ListenAddrs()
			mkTopic(b, addrs, "events", 4, nil)
			evs := genEvents(9, max(b.N, 1000))
			produceEvents(b, addrs, "events", 4, evs, false)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct // the events are round-robin: for speed only, not correct grouping
			b.ReportAllocs()
			b.ResetTimer()
			pl, stop := runPipeline(b, Options{Query: tumbleQuery("bench", time.Second), Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a"})
			for pl.Stats().EventsApplied < int64(len(evs)) {
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			stop()
			st := pl.Stats()
			b.ReportMetric(float64(len(evs))/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(st.Commits), "commits")
		})
	}
}

// BenchmarkFilePath is the same query and events through one in-process
// operator (what ubik run does for a file, minus the file I/O).
func BenchmarkFilePath(b *testing.B) {
	evs := genEvents(9, max(b.N, 1000))
	lines := make([][]byte, len(evs))
	for i, e := range evs {
		lines[i] = e.json()
	}
	q := tumbleQuery("bench", time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	d, err := drive.New(q, drive.Config{Emit: func(*changelog.Record) error { return nil }, Decoder: drive.NewDecoder(q.Source)})
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range lines {
		if err := d.Push(l); err != nil {
			b.Fatal(err)
		}
	}
	d.Close()
	b.ReportMetric(float64(len(lines))/b.Elapsed().Seconds(), "events/s")
}
