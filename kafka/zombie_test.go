package kafka

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestZombieFenced: instance a is frozen with SIGSTOP inside a transaction
// (a state entry written, the transaction not ended); instance b, another
// process with another id, takes its partitions once a's session times out,
// and restores once the broker has aborted a's transaction at its timeout.
// Then a is resumed with SIGCONT and carries on as if nothing happened. Not
// one record of the zombie's transaction may become visible to a
// read_committed consumer (its offsets commit in the same transaction, so
// none of them either), and the finals equal the oracle.
func TestZombieFenced(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 4, nil)
	evs := genEvents(9, 80000)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, addrs, "events", 4, evs, 12*time.Second)
	}()
	stopFile := filepath.Join(t.TempDir(), "zombie")
	start := func(id string, env ...string) *osexec.Cmd {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashChild+"="+strings.Join(addrs, ","), envCrashInstance+"="+id,
			envCrashTimeouts+"=6000,8000")
		cmd.Env = append(cmd.Env, env...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting instance %s: %v", id, err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		})
		return cmd
	}
	f := follow(t, addrs, "out", false)
	a := start("zombie-a", envCrashStop+"=8", envCrashStopFile+"="+stopFile)
	var pid int64
	var epoch int16 // of the zombie's transaction, from its first EndTxn after SIGCONT
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.poll(100 * time.Millisecond)
		if b, err := os.ReadFile(stopFile); err == nil && len(b) > 0 {
			var acked int16
			if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &acked); err != nil {
				t.Fatalf("stop file %q: %v", b, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("instance a did not stop itself inside a transaction within 60 s")
		}
	}
	stoppedAt := time.Now()
	t.Logf("a stopped inside a transaction (producer %d); %d records read", pid, f.n)
	// The zombie's transaction is the one a's aggregate stage ends first
	// after SIGCONT: observe that EndTxn (its epoch, commit or abort).
	var emu sync.Mutex
	var ends []*kmsg.EndTxnRequest
	obs := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1,
		When: func(r kmsg.Request) bool {
			if e, ok := r.(*kmsg.EndTxnRequest); ok && e.TransactionalID == "crash.zombie-a" {
				emu.Lock()
				ends = append(ends, e)
				emu.Unlock()
			}
			return false
		}})
	defer obs.Remove()
	b := start("zombie-b")
	// b takes over: a's session (6 s) and transaction (8 s) time out.
	n := f.n
	for time.Since(stoppedAt) < 20*time.Second || f.n == n {
		f.poll(200 * time.Millisecond)
		if time.Since(stoppedAt) > 90*time.Second {
			t.Fatal("instance b produced nothing within 90 s of a's stop")
		}
	}
	t.Logf("b took over: %d new records; resuming a after %s", f.n-n, time.Since(stoppedAt).Round(time.Millisecond))
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		f.poll(100 * time.Millisecond)
		emu.Lock()
		n := len(ends)
		emu.Unlock()
		if n > 0 {
			break
		}
	}
	<-produced
	f.waitFinals(t, tumbleOracle(evs), 2*time.Minute)
	// Stop both (a clean stop) so the topics go quiet, then read them.
	for _, cmd := range []*osexec.Cmd{a, b} {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("instance did not stop within 60 s of SIGTERM")
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
	emu.Lock()
	var first *kmsg.EndTxnRequest
	if len(ends) > 0 {
		first = ends[0]
	}
	emu.Unlock()
	if first == nil {
		// It froze inside End: on SIGCONT the end's own deadline has
		// passed, the stage stops with that error and never sends
		// EndTxn; the broker aborted the transaction at its timeout.
		// The finals and the invariants above are the check then.
		t.Logf("after SIGCONT a stopped without ending its zombie transaction")
		return
	}
	epoch = first.ProducerEpoch
	// Whether it asks to commit depends on where it froze (in the flush,
	// its bounded flush fails and it aborts; after it, it asks): either
	// way the broker must refuse it, which the records below check.
	t.Logf("after SIGCONT a ended its zombie transaction (epoch %d) with commit=%v", epoch, first.Commit)
	for _, topic := range []string{"out", "crash-state"} {
		if k := zombieRecords(t, addrs, topic, pid, epoch); k > 0 {
			t.Errorf("%d records of the zombie's transaction (producer %d epoch %d) are visible in %s", k, pid, epoch, topic)
		}
	}
}

// zombieRecords reads topic with read_committed until it is quiet and
// counts the records of one producer epoch.
func zombieRecords(t *testing.T, addrs []string, topic string, pid int64, epoch int16) int {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n, total := 0, 0
	for quiet := 0; quiet < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if r.ProducerID == pid && r.ProducerEpoch == epoch {
				n++
			}
		})
		total += got
		if got == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	if total == 0 {
		t.Errorf("read nothing from %s", topic)
	}
	return n
}
