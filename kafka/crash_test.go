package kafka

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/crashtest"
)

// The crash test runs the pipeline in a child process (this test binary,
// re-executed) so it can be killed with SIGKILL at random points.
const (
	envCrashChild  = "UBIK_KAFKA_CRASH_CHILD" // brokers, set in the child
	envCrashEvents = "UBIK_CRASH_EVENTS"      // input size; default 200000, the full size is 1000000
	envCrashSeed   = "UBIK_CRASH_SEED"
	// envCrashKill makes the child kill itself with SIGKILL inside a
	// transaction: at the first state entry the broker acknowledges once
	// this many aggregating-stage transactions have ended since the one
	// that carried its first acknowledged sink record (so the child has
	// published something first, and the state
	// partition is in an open transaction that the dead process never
	// ends).
	envCrashKill = "UBIK_CRASH_KILL_AFTER"
	// envCrashStop is envCrashKill with SIGSTOP (once): the child becomes
	// a zombie inside a transaction. Before it stops, it writes the
	// producer id and epoch of that transaction to envCrashStopFile.
	envCrashStop     = "UBIK_CRASH_STOP_AFTER"
	envCrashStopFile = "UBIK_CRASH_STOP_FILE"
	envCrashInstance = "UBIK_CRASH_INSTANCE"       // instance id; default crashInstanceID
	envCrashTimeouts = "UBIK_CRASH_SESSION_TXN_MS" // "session,transaction" timeouts in ms
	envCrashLog      = "UBIK_CRASH_LOG"            // set: the child logs its diagnostics and the client's to stderr
	crashInstanceID  = "crash-1"
)

func TestMain(m *testing.M) {
	if brokers := os.Getenv(envCrashChild); brokers != "" {
		os.Exit(crashChild(strings.Split(brokers, ",")))
	}
	flag.Parse()
	defaultParallel()
	os.Exit(m.Run())
}

// testParallel is how many parallel tests of this package run at once
// unless -parallel says otherwise. The tests wait on timers far more than
// they compute (commit intervals, session and transaction timeouts, kill
// rounds, outages): the package used 12% of one core over its 12 minutes
// run alone, so the default of GOMAXPROCS left the machine idle. Each
// parallel test runs on a cluster of its own, or on topics and query
// names of its own on the shared broker (uniq); the tests that measure
// time (a restart's latency, a stop's bound, a transaction's polls) do
// not call t.Parallel.
const testParallel = 8

func defaultParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(testParallel, runtime.GOMAXPROCS(0))))
	}
}

func crashChild(brokers []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var hooks []kgo.Opt
	for env, sig := range map[string]syscall.Signal{envCrashKill: syscall.SIGKILL, envCrashStop: syscall.SIGSTOP} {
		if s := os.Getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				fmt.Fprintln(os.Stderr, "crash child:", err)
				return 1
			}
			hooks = append(hooks, kgo.WithHooks(&selfKill{after: int64(n), sig: sig, file: os.Getenv(envCrashStopFile)}))
		}
	}
	opts := Options{Query: tumbleQuery("crash", 200*time.Millisecond), Source: endpoint(brokers, "events"),
		Sink: endpoint(brokers, "out"), InstanceID: crashInstanceID}
	if id := os.Getenv(envCrashInstance); id != "" {
		opts.InstanceID = id
	}
	if s := os.Getenv(envCrashTimeouts); s != "" {
		var sess, txn int
		if _, err := fmt.Sscanf(s, "%d,%d", &sess, &txn); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", envCrashTimeouts, err)
			return 1
		}
		opts.SessionTimeout, opts.TransactionTimeout = time.Duration(sess)*time.Millisecond, time.Duration(txn)*time.Millisecond
		hooks = append(hooks, kgo.RebalanceTimeout(opts.SessionTimeout))
	}
	var log *slog.Logger
	if os.Getenv(envCrashLog) != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		hooks = append(hooks, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	opts.ClientOpts, opts.Logger = hooks, log
	pl, err := New(opts)
	if err == nil {
		err = pl.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	return 0
}

// selfKill is the crash child's signal to itself inside a transaction
// (envCrashKill, envCrashStop) of the aggregating stage.
//
// It counts that stage's transactions by the producer epoch of its
// records: the test broker, like Kafka with transactions version 2,
// bumps the epoch at every EndTxn, and only the aggregating stage's
// producer writes the sink and the state topic. (It used to count every
// EndTxn the process sent, the repartition stage's too; once a stage-2
// transaction took the polls of a whole commit interval, stage 1 ended
// `after` transactions inside the first stage-2 transaction that wrote a
// sink record, so the child killed itself before it had committed any,
// every restart did the same, and TestRestartLatency saw no record.)
type selfKill struct {
	after int64
	sig   syscall.Signal
	file  string
	mu    sync.Mutex
	sink  bool  // a sink record was acknowledged
	pid   int64 // its producer id and epoch
	epoch int16
	fired atomic.Bool
}

func (h *selfKill) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	if r.Topic == "out" && !h.sink {
		h.sink, h.pid, h.epoch = true, r.ProducerID, r.ProducerEpoch
	}
	// A state entry of the aggregating stage's transaction that began
	// once `after` of its transactions ended since (and including) the
	// one that carried the first acknowledged sink record.
	due := r.Topic == "crash-state" && h.sink && r.ProducerID == h.pid && int64(r.ProducerEpoch) >= int64(h.epoch)+h.after
	h.mu.Unlock()
	if !due || h.fired.Swap(true) {
		return
	}
	if h.file != "" {
		// The acknowledged state entry belongs to the open transaction.
		os.WriteFile(h.file, fmt.Appendf(nil, "%d %d\n", r.ProducerID, r.ProducerEpoch), 0o644)
	}
	syscall.Kill(os.Getpid(), h.sig)
	// The signal is not synchronous in a process with several threads:
	// the kernel may hand it to another thread, which must be scheduled
	// to stop the rest, so on a loaded machine this one (and the
	// transaction) ran on for milliseconds, sometimes past the commit.
	// This hook holds the record's acknowledgement, so the transaction
	// cannot end while it waits: until the process dies (SIGKILL) or a
	// gap in the clock shows it was stopped and resumed (SIGSTOP).
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		t0 := time.Now()
		time.Sleep(10 * time.Millisecond)
		if time.Since(t0) > 5*time.Second {
			return
		}
	}
}

