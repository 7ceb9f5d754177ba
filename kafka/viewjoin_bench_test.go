package kafka

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkKafkaViewJoin measures source events/s of q8 over Kafka
// (join: both views, the join stage and q8's aggregate) against the two
// views alone, each a pipeline of its own running at the same time
// (views), from 4-partition person and auction topics until caught up.
// b.N is the number of events, a quarter of them persons (bench/gen's
// ratio of one person per three auctions).
func BenchmarkKafkaViewJoin(b *testing.B) {
	q := q8Query(b)
	views := q.Views()
	for _, name := range []string{"join", "views"} {
		b.Run(name, func(b *testing.B) {
			n := max(b.N, 4000)
			persons, auctions := nexmark(b, "person", n/4, 5), nexmark(b, "auction", n-n/4, 5)
			addrs := cluster(b).ListenAddrs()
			mkTopic(b, addrs, "person", 4, nil)
			mkTopic(b, addrs, "auction", 4, nil)
			produceValues(b, addrs, "person", 4, persons, nil)
			produceValues(b, addrs, "auction", 4, auctions, nil)
			var pls []*Pipeline
			if name == "join" {
				o := q8Options(q, addrs)
				o.UntilCaughtUp = true
				pl, err := New(o)
				if err != nil {
					b.Fatal(err)
				}
				pls = append(pls, pl)
			} else {
				for i, v := range views {
					o := Options{Query: v, Source: endpoint(addrs, []string{"person", "auction"}[i]),
						Sink: endpoint(addrs, v.Name+"-out"), InstanceID: "b", UntilCaughtUp: true}
					pl, err := New(o)
					if err != nil {
						b.Fatal(err)
					}
					pls = append(pls, pl)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make([]error, len(pls))
			for i, pl := range pls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = pl.Run(context.Background())
				}()
			}
			wg.Wait()
			b.StopTimer()
			var events, entries int64
			for i, pl := range pls {
				if errs[i] != nil {
					b.Fatal(errs[i])
				}
				st := pl.Stats()
				if !st.CaughtUp {
					b.Fatalf("not caught up: %+v", st)
				}
				events += st.EventsIn
				entries += st.StateEntriesOut
			}
			if events != int64(len(persons)+len(auctions)) {
				b.Fatalf("%d events in, want %d", events, len(persons)+len(auctions))
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(entries)/float64(events), "state-entries/event")
		})
	}
}
