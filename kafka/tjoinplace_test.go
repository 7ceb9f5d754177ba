package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTemporalJoinInPlaceOldState: a temporal join grouped by a table
// column joins in the source's partitions (or, over a dedup key, in the
// dedup key's). An earlier version joined in the partitions of the
// repartition topic, where its repartition stage spread the events by a
// hash of the record, and its binding records no JoinIn: such a state
// topic is refused with ErrOldState naming where each joined and
// --reset-state; the reset then runs the query to the in-process finals,
// and a run after it continues its own state.
func TestTemporalJoinInPlaceOldState(t *testing.T) {
	t.Parallel()
	events, versions := derivedTJoinData(9, 600)
	events = uniqueTimes(t, events) // the dedup by ts drops nothing: no copy's order to depend on
	for _, c := range []struct{ name, with, where string }{
		{"source", "", "the partitions of the source topic usage"},
		{"dedup", " WITH (dedup_key = 'ts', dedup_within = '1 hour')", "routes each event by its dedup key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sql := strings.Replace(derivedTJoinSQL, "INTERVAL '2' SECOND);", "INTERVAL '2' SECOND)"+c.with+";", 1)
			q := lastQuery(t, sql)
			events, dups := events, 0
			if c.with != "" {
				events, dups = append(events, events...), len(events) // a copy of each, after them all
			}
			want := kjoinInProcess(t, q, events, versions)
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", 3, nil)
			mkTopic(t, addrs, "prices", 2, nil)
			produceValues(t, addrs, "prices", 2, versions, nil)
			produceValues(t, addrs, "usage", 3, events, nil)
			o := kjoinOptions(q, addrs)
			o.UntilCaughtUp = true
			o.Logger = testLogger(t)
			writeOldJoinBinding(t, o, 3)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			pl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			err = pl.Run(ctx)
			if !errors.Is(err, ErrOldState) || !strings.Contains(err.Error(), "--reset-state") ||
				!strings.Contains(err.Error(), "by a hash of the whole record") || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("Run over an earlier version's join state: %v, want ErrOldState naming where each joined and --reset-state", err)
			}
			if st := pl.Stats(); st.RecordsOut != 0 || st.EventsIn != 0 {
				t.Errorf("the refused run read %d events and produced %d records, want none", st.EventsIn, st.RecordsOut)
			}

			o.ResetState = true // the way out it names
			if pl, err = New(o); err != nil {
				t.Fatal(err)
			}
			if err := pl.Run(ctx); err != nil {
				t.Fatalf("the run with a reset: %v", err)
			}
			if st := pl.Stats(); !st.CaughtUp || st.Late != 0 || st.TableLate != 0 || st.Duplicates != int64(dups) || st.JoinJoined+st.JoinUnmatched != int64(len(events)-dups) {
				t.Errorf("the run with a reset: stats %+v", st)
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)

			o.ResetState = false // its own state: continued
			if pl, err = New(o); err != nil {
				t.Fatal(err)
			}
			if err := pl.Run(ctx); err != nil || !pl.Stats().CaughtUp {
				t.Fatalf("a run over the reset run's state: %v (caught up %v)", err, pl.Stats().CaughtUp)
			}
		})
	}
}

