package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	osexec "os/exec"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
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

// TestSinkKeysMatchInProcess checks that the key and value bytes on the
// sink topic, read by kcat (a client that is not ours, librdkafka), equal
// the bytes the in-process engine emits for the same query and input, and
// that the headers decode with the landers' codec.
func TestSinkKeysMatchInProcess(t *testing.T) {
	kcat, err := osexec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat (Debian package kcat) is required: %v", err)
	}
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(2, 5000)
	produceEvents(t, addrs, "events", 3, evs, true)
	q := tumbleQuery("keys", 0)
	runPipeline(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 60*time.Second)

	var maxTS int64
	for _, e := range evs {
		maxTS = max(maxTS, e.ts)
	}
	want := map[string]string{}
	for _, r := range inProcess(t, q, append(evs, flushEvent(maxTS, 0), flushEvent(maxTS, 1), flushEvent(maxTS, 2))) {
		want[string(r.Key)] = string(r.Value)
	}
	cmd := osexec.Command(kcat, "-C", "-b", addrs[0], "-t", "out", "-o", "beginning", "-e", "-q",
		"-K", "\t", "-X", "isolation.level=read_committed")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("kcat line without a key delimiter: %q", line)
		}
		if _, dup := got[k]; dup {
			t.Errorf("kcat saw key %s twice (EMIT FINAL publishes a key once)", k)
		}
		got[k] = v
	}
	if len(got) != len(want) {
		t.Errorf("kcat read %d keys, the in-process run emitted %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: topic value %q, in-process value %q", k, got[k], v)
		}
	}
}

// TestCompaction: after the broker compacts the sink topic, a new consumer
// rebuilds exactly the latest value per key from what is left.
func TestCompaction(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	evs := genEvents(3, 20000)
	produceEvents(t, addrs, "events", 2, evs, true)
	q := continuousQuery("cont")
	runPipeline(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	want := continuousOracle(evs)
	// The flush events are ordinary events to a continuous view.
	for p := 0; p < 2; p++ {
		want[string(changelog.AppendKey(nil, []types.Value{types.Str(fmt.Sprintf("%s%d", flushMerchant, p))}))] = agg{orders: 1}
	}
	f := follow(t, addrs, "out", true)
	f.waitLatest(t, want, 60*time.Second)
	before := f.n
	c.Compact()
	g := follow(t, addrs, "out", true)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(g.latest) < len(want) {
		g.poll(300 * time.Millisecond)
	}
	g.poll(300 * time.Millisecond)
	g.compare(t, want, false)
	if g.n >= before {
		t.Errorf("compaction left %d of %d records", g.n, before)
	}
	t.Logf("%d records before compaction, %d after, %d keys", before, g.n, len(want))
}

// TestDirectPartitionedByKey skips the repartition stage for a source that
// is already partitioned by the GROUP BY key.
func TestDirectPartitionedByKey(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(4, 10000)
	// Partition by merchant, as a keyed producer would.
	cl := client(t, addrs)
	var recs []*kgo.Record
	var maxTS int64
	for _, e := range evs {
		maxTS = max(maxTS, e.ts)
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(e.merchant), Value: e.json()})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	manual := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := 0; p < 3; p++ {
		r := &kgo.Record{Topic: "events", Partition: int32(p), Key: []byte(flushMerchant), Value: flushEvent(maxTS, p).json()}
		if err := manual.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	src := endpoint(addrs, "events")
	src.PartitionedByKey = true
	runPipeline(t, Options{Query: tumbleQuery("direct", 100*time.Millisecond), Source: src, Sink: endpoint(addrs, "out"), InstanceID: "a"})
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 60*time.Second)
	if n, _ := topicPartitions(context.Background(), &admClient{Client: kadm.NewClient(cl), cl: cl}, "direct-repartition"); n != 0 {
		t.Errorf("direct mode created a repartition topic")
	}
}