// TestCrashRecovery kills the pipeline process with SIGKILL at random points
// (at least 5 times) while it works through the input, restarting it each
// time. A read_committed consumer following the output must see no
// duplicate, no revision regression, and finals equal to the batch oracle.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	n := 200000
	if s := os.Getenv(envCrashEvents); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("%s=%q is not a positive integer", envCrashEvents, s)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envCrashSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with %s=%d), %d events", seed, envCrashSeed, seed, n)
	r := rand.New(rand.NewPCG(seed, 1))

	c := cluster(t)
	addrs := c.ListenAddrs()
	const parts = 8
	mkTopic(t, addrs, "events", parts, nil)
	evs := genEvents(seed, n)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, addrs, "events", parts, evs, 8*time.Second)
	}()

	start := func() *crashtest.Proc {
		return crashtest.Start(t, crashtest.Self(envCrashChild+"="+strings.Join(addrs, ",")))
	}
	f := follow(t, addrs, "out", false)
	began := time.Now()
	cmd := start()
	kills := 0
	for kills < 5 || !isDone(produced) {
		deadline := time.Now().Add(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		for time.Now().Before(deadline) {
			f.poll(100 * time.Millisecond)
		}
		killChild(t, cmd)
		kills++
		t.Logf("kill -9 #%d at %s; %d records read so far", kills, time.Since(began).Round(time.Millisecond), f.n)
		cmd = start()
		if kills > 50 {
			break
		}
	}
	f.waitFinals(t, tumbleOracle(evs), 5*time.Minute)
	t.Logf("%d kills; %d events; finals complete after %s; %d records read", kills, n, time.Since(began).Round(time.Millisecond), f.n)
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestRestartLatency kills the pipeline process with SIGKILL while events
// flow (so its transactions are open) and measures the time from the
// restart to the first new record a read_committed consumer sees. The
// restarted process fences its dead predecessor's transaction when it
// starts (same transactional id) and takes its partitions back at once
// (same static member id), so it must not wait out the transaction
// timeout (30 s) or the session timeout (10 s).
func TestRestartLatency(t *testing.T) {
	const bound = 8 * time.Second
	for _, parts := range []int{1, 4} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", parts, nil)
			evs := genEvents(uint64(parts), 300000)
			stop := make(chan struct{})
			produced := make(chan struct{})
			go func() {
				defer close(produced)
				for i := 0; i < len(evs); i += 500 {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					produceEvents(t, addrs, "events", parts, evs[i:min(i+500, len(evs))], false)
				}
			}()
			defer func() { close(stop); <-produced }()
			// Each process but the last kills itself inside a
			// transaction, after a few have committed.
			const kills = 3
			start := func(i int) *crashtest.Proc {
				env := []string{envCrashChild + "=" + strings.Join(addrs, ",")}
				if i < kills {
					env = append(env, fmt.Sprintf("%s=%d", envCrashKill, 2+i))
				}
				return crashtest.Start(t, crashtest.Self(env...))
			}
			f := follow(t, addrs, "out", false)
			cur := start(0)
			// waitNew polls until the consumer sees a record it had not.
			waitNew := func(limit time.Duration) (time.Duration, bool) {
				began, n := time.Now(), f.n
				for time.Since(began) < limit {
					f.poll(20 * time.Millisecond)
					if f.n > n {
						return time.Since(began), true
					}
				}
				return limit, false
			}
			var worst time.Duration
			for kill := 1; kill <= kills; kill++ {
				select {
				case <-cur.Done():
					if ws, ok := cur.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
						t.Fatalf("the pipeline process ended without killing itself: %v", cur.Cmd.ProcessState)
					}
				case <-time.After(2 * time.Minute):
					t.Fatal("the pipeline process did not kill itself within 2 minutes")
				}
				// Drain what the dead process committed.
				for n := -1; n != f.n; {
					n = f.n
					f.poll(300 * time.Millisecond)
				}
				cur = start(kill)
				d, ok := waitNew(bound + 30*time.Second)
				t.Logf("kill -9 #%d: first record %s after the restart", kill, d.Round(time.Millisecond))
				worst = max(worst, d)
				if !ok {
					t.Fatalf("no record within %s of a restart", d)
				}
			}
			if worst > bound {
				t.Errorf("a restart after kill -9 took %s to its first record, more than %s", worst.Round(time.Millisecond), bound)
			}
			for _, v := range f.violations {
				t.Errorf("read_committed consumer saw: %s", v)
			}
		})
	}
}
