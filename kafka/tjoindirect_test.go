package kafka

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunKafkaTemporalJoinPartitionedByKey: a temporal join whose stream
// is read partitioned by its GROUP BY key (Endpoint.PartitionedByKey)
// joins where the events are, the table broadcast to every partition: no
// repartition stage reads the source, and the finals equal the
// in-process run's, byte for byte.
func TestRunKafkaTemporalJoinPartitionedByKey(t *testing.T) {
	t.Parallel()
	q := kjoinQuery(t)
	events, versions := kjoinData(11, 1500)
	want := kjoinInProcess(t, q, events, versions)
	for _, c := range []struct{ src, tbl int }{{1, 1}, {3, 2}} {
		t.Run("", func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", c.src, nil)
			mkTopic(t, addrs, "prices", c.tbl, nil)
			produceValues(t, addrs, "prices", c.tbl, versions, nil)
			produceByCustomer(t, addrs, "usage", c.src, events)
			o := kjoinOptions(q, addrs)
			o.Source.PartitionedByKey = true
			stages, err := planTopology(o, q.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range stages {
				if st.name == q.Name+"-in" {
					t.Fatalf("a repartition stage of the source: %v", specLines(stages))
				}
			}
			st := runCaughtUp(t, o)
			if st.Late != 0 || st.TableLate != 0 || st.TableRows != int64(len(versions)) || st.EventsIn != int64(len(events)) {
				t.Errorf("stats %+v", st)
			}
			if st.JoinJoined+st.JoinUnmatched != int64(len(events)) || st.JoinUnmatched == 0 {
				t.Errorf("join gauges: joined %d, unmatched %d, want %d in all", st.JoinJoined, st.JoinUnmatched, len(events))
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)
			groups := groupsOf(kadm.NewClient(client(t, addrs)), q.Name)
			if slices.Contains(groups, q.Name+"-in") || !slices.Contains(groups, q.Name+"-tbl") {
				t.Errorf("consumer groups %v: want the table stage's and no repartition stage's", groups)
			}
		})
	}
}

// produceByCustomer writes the events to the partition of their customer
// (FNV hash), so the topic is partitioned by the GROUP BY key.
func produceByCustomer(t *testing.T, addrs []string, topic string, parts int, events [][]byte) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<20))
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		var ev struct{ Customer string }
		if err := json.Unmarshal(e, &ev); err != nil {
			t.Fatal(err)
		}
		h := fnv.New32a()
		h.Write([]byte(ev.Customer))
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(h.Sum32() % uint32(parts)), Value: e}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