// writeOldJoinBinding creates o's state topic and writes the binding an
// earlier version recorded for it (no JoinIn), over a source of n
// partitions.
func writeOldJoinBinding(t *testing.T, o Options, n int) {
	t.Helper()
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pl.nSource = n
	b := pl.binding()
	if b.JoinIn == "" {
		t.Fatalf("query %s joins in no partitions of its own (joinIn)", o.Query.Name)
	}
	b.JoinIn = ""
	val, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	addrs := o.Source.Config.Brokers
	mkTopic(t, addrs, pl.stateTopic, n, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: pl.stateTopic, Partition: 0, Key: []byte(bindingKey), Value: val}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// uniqueTimes drops the events whose ts, at the millisecond of the
// source's TIMESTAMP(3), may be an earlier one's.
func uniqueTimes(t *testing.T, events [][]byte) [][]byte {
	seen, out := map[int64]bool{}, events[:0:0]
	for _, e := range events {
		var ev struct{ TS string }
		if err := json.Unmarshal(e, &ev); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse("2006-01-02 15:04:05.999999", ev.TS)
		if err != nil {
			t.Fatal(err)
		}
		ms := ts.UnixMilli()
		if !seen[ms-1] && !seen[ms] && !seen[ms+1] {
			seen[ms] = true
			out = append(out, e)
		}
	}
	return out
}

// TestTemporalJoinInPlaceFromLatest: a join where its stream is reads the
// source from its end (from = latest) and the table's broadcast from its
// start in one group: the events there before the run are not read, the
// versions are, whenever the table stage writes them. A restart continues
// from the committed offsets; the finals are the in-process run's over
// the events produced after the start.
func TestTemporalJoinInPlaceFromLatest(t *testing.T) {
	t.Parallel()
	q := lastQuery(t, derivedTJoinSQL)
	events, versions := derivedTJoinData(3, 900)
	old, fresh := events[:300], events[300:]
	want := kjoinInProcess(t, q, fresh, versions)
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "usage", 3, nil)
	mkTopic(t, addrs, "prices", 2, nil)
	produceValues(t, addrs, "prices", 2, versions, nil)
	produceValues(t, addrs, "usage", 3, old, nil)
	o := kjoinOptions(q, addrs)
	o.Source.From = FromLatest
	o.Logger = testLogger(t)
	var mu sync.Mutex
	probed := map[int32]bool{} // the source partitions whose probe the run read
	o.OnBadEvent = func(e *BadEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Topic == "usage" {
			probed[e.Partition] = true
		}
	}
	pl, stop := runPipeline(t, o)
	waitFromLatest(t, addrs, "usage", 3, probed, &mu)
	produceValues(t, addrs, "usage", 3, fresh, nil)
	// The restart continues from the committed offsets: the run stops once
	// it committed every event it was given.
	waitGroupAtEnd(t, addrs, pl.inGroup(), "usage")
	stop()
	if st := runToEnd(t, o, 2*time.Minute); !st.CaughtUp || st.Late != 0 {
		t.Errorf("the restart: stats %+v", st)
	}
	compareFinals(t, readFinals(t, addrs, "charges"), want)
}

// waitFromLatest waits until a run that reads topic from its end reads
// every partition from a position at or below any record produced now:
// kgo lists the end offsets after the assignment, so a record produced
// before that is never read. It produces a malformed probe to each
// partition not yet probed (the run counts and reports it, and applies
// nothing) until the run reports one there (probed, under mu).
func waitFromLatest(t *testing.T, addrs []string, topic string, parts int, probed map[int32]bool, mu *sync.Mutex) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	done := func(p int32) bool { mu.Lock(); defer mu.Unlock(); return probed[p] }
	deadline := time.Now().Add(time.Minute)
	for p := range int32(parts) {
		for !done(p) {
			if time.Now().After(deadline) {
				t.Fatalf("the run read no probe of %s partition %d in a minute", topic, p)
			}
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte("a probe, not JSON")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			for wait := time.Now().Add(time.Second); !done(p) && time.Now().Before(wait); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// waitGroupAtEnd waits until group's committed offsets on every partition
// of topic reach the partition's end.
func waitGroupAtEnd(t *testing.T, addrs []string, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(client(t, addrs))
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsetsForTopics(ctx, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		behind := ""
		ends.Each(func(e kadm.ListedOffset) {
			if c, ok := committed.Lookup(topic, e.Partition); !ok || c.At < e.Offset {
				behind += fmt.Sprintf(" partition %d: committed %d of %d;", e.Partition, c.At, e.Offset)
			}
		})
		if behind == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not commit %s to its end in a minute:%s", group, topic, behind)
		}
	}
}
