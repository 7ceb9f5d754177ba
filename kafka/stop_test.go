package kafka

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
)

// cancelAt is a produce hook that cancels a pipeline's context when the
// n-th record to topic is buffered: a clean stop (SIGINT) that lands in the
// middle of a transaction, after some of its records were produced and
// before the others.
type cancelAt struct {
	topic  string
	n      int64
	seen   atomic.Int64
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (h *cancelAt) OnProduceRecordBuffered(r *kgo.Record) {
	if r.Topic == h.topic && h.seen.Add(1) == h.n {
		h.fired.Store(true)
		h.cancel()
	}
}

// TestStopMidTransaction stops the pipeline (its context canceled, as
// SIGINT does) in the middle of a transaction of each stage, many times,
// restarting it each time. A stop may commit the open transaction only if
// every record of it was produced: a transaction that commits its input
// offsets without all of its repartitioned events, changelog records or
// state entries loses events. The finals must equal the oracle.
func TestStopMidTransaction(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 4, nil)
	evs := genEvents(seed, 60000)
	q := tumbleQuery("stop", 50*time.Millisecond)
	topics := []string{q.Name + "-repartition", "out", q.Name + "-state"}
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, addrs, "events", 4, evs, 8*time.Second)
	}()
	f := follow(t, addrs, "out", false)
	fired, runs := 0, 0
	for i := 0; i < 40 && (fired < 9 || !isDone(produced)); i++ {
		runs++
		ctx, cancel := context.WithCancel(context.Background())
		// The stop lands at the n-th record to the topic after arming,
		// or at the fallback: on a loaded machine (GOMAXPROCS=1, a busy
		// process beside) a run produced fewer than a few hundred records
		// to the sink or the state topic in 5 s, too few stops landed in
		// a transaction, and the test failed its own precondition.
		h := &cancelAt{topic: topics[i%len(topics)], n: 1 + r.Int64N(100), cancel: cancel}
		h.seen.Store(math.MinInt64) // armed below
		pl, err := New(Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a",
			MaxPollRecords: 2000, ClientOpts: []kgo.Opt{kgo.WithHooks(h)}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pl.Run(ctx) }()
		// Under load the pipeline may take a while to start working:
		// arm the stop once it has committed a transaction.
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && pl.Stats().Commits == 0; {
			time.Sleep(10 * time.Millisecond)
		}
		h.seen.Store(0)
		tm := time.AfterFunc(10*time.Second, cancel)
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		tm.Stop()
		cancel()
		if h.fired.Load() {
			fired++
		}
		f.poll(50 * time.Millisecond)
	}
	<-produced
	if fired < 9 {
		t.Errorf("only %d of %d stops landed inside a transaction", fired, runs)
	}
	runPipeline(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	f.waitFinals(t, tumbleOracle(evs), 90*time.Second)
	t.Logf("%d of %d stops inside a transaction; %d records read", fired, runs, f.n)
}

