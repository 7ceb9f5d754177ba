package kafka

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// restartable is an in-process broker that keeps its log in a data dir
// on a fixed port, so it can be stopped (an outage: every connection
// refused) and started again with everything it had committed.
type restartable struct {
	t    testing.TB
	dir  string
	port int
	c    *kfake.Cluster
	hold int // while stopped: a socket bound to the port (see stop); else -1
}

func newRestartable(t testing.TB) *restartable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := &restartable{t: t, dir: t.TempDir(), port: port, hold: -1}
	b.start()
	t.Cleanup(func() {
		if b.c != nil {
			b.c.Close()
		}
		b.release()
	})
	return b
}

func (b *restartable) addrs() []string { return []string{"127.0.0.1:" + strconv.Itoa(b.port)} }

func (b *restartable) start() {
	b.t.Helper()
	b.release()
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment after a stop
		b.c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(b.port), kfake.DataDir(b.dir),
			kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "3600000"}))
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("starting the broker again on port %d: %v", b.port, err)
}

// stop stops the broker and holds its port until start: a socket bound
// to it and not listening refuses every connection, as a closed port
// does, and no listener of another test (they run in parallel) or
// process can take the port meanwhile.
func (b *restartable) stop() {
	b.t.Helper()
	b.c.Close()
	b.c = nil
	var err error
	for i := 0; i < 50; i++ { // as in start
		if b.hold, err = bindOnly(b.port); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("holding port %d while the broker is down: %v", b.port, err)
}

func (b *restartable) release() {
	if b.hold >= 0 {
		syscall.Close(b.hold)
		b.hold = -1
	}
}

// bindOnly binds a TCP socket to 127.0.0.1:port without listening.
func bindOnly(port int) (int, error) {
	syscall.ForkLock.RLock() // no child (a crash test's) inherits it
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, err
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// waitCommits waits until the pipeline has committed at least n transactions.
func waitCommits(t testing.TB, pl *Pipeline, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for pl.Stats().Commits < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d commits after 60s", pl.Stats().Commits)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunRidesOutBrokerOutage stops the broker for 15 s while a query
// runs (every request of the loop fails: offsets, metadata, the state
// restore of a new session, the transaction's end) and starts it again:
// the query goes on without an error, and its finals are exact. The
// transaction timeout, which bounds the open transaction's flush and end,
// is 5 s: the outage must outlast it for the end to fail and new sessions
// to start while the broker is down (at the default 30 s, against a 30 s
// outage, the broker was back first in some runs under load, and the
// transaction merely aborted).
func TestRunRidesOutBrokerOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 15 s outage")
	}
	b := newRestartable(t)
	addrs := b.addrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(33, 6000)
	var vals [][]byte
	for _, e := range evs[:3000] {
		vals = append(vals, e.json())
	}
	produceValues(t, addrs, "events", 3, vals, nil)
	pl, _ := runPipeline(t, Options{Query: tumbleQuery("outage", 200*time.Millisecond), Source: endpoint(addrs, "events"),
		Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t), TransactionTimeout: 5 * time.Second})
	waitCommits(t, pl, 5)
	b.stop()
	time.Sleep(15 * time.Second)
	b.start()
	produceEvents(t, addrs, "events", 3, evs[3000:], true)
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 120*time.Second)
	st := pl.Stats()
	if st.Redos == 0 {
		t.Errorf("no session was started again: the outage did not reach the loop (stats %+v)", st)
	}
	t.Logf("15 s outage ridden out: %d sessions started again, %d commits, %d aborts", st.Redos, st.Commits, st.Aborts)
}

// TestRunGivesUpAfterOutage: a broker that does not come back ends the
// run with an error once no transaction has committed for GiveUpAfter
// (here 3 s; by default 5 minutes), through the same path as the outage
// ridden out above. The transaction timeout bounds each attempt's flush
// and end in the outage (twice the timeout passed before the first
// redo at the default 30 s): 5 s here.
func TestRunGivesUpAfterOutage(t *testing.T) {
	t.Parallel()
	b := newRestartable(t)
	addrs := b.addrs()
	mkTopic(t, addrs, "events", 2, nil)
	produceEvents(t, addrs, "events", 2, genEvents(34, 1000), false)
	const giveUp = 3 * time.Second
	pl, err := New(Options{Query: tumbleQuery("giveup", 200*time.Millisecond), Source: endpoint(addrs, "events"),
		Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t), GiveUpAfter: giveUp, TransactionTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx) }()
	waitCommits(t, pl, 3)
	b.stop()
	stopped := time.Now()
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("still running 3 minutes into the outage, with GiveUpAfter %s", giveUp)
	}
	took := time.Since(stopped)
	if err == nil || !strings.Contains(err.Error(), "giving up") || !strings.Contains(err.Error(), giveUp.String()) {
		t.Fatalf("Run = %v, want the give-up error naming %s", err, giveUp)
	}
	if took < giveUp {
		t.Errorf("gave up %s into the outage, before GiveUpAfter %s", took, giveUp)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v: not a stop", err)
	}
	t.Logf("gave up %s into the outage: %v", took, err)
}
