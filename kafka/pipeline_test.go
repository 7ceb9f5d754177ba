package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestTumbleEndToEnd runs the repartitioning pipeline over a 4-partition
// topic and checks the finals against the oracle, with every changelog
// invariant checked on each record a read_committed consumer sees.
func TestTumbleEndToEnd(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 4, nil)
	evs := genEvents(1, 20000)
	produceEvents(t, addrs, "events", 4, evs, true)
	q := tumbleQuery("totals", 200*time.Millisecond)
	start := time.Now()
	runPipeline(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a",
		Logger: testLogger(t)})
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 60*time.Second)
	t.Logf("%d events to finals in %s", len(evs), time.Since(start))
}

func TestUncompactedSinkRefused(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 1, nil)
	mkTopic(t, addrs, "out", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")})
	pl, err := New(Options{Query: tumbleQuery("q", 0), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = pl.Run(ctx)
	if !errors.Is(err, ErrNotCompacted) || !strings.Contains(err.Error(), "cleanup.policy=delete") {
		t.Fatalf("Run over a delete-policy sink: %v, want ErrNotCompacted naming the policy", err)
	}
}