// TestStateWithoutMetaRefused: a state partition holding operator entries
// but no meta entry lost records (every transaction that writes entries
// writes the meta entry, and compaction keeps its latest value). Restoring
// from it would number new groups and track watermarks from nothing, so
// the pipeline refuses it.
func TestStateWithoutMetaRefused(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 1, nil)
	mkTopic(t, addrs, "nometa-state", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	// A valid group entry, from an operator of the same query.
	q := tumbleQuery("nometa", 0)
	d, err := drive.New(q, drive.Config{Emit: func(*changelog.Record) error { return nil }})
	if err == nil {
		err = d.Push(genEvents(1, 1)[0].json())
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	err = d.Checkpoint(true, nil, func(k, v []byte) error {
		if string(k) == drive.MetaKey {
			return nil
		}
		r := &kgo.Record{Topic: "nometa-state", Partition: 0, Key: stateKey(0, k), Value: append([]byte(nil), v...)}
		return cl.ProduceSync(context.Background(), r).FirstErr()
	})
	if err != nil {
		t.Fatal(err)
	}
	produceEvents(t, addrs, "events", 1, genEvents(1, 10), false)
	pl, err := New(Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = pl.Run(ctx)
	if !errors.Is(err, drive.ErrBadState) || !strings.Contains(err.Error(), "no meta entry") || !strings.Contains(err.Error(), "partition 0") {
		t.Fatalf("Run over a state partition without its meta entry: %v, want ErrBadState naming the partition", err)
	}
}

// TestStopDuringRebalance: a SIGTERM that lands while the instance waits
// in a rebalance (its JoinGroup in flight) stops it within stopBound.
// Instances a and b share the query; b is frozen (SIGSTOP, its session
// timeout 30 s) and c joins, so the group rebalances and waits for b:
// a's JoinGroup stays unanswered until b's session expires. kgo's Close
// does not interrupt a join in flight, and a stop used to wait for it
// (up to the rebalance timeout, 60 s, and kgo's deadline of 70 s for the
// request). Then b resumes and b and c stop the same way, one pipeline
// finishes the input, and the finals equal the oracle: nothing the stops
// ended was lost or counted twice.
func TestStopDuringRebalance(t *testing.T) {
	const stopBound = 8 * time.Second
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 4, nil)
	evs := genEvents(uint64(time.Now().UnixNano()), 60000)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, addrs, "events", 4, evs, 15*time.Second)
	}()
	dir := t.TempDir()
	type child struct {
		p   *crashtest.Proc
		log string
	}
	start := func(id string, env ...string) *child {
		cmd := crashtest.Self(append([]string{envCrashChild + "=" + strings.Join(addrs, ","), envCrashInstance + "=" + id, envCrashLog + "=1"}, env...)...)
		ch := &child{log: filepath.Join(dir, id+".log")}
		logf, err := os.Create(ch.log)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = logf
		ch.p = crashtest.Start(t, cmd)
		t.Cleanup(func() {
			ch.p.Kill()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(ch.log)
				if len(b) > 30000 {
					b = b[len(b)-30000:]
				}
				t.Logf("instance %s, the end of its log:\n%s", id, b)
			}
		})
		return ch
	}
	count := func(ch *child, s string) int {
		b, _ := os.ReadFile(ch.log)
		return strings.Count(string(b), s)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 60 s", what)
			}
		}
	}
	stop := func(id string, ch *child) {
		t.Helper()
		at := time.Now()
		ch.p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-ch.p.Done():
		case <-time.After(stopBound + 60*time.Second):
			t.Fatalf("instance %s did not stop within %s of SIGTERM", id, stopBound+60*time.Second)
		}
		took := time.Since(at)
		if took > stopBound {
			t.Errorf("instance %s stopped %s after SIGTERM, want at most %s", id, took.Round(time.Millisecond), stopBound)
		}
		if code := ch.p.Cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("instance %s: exit status %d after SIGTERM, want 0 (a clean stop)", id, code)
		}
		b, _ := os.ReadFile(ch.log)
		var how []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "kafka: stopping") || strings.Contains(l, "kafka: closing the session") {
				how = append(how, l)
			}
		}
		t.Logf("instance %s stopped %s after SIGTERM %q", id, took.Round(time.Millisecond), how)
	}
	const session = "new group session begun" // kgo: a member's assignment, once per group and generation
	a := start("stop-a")
	waitFor("a joins both groups", func() bool { return count(a, session) >= 2 })
	b := start("stop-b", envCrashTimeouts+"=30000,40000")
	waitFor("b joins both groups", func() bool { return count(b, session) >= 2 })
	time.Sleep(time.Second)
	if err := b.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	joins := count(a, "joining group")
	cc := start("stop-c")
	// c's join makes the group rebalance; it waits for b (frozen, in
	// the group for 30 s more), so a's rejoin waits too.
	waitFor("a rejoins", func() bool { return count(a, "joining group") > joins })
	time.Sleep(300 * time.Millisecond)
	stop("a", a)
	b.p.Cmd.Process.Signal(syscall.SIGCONT)
	<-produced
	stop("c", cc)
	stop("b", b)

	f := follow(t, addrs, "out", false)
	runPipeline(t, Options{Query: tumbleQuery("crash", 200*time.Millisecond), Source: endpoint(addrs, "events"),
		Sink: endpoint(addrs, "out"), InstanceID: "stop-a"})
	f.waitFinals(t, tumbleOracle(evs), 2*time.Minute)
	t.Logf("%d records read", f.n)
}
