package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// ended is how a pipeline run in the background ended.
type ended struct {
	err error
	at  time.Time
}

// runBackground runs a pipeline until it returns.
func runBackground(t *testing.T, o Options) (*Pipeline, <-chan ended) {
	t.Helper()
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan ended, 1)
	go func() {
		err := pl.Run(ctx)
		done <- ended{err, time.Now()}
	}()
	return pl, done
}

// waitEnd waits up to d for a pipeline to return on its own.
func waitEnd(t *testing.T, done <-chan ended, d time.Duration, what string) ended {
	t.Helper()
	select {
	case e := <-done:
		return e
	case <-time.After(d):
		t.Fatalf("%s: the query still runs after %s", what, d)
		return ended{}
	}
}

// checkFinals fails for every final the follower read that differs from
// want: a final committed with some events missing.
func checkFinals(t *testing.T, f *follower, want map[string]agg) int {
	t.Helper()
	f.poll(2 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Errorf("read_committed consumer saw: %s", v)
	}
	bad := 0
	for k, r := range f.finals {
		if strings.Contains(k, flushMerchant) {
			continue
		}
		if a := want[k]; r.orders != a.orders || r.total != a.total {
			if bad++; bad <= 5 {
				t.Errorf("final %s: orders=%d total=%d, want %+v (events of a partition it did not read)", k, r.orders, r.total, a)
			}
		}
	}
	return len(f.finals)
}

// TestSourcePartitionsAdded: partitions added to the source topic
// (kafka-topics --alter --partitions) while a query runs stop it, in both
// modes, before its watermark passes the partitions it has not read: no
// final committed before the stop lacks their events. Repartitioned, the
// restart reads every partition and every final equals the oracle's
// over all the events; read by key, the restart is refused.
func TestSourcePartitionsAdded(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", 4, nil)
			evs := genEvents(35, 8000)
			for i := range evs {
				evs[i].ts += int64(i) * 29_000 // 30 ms apart: 4 minutes, finals before the change and after
			}
			first, second := evs[:4000], evs[4000:]
			produceInput(t, addrs, 4, first, direct)
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			o := Options{Query: tumbleQuery("grow", 200*time.Millisecond), Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)}
			pl, done := runBackground(t, o)
			waitCommits(t, pl, 5)

			added := time.Now()
			if _, err := kadm.NewClient(client(t, addrs)).CreatePartitions(context.Background(), 2, "events"); err != nil {
				t.Fatal(err)
			}
			// The second half round-robin over all 6 partitions, its
			// last minute closing every window of the first half if the
			// two new partitions were ignored.
			time.Sleep(2 * sourceWatchEvery)
			if direct {
				produceKeyed(t, addrs, "events", 6, second, true)
			} else {
				produceEvents(t, addrs, "events", 6, second, true)
			}
			e := waitEnd(t, done, 30*time.Second, "partitions added")
			err, took := e.err, e.at.Sub(added)
			if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "went from 4 to 6 partitions") {
				t.Fatalf("Run = %v, want ErrSourceChanged naming 4 to 6 partitions", err)
			}
			if want := "--partitioned-by-key"; direct && !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			oracle := tumbleOracle(evs)
			f := follow(t, addrs, "out", false)
			n := checkFinals(t, f, oracle)
			t.Logf("stopped %s after the partitions were added; %d finals committed before, none short", took.Round(time.Millisecond), n)

			o.UntilCaughtUp = true
			if direct {
				if err := runErr(t, o); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "had 4 partitions, now 6") {
					t.Errorf("restart read by key: %v, want ErrBindingMismatch naming the counts", err)
				}
				return
			}
			st := runUntilCaughtUp(t, o)
			if want := int64(len(second) + 6); st.EventsIn > int64(len(evs)+6) || st.EventsIn < want {
				t.Errorf("restart consumed %d events, want between %d and %d", st.EventsIn, want, len(evs)+6)
			}
			f.waitFinals(t, oracle, 30*time.Second)
			if st.Late != 0 {
				t.Errorf("%d late events after the restart", st.Late)
			}
		})
	}
}

// TestSourceRecreated: the source topic deleted and created again under
// a running query stops it with an error naming the change, instead of
// fetching the old topic id forever.
func TestSourceRecreated(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	produceEvents(t, addrs, "events", 2, genEvents(36, 1000), false)
	o := Options{Query: tumbleQuery("recreate", 200*time.Millisecond), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)}
	pl, done := runBackground(t, o)
	waitCommits(t, pl, 5)
	adm := kadm.NewClient(client(t, addrs))
	if _, err := adm.DeleteTopic(context.Background(), "events"); err != nil {
		t.Fatal(err)
	}
	mkTopic(t, addrs, "events", 2, nil)
	recreated := time.Now()
	e := waitEnd(t, done, 30*time.Second, "topic recreated")
	err := e.err
	if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "source topic events was deleted") {
		t.Fatalf("Run = %v, want ErrSourceChanged saying the topic was deleted", err)
	}
	t.Logf("stopped %s after the topic was recreated: %v", e.at.Sub(recreated).Round(time.Millisecond), err)
}
