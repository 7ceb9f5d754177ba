package kafkasrc

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func cluster(t *testing.T, topic string, partitions int32) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	return c.ListenAddrs()
}

func produce(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runUntil lands from a new Source in group until the lander holds want
// records' worth of state (checked by done), then stops Run.
func runUntil(t *testing.T, brokers []string, group string, l land.Lander, opts Options, done func() bool) error {
	t.Helper()
	opts.Brokers, opts.Topics, opts.Group = brokers, []string{"cl"}, group
	src, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- land.Run(ctx, src, l, land.RunOptions{MaxInFlight: 2}) }()
	for {
		select {
		case err := <-errc:
			return err
		case <-time.After(20 * time.Millisecond):
			if done() {
				cancel()
				<-errc
				return nil
			}
		}
	}
}

// TestLandFromKafka: records produced with duplicates and in random order
// to a 3-partition topic land to the oracle's state; a second lander in the
// same group resumes from the committed offsets and lands nothing new.
func TestLandFromKafka(t *testing.T) {
	brokers := cluster(t, "cl", 3)
	seed := landtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	gen := landtest.Gen{Mode: land.Latest, Groups: 3, Windows: 3, Revisions: 4}
	var all []changelog.Record
	for trial := range 100 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	delivered := landtest.Deliver(r, all, 3)
	var krs []*kgo.Record
	for _, rec := range delivered {
		krs = append(krs, ToKafka("cl", rec))
	}
	produce(t, brokers, krs...)

	oracle := landtest.NewMemory(land.Latest, "")
	oracle.Land(context.Background(), all)
	mem := landtest.NewMemory(land.Latest, "")
	counting := &countingLander{Lander: mem}
	err := runUntil(t, brokers, "g1", counting, Options{MaxBatch: 37}, func() bool { return counting.n.Load() == int64(len(delivered)) })
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	landtest.Check(t, landtest.Harness{ExactValue: true}, mem, oracle)

	// Everything was committed: the group's lag is zero.
	adm := kadm.NewClient(mustClient(t, brokers))
	lags, err := adm.Lag(context.Background(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	if l := lags["g1"].Lag.Total(); l != 0 {
		t.Fatalf("group lag %d after landing everything", l)
	}
}

// TestCrashReplay: a lander that dies (its Run cancelled) between the store
// write and the commit replays from the committed offsets; the result
// equals the oracle.
func TestCrashReplay(t *testing.T) {
	brokers := cluster(t, "cl", 2)
	seed := landtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	gen := landtest.Gen{Mode: land.History, Groups: 2, Windows: 2, Revisions: 5}
	var all []changelog.Record
	for trial := range 80 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	var krs []*kgo.Record
	for _, rec := range landtest.Deliver(r, all, 2) {
		krs = append(krs, ToKafka("cl", rec))
	}
	produce(t, brokers, krs...)
	mem := landtest.NewMemory(land.History, "")
	// The first lander stores its third batch, then "crashes" before the
	// commit: Land returns after writing, and Run is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	crashing := &crashLander{Lander: mem, after: 3, crash: cancel}
	src, err := New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "g", MaxBatch: 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := land.Run(ctx, src, crashing, land.RunOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("crashing run: %v", err)
	}
	src.Close()
	var c land.Counters
	src2, err := New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "g", MaxBatch: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	go func() {
		// The run's backlog reads 0 as soon as one partition is drained,
		// while another may not have been fetched yet: wait until the
		// group's commits reach the end of every partition.
		for {
			if up, err := src2.CaughtUp(ctx2); err != nil || up {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel2()
	}()
	err = land.Run(ctx2, src2, mem, land.RunOptions{Counters: &c})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("replay: %v", err)
	}
	if c.Duplicate.Load() == 0 {
		t.Fatalf("the replay re-landed nothing (%d landed): the crashed batch was committed", c.Landed.Load())
	}
	oracle := landtest.NewMemory(land.History, "")
	oracle.Land(context.Background(), all)
	landtest.Check(t, landtest.Harness{ExactValue: true}, mem, oracle)
}

// TestBadRecord: a record without headers stops Run with its partition and
// offset; with SkipBadRecords it is counted and the rest lands.
func TestBadRecord(t *testing.T) {
	brokers := cluster(t, "cl", 1)
	ok := landtest.Record(land.Continuous, "q", "a", time.Time{}, 1, false)
	produce(t, brokers, ToKafka("cl", ok), &kgo.Record{Topic: "cl", Key: []byte(`["b"]`), Value: []byte(`{}`)},
		ToKafka("cl", landtest.Record(land.Continuous, "q", "c", time.Time{}, 1, false)))

	src, err := New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = land.Run(ctx, src, landtest.NewMemory(land.Continuous, ""), land.RunOptions{})
	src.Close()
	var de *DecodeError
	if !errors.As(err, &de) || de.Partition != 0 || de.Offset != 1 {
		t.Fatalf("Run = %v, want a DecodeError at partition 0 offset 1", err)
	}

	mem := landtest.NewMemory(land.Continuous, "")
	src, err = New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "lenient", SkipBadRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	var c land.Counters
	go func() {
		// Run counts a skipped record when its batch commits.
		for c.Skipped.Load()+c.Landed.Load() < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel2()
	}()
	land.Run(ctx2, src, mem, land.RunOptions{Counters: &c})
	if src.BadRecords() != 1 || len(mem.Refs()) != 2 {
		t.Fatalf("lenient: %d bad records, %d identities; want 1 and 2", src.BadRecords(), len(mem.Refs()))
	}
	if c.Skipped.Load() != 1 || c.Landed.Load() != 2 {
		t.Fatalf("counted %d skipped, %d landed; want 1 and 2", c.Skipped.Load(), c.Landed.Load())
	}
}

func mustClient(t *testing.T, brokers []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

type countingLander struct {
	land.Lander
	n atomicInt
}

func (c *countingLander) Land(ctx context.Context, recs []changelog.Record) (land.Result, error) {
	r, err := c.Lander.Land(ctx, recs)
	if err == nil {
		c.n.Add(int64(len(recs)))
	}
	return r, err
}

type crashLander struct {
	land.Lander
	n     int
	after int
	crash context.CancelFunc
}

func (c *crashLander) Land(ctx context.Context, recs []changelog.Record) (land.Result, error) {
	r, err := c.Lander.Land(ctx, recs)
	if c.n++; c.n == c.after {
		c.crash()
		return r, context.Canceled
	}
	return r, err
}

// TestCaughtUpOnTransactionalTopic: a ubik changelog is written in
// transactions, so each partition ends with a commit marker no data record
// reaches. Landing everything must still bring the group to the end, so
// CaughtUp says so (ubik land --until-caught-up exits).
func TestCaughtUpOnTransactionalTopic(t *testing.T) {
	brokers := cluster(t, "cl", 2)
	seed := landtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	gen := landtest.Gen{Mode: land.Latest, Groups: 3, Windows: 2, Revisions: 3}
	var all []changelog.Record
	for trial := range 20 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("caughtup-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	for i := 0; i < len(all); i += 10 {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, rec := range all[i:min(i+10, len(all))] {
			if err := prod.ProduceSync(ctx, ToKafka("cl", rec)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	mem := landtest.NewMemory(land.Latest, "")
	counting := &countingLander{Lander: mem}
	src, err := New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "g-txn"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- land.Run(rctx, src, counting, land.RunOptions{MaxInFlight: 2}) }()
	for {
		up, err := src.CaughtUp(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if up {
			break
		}
		if rctx.Err() != nil {
			t.Fatalf("never caught up: %d of %d records landed", counting.n.Load(), len(all))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-errc
	if got := counting.n.Load(); got != int64(len(all)) {
		t.Fatalf("caught up after landing %d of %d records", got, len(all))
	}
	// The source's own view agrees with the brokers': each partition is
	// committed up to its last stable offset, commit marker included.
	adm := kadm.NewClient(mustClient(t, brokers))
	ends, err := adm.ListEndOffsets(ctx, "cl")
	if err != nil {
		t.Fatal(err)
	}
	parts := src.Partitions()
	if len(parts) != 2 {
		t.Fatalf("Partitions() = %+v, want both partitions", parts)
	}
	for i, p := range parts {
		end, _ := ends.Lookup("cl", int32(i))
		if p.Topic != "cl" || p.Partition != int32(i) || p.Committed != end.Offset || p.End != end.Offset || p.Lag() != 0 {
			t.Errorf("partition %d: %+v (lag %d), want committed and end %d", i, p, p.Lag(), end.Offset)
		}
	}
}

// TestPartitionsFollowAssignment: a second member of the group takes
// partitions from the first; each source then reports only its own.
func TestPartitionsFollowAssignment(t *testing.T) {
	brokers := cluster(t, "cl", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() *Source {
		src, err := New(Options{Brokers: brokers, Topics: []string{"cl"}, Group: "g-assign"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(src.Close)
		go land.Run(ctx, src, landtest.NewMemory(land.Latest, ""), land.RunOptions{})
		return src
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("never %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a := start()
	wait("assigned both partitions", func() bool { return len(a.Partitions()) == 2 })
	b := start()
	wait("split the partitions", func() bool { return len(a.Partitions()) == 1 && len(b.Partitions()) == 1 })
	if pa, pb := a.Partitions()[0], b.Partitions()[0]; pa.Partition == pb.Partition || pa.Committed != -1 || pa.End != -1 || pa.Lag() != -1 {
		t.Fatalf("a has %+v, b has %+v", pa, pb)
	}
}
