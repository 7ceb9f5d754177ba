package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// writeBindingVersion records o's binding under layout version v (0: a
// binding without the field) in a new state topic, as a binary of that
// layout would have before o runs.
func writeBindingVersion(t *testing.T, o Options, v int) *Pipeline {
	t.Helper()
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pl.nSource = 2
	b := pl.binding()
	b.Version = v
	val, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if v == 0 {
		val = []byte(strings.Replace(string(val), `"version":0,`, "", 1))
	}
	addrs := o.Source.Config.Brokers
	mkTopic(t, addrs, pl.stateTopic, 2, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: pl.stateTopic, Partition: 0, Key: []byte(bindingKey), Value: val}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestBindingLayout: a state topic bound under a newer layout of the
// internal topics is refused before anything is read or written, saying
// what to do; a binding without a layout (the first one's) runs.
func TestBindingLayout(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	evs := genEvents(73, 1000)
	produceEvents(t, addrs, "events", 2, evs, false)

	newer := Options{Query: tumbleQuery("newer", 0), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out-newer"),
		InstanceID: "a", Logger: testLogger(t), UntilCaughtUp: true}
	pl := writeBindingVersion(t, newer, layoutVersion+1)
	err := runErr(t, newer)
	if !errors.Is(err, ErrNewerState) {
		t.Fatalf("Run: %v, want ErrNewerState", err)
	}
	errorSays(t, err, "newer-state", "layout 2", "reads layout 1", "Run the newer ubik", "--reset-state")
	// Nothing written: the binding is the state topic's only record, and
	// no group committed offsets.
	adm := kadm.NewClient(client(t, addrs))
	ends, aerr := adm.ListEndOffsets(context.Background(), pl.stateTopic)
	if aerr != nil {
		t.Fatal(aerr)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if want := int64(map[int32]int{0: 1}[o.Partition]); o.Offset != want {
			t.Errorf("state topic partition %d ends at %d after the refusal, want %d", o.Partition, o.Offset, want)
		}
	})
	for _, g := range []string{"newer", "newer-in"} {
		offs, ferr := adm.FetchOffsets(context.Background(), g)
		if ferr == nil && len(offs) > 0 {
			t.Errorf("group %s committed offsets after the refusal: %v", g, offs)
		}
	}

	first := Options{Query: tumbleQuery("first", 0), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out-first"),
		InstanceID: "a", Logger: testLogger(t)}
	writeBindingVersion(t, first, 0)
	runUntilCaughtUp(t, first)
	follow(t, addrs, "out-first", false).waitFinals(t, tumbleOracle(evs), 30e9)
}

// TestLayoutErr: an older layout is ErrOldState, naming how to move on;
// the same layout, or a binding without one under layout 1, is no error.
func TestLayoutErr(t *testing.T) {
	err := layoutErr("q", "q-state", 1, 2)
	if !errors.Is(err, ErrOldState) {
		t.Fatalf("layoutErr(1, 2) = %v, want ErrOldState", err)
	}
	errorSays(t, err, "q-state", "layout 1", "writes layout 2", "--until-caught-up", "--reset-state", "--from")
	for _, c := range [][2]int{{0, 1}, {1, 1}, {2, 2}} {
		if err := layoutErr("q", "q-state", c[0], c[1]); err != nil {
			t.Errorf("layoutErr(%d, %d) = %v, want nil", c[0], c[1], err)
		}
	}
}

// TestViewJoinOldLayout: a join of two views whose join stage's state
// topic an earlier layout bound (its sides each a view of the join, not
// the views the plan computes elsewhere) is refused with ErrOldState
// before the join stage reads or writes anything, saying what to do.
func TestViewJoinOldLayout(t *testing.T) {
	t.Parallel()
	o := q8OnePartition(t, 200, 5)
	addrs := o.Source.Config.Brokers
	pl := writeBindingVersion(t, o, layoutVersion)
	err := runErr(t, o)
	if !errors.Is(err, ErrOldState) {
		t.Fatalf("Run: %v, want ErrOldState", err)
	}
	errorSays(t, err, "q8-state", "layout 1", "writes layout 2", "--until-caught-up", "--reset-state")
	ends, aerr := kadm.NewClient(client(t, addrs)).ListEndOffsets(context.Background(), pl.stateTopic, "q8-out")
	if aerr != nil {
		t.Fatal(aerr)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if want := int64(map[int32]int{0: 1}[e.Partition]); e.Topic == pl.stateTopic && e.Offset != want || e.Topic == "q8-out" && e.Offset != 0 {
			t.Errorf("%s partition %d ends at %d after the refusal", e.Topic, e.Partition, e.Offset)
		}
	})
}

// errorSays fails t for each of words err's text does not hold.
func errorSays(t *testing.T, err error, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%s", w, err)
		}
	}
}

// q8OnePartition is q8 over one-partition person and auction topics on
// a cluster of its own, persons person rows (nexmark's seed) produced,
// run until caught up.
func q8OnePartition(t *testing.T, persons int, seed uint64) Options {
	t.Helper()
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 1, nil)
	mkTopic(t, addrs, "auction", 1, nil)
	produceValues(t, addrs, "person", 1, nexmark(t, "person", persons, seed), nil)
	o := q8Options(q8Query(t), addrs)
	o.UntilCaughtUp, o.Logger = true, testLogger(t)
	return o
}

// TestViewJoinTwoSourcesOldLayout: a join of two views whose join stage
// decodes both sources ran, under layout 2, the second source's view as a
// side of its own (topics Q-right-...); its state is refused with what to
// do, before anything is written.
func TestViewJoinTwoSourcesOldLayout(t *testing.T) {
	t.Parallel()
	s := viewJoinShapes["_BYKEY"]
	q, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	addrs := cluster(t).ListenAddrs()
	mkTopic(t, addrs, "person", 1, nil)
	mkTopic(t, addrs, "auction", 1, nil)
	produceValues(t, addrs, "person", 1, nexmark(t, "person", 200, 5), nil)
	o := s.options(q, addrs)
	o.UntilCaughtUp, o.Logger = true, testLogger(t)
	writeBindingVersion(t, o, viewJoinLayout)
	old := []string{"q8k-right-repartition", "q8k-right-state", "q8k-right-dedup-state"} // layout 2's side
	for _, topic := range old {
		mkTopic(t, addrs, topic, 1, nil)
	}
	err = runErr(t, o)
	if !errors.Is(err, ErrOldState) {
		t.Fatalf("Run: %v, want ErrOldState", err)
	}
	errorSays(t, err, "q8k-state", "layout 2", "writes layout 3", "--until-caught-up", "--reset-state")
	// A reset clears layout 2's side too, then runs.
	o.ResetState = true
	pl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pl.Run(ctx); err != nil {
		t.Fatalf("reset run: %v", err)
	}
	tds, err := kadm.NewClient(client(t, addrs)).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range old {
		if tds.Has(topic) {
			t.Errorf("topic %s of layout 2's side is left after the reset", topic)
		}
	}
}
