package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash test runs the pipeline in a child process (this test binary,
// re-executed) so it can be killed with SIGKILL at random points.
const (
	envCrashChild   = "UBIK_KAFKA_CRASH_CHILD" // brokers, set in the child
	envCrashEvents  = "UBIK_CRASH_EVENTS"      // input size; default 200000, the full size is 1000000
	envCrashSeed    = "UBIK_CRASH_SEED"
	crashInstanceID = "crash-1"
)

func TestMain(m *testing.M) {
	if brokers := os.Getenv(envCrashChild); brokers != "" {
		os.Exit(crashChild(strings.Split(brokers, ",")))
	}
	os.Exit(m.Run())
}

func crashChild(brokers []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pl, err := New(Options{Query: tumbleQuery("crash", 200*time.Millisecond), Source: endpoint(brokers, "events"),
		Sink: endpoint(brokers, "out"), InstanceID: crashInstanceID})
	if err == nil {
		err = pl.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	return 0
}

// TestCrashRecovery kills the pipeline process with SIGKILL at random points
// (at least 5 times) while it works through the input, restarting it each
// time. A read_committed consumer following the output must see no
// duplicate, no revision regression, and finals equal to the batch oracle.
func TestCrashRecovery(t *testing.T) {
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

	start := func() *osexec.Cmd {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashChild+"="+strings.Join(addrs, ","))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the pipeline process: %v", err)
		}
		return cmd
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
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9: %v", err)
		}
		cmd.Wait()
		kills++
		t.Logf("kill -9 #%d at %s; %d records read so far", kills, time.Since(began).Round(time.Millisecond), f.n)
		cmd = start()
		if kills > 50 {
			break
		}
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
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