// produceSlowly writes evs in chunks over about d, then the flush events.
func produceSlowly(t testing.TB, addrs []string, topic string, parts int, evs []event, d time.Duration) {
	chunks := 20
	n := (len(evs) + chunks - 1) / chunks
	for i := 0; i < len(evs); i += n {
		produceEvents(t, addrs, topic, parts, evs[i:min(i+n, len(evs))], false)
		time.Sleep(d / time.Duration(chunks))
	}
	produceEvents(t, addrs, topic, parts, nil, false)
	var maxTS int64
	for _, e := range evs {
		maxTS = max(maxTS, e.ts)
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := 0; p < parts; p++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: int32(p), Value: flushEvent(maxTS, p).json()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRebalance: two instances in one group; one stops mid-stream (its
// partitions and their state move to the other) and starts again (they
// move back). The output equals the single-instance output (the oracle),
// with no invariant broken on the way.
//
// The run is adversarial: a goroutine spins beside it (CPU stress; run it
// by hand with GOMAXPROCS=1 and a busy process too), b's stop lands in the
// middle of a transaction, a third instance joins and leaves in the middle
// of transactions, heartbeats answered REBALANCE_IN_PROGRESS force
// rebalances at random moments, and transactional offset commits answered
// ILLEGAL_GENERATION abort transactions midway, as a revoke that the
// member learns of only at commit time does.
func TestRebalance(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 4, nil)
	evs := genEvents(5, 60000)
	q := tumbleQuery("rb", 100*time.Millisecond)
	spin(t)
	var fmu sync.Mutex
	frand := rand.New(rand.NewPCG(seed, 4))
	chance := func(n int) func(kmsg.Request) bool {
		return func(kmsg.Request) bool {
			fmu.Lock()
			defer fmu.Unlock()
			return frand.IntN(n) == 0
		}
	}
	faults := c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: q.Name, Err: kerr.RebalanceInProgress, Count: -1, When: chance(8)},
		kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.IllegalGeneration, Count: -1, When: chance(15)},
	)
	opts := func(id string, hooks ...kgo.Hook) Options {
		return Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: id,
			Logger: testLogger(t), MaxPollRecords: 2000,
			ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(300 * time.Millisecond), kgo.WithHooks(hooks...)}}
	}
	topics := []string{q.Name + "-repartition", "out", q.Name + "-state"}
	// midTxn starts an instance that stops itself at the n-th record it
	// produces to one of the topics once armed, or at the fallback.
	midTxn := func(id string) (arm func(), wait func() bool) {
		h := &cancelAt{topic: topics[r.IntN(len(topics))], n: 1 + r.Int64N(50)}
		o := opts(id, h)
		pl, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		h.seen.Store(math.MinInt64)
		done := make(chan error, 1)
		finished := make(chan struct{})
		go func() { done <- pl.Run(ctx); close(finished) }()
		t.Cleanup(func() {
			// Its goroutines log through t: the test must outlive them.
			cancel()
			select {
			case <-finished:
			case <-time.After(2 * time.Minute):
				t.Errorf("pipeline %s still running 2 minutes after the test", id)
			}
		})
		arm = func() {
			// Under load the instance may still be joining: wait until
			// it works, so the stop lands in a transaction.
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if st := pl.Stats(); st.Commits > 0 && st.EventsApplied > 0 {
					break
				}
			}
			h.seen.Store(0)
			time.AfterFunc(10*time.Second, cancel)
		}
		wait = func() bool {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("pipeline %s: %v", id, err)
				}
			case <-time.After(60 * time.Second):
				// Where it blocks: every goroutine's stack.
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 2)
				t.Errorf("pipeline %s did not stop within 60 s of its stop; goroutines:\n%s", id, b.String())
			}
			return h.fired.Load()
		}
		return arm, wait
	}
	a, _ := runPipeline(t, opts("a"))
	armB, waitB := midTxn("b")
	f := follow(t, addrs, "out", false)
	// The last fifth of the input waits for the restarted b (below).
	cut := len(evs) * 4 / 5
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, n := 0, cut/16; i < cut; i += n {
			produceEvents(t, addrs, "events", 4, evs[i:min(i+n, cut)], false)
			time.Sleep(300 * time.Millisecond)
		}
	}()
	armC, waitC := midTxn("c")
	time.Sleep(time.Duration(500+r.IntN(1000)) * time.Millisecond)
	armC()
	time.Sleep(time.Duration(500+r.IntN(1000)) * time.Millisecond)
	f.poll(100 * time.Millisecond)
	armB()
	midB := waitB()
	midC := waitC()
	time.Sleep(time.Duration(500+r.IntN(1500)) * time.Millisecond)
	f.poll(100 * time.Millisecond)
	b, _ := runPipeline(t, opts("b"))
	<-done
	// Under load, a could consume all of the input before b's join
	// completes, and no partition with work pending would move to b: the
	// rest of the input is produced once b has taken (and restored)
	// aggregating partitions.
	for deadline := time.Now().Add(90 * time.Second); b.Stats().Restores == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted b restored no operator within 90 s")
		}
	}
	produceSlowly(t, addrs, "events", 4, evs[cut:], time.Second)
	hits := faults.Hits()
	faults.Remove()
	f.waitFinals(t, tumbleOracle(evs), 90*time.Second)
	// The partitions (and their state) must really have moved.
	sa, sb := a.Stats(), b.Stats()
	t.Logf("a: %+v\nb: %+v", sa, sb)
	t.Logf("b stopped inside a transaction: %v, c: %v; %d faults answered", midB, midC, hits)
	// b may find the source already read (EventsIn 0) when it rejoins; it
	// must still have taken aggregating partitions and applied events there.
	if sa.Restores < 3 || sb.Restores < 1 || sb.EventsApplied == 0 {
		t.Errorf("no state moved: a restored %d operators, the restarted b %d (b applied %d events)", sa.Restores, sb.Restores, sb.EventsApplied)
	}
	if hits == 0 {
		t.Errorf("no fault fired")
	}
}

// spin keeps one goroutine busy for the rest of the test: CPU stress that
// stretches every window between a poll, a produce and a commit.
func spin(t *testing.T) {
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for x := uint64(1); ; x = x*6364136223846793005 + 1 {
			if x&0xffff == 0 {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
}

// TestBrokerFaultNoDuplicates: the broker answers produce requests with
// REQUEST_TIMED_OUT after appending them (kfake fault injection), so the
// client retries batches that are already in the log. The idempotent,
// transactional producer's sequence numbers must keep the retries out of
// what a read_committed consumer sees.
func TestBrokerFaultNoDuplicates(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 2, nil)
	evs := genEvents(6, 20000)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1,
		When: func(r kmsg.Request) bool {
			pr, ok := r.(*kmsg.ProduceRequest)
			return ok && pr.TransactionID != nil && rand.IntN(3) == 0
		}})
	defer h.Remove()
	runPipeline(t, Options{Query: continuousQuery("fault"), Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	produceSlowly(t, addrs, "events", 2, evs, time.Second)
	want := continuousOracle(evs)
	for p := 0; p < 2; p++ {
		want[string(changelog.AppendKey(nil, []types.Value{types.Str(fmt.Sprintf("%s%d", flushMerchant, p))}))] = agg{orders: 1}
	}
	f := follow(t, addrs, "out", true)
	f.waitLatest(t, want, 90*time.Second)
	if h.Hits() == 0 {
		t.Errorf("the fault never fired")
	}
	t.Logf("%d produce requests timed out after appending; %d records read", h.Hits(), f.n)
}
