package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
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

// BenchmarkKafkaTemporalJoin measures events/s of the temporal join over
// Kafka (join) against the same aggregation without the join (plain),
// both from a 4-partition topic until caught up: the table (2
// partitions, a version every 0.7 s of event time) is broadcast to the 4
// repartition partitions and the join's state goes to the state topic
// incrementally. b.N is the number of events.
func BenchmarkKafkaTemporalJoin(b *testing.B) {
	q := kjoinQuery(b)
	prog, err := plan.Compile(strings.Split(kjoinSQL, "CREATE TABLE")[0]+`
CREATE VIEW plain AS SELECT customer, TUMBLE_START(ts, INTERVAL '10' SECOND) AS w, sum(qty) AS qty, count(*) AS events
FROM usage GROUP BY customer, TUMBLE(ts, INTERVAL '10' SECOND);`, plan.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"join", "plain"} {
		b.Run(name, func(b *testing.B) {
			events, versions := kjoinData(5, max(b.N, 1000))
			addrs := cluster(b).ListenAddrs()
			mkTopic(b, addrs, "usage", 4, nil)
			mkTopic(b, addrs, "prices", 2, nil)
			produceValues(b, addrs, "prices", 2, versions, nil)
			produceValues(b, addrs, "usage", 4, events, nil)
			o := kjoinOptions(q, addrs)
			if name == "plain" {
				o.Query, o.Table = prog.Queries[0], Endpoint{}
			}
			o.UntilCaughtUp = true
			pl, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := pl.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			st := pl.Stats()
			b.ReportMetric(float64(len(events))/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(st.StateEntriesOut)/float64(len(events)), "state-entries/event")
		})
	}
}

// BenchmarkKafkaIntervalJoin runs the interval join test's two queries
// (grouped by the join key: one stage; by the site: the joined rows
// repartitioned) from 3 partitions of each stream until caught up, b.N
// impressions (and 10/13 as many clicks), against the broker of
// scripts/services.sh. events/s counts the rows of both streams.
func BenchmarkKafkaIntervalJoin(b *testing.B) {
	for _, by := range []string{"key", "site"} {
		b.Run(by, func(b *testing.B) {
			suffix := ""
			if by == "site" {
				suffix = "_site"
			}
			imps, clks := ijoinData(5, max(b.N, 1000))
			e := newIJoinEnv(b, 3, 3, suffix)
			produceValues(b, e.addrs, e.imp, 3, imps, nil)
			produceValues(b, e.addrs, e.clk, 3, clks, nil)
			o := e.options(ijoinQuery(b, e.name))
			o.UntilCaughtUp = true
			pl, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := pl.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			st := pl.Stats()
			n := float64(len(imps) + len(clks))
			b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(st.StateEntriesOut)/n, "state-entries/event")
		})
	}
}
