package kafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ubiksql/ubik/internal/crashtest"
)

// TestZombieFenced: instance a is frozen with SIGSTOP inside a transaction
// (a state entry written, the transaction not ended); instance b, another
// process with another id, takes its partitions once a's session times out,
// and restores once the broker has aborted a's transaction at its timeout.
// Then a is resumed with SIGCONT and carries on as if nothing happened. Not
// one record of the zombie's transaction, nor of any later one of its
// producer, may become visible to a read_committed consumer (its offsets
// commit in the same transactions, so none of them either), and the finals
// equal the oracle. (As on Kafka, the broker fenced the producer for good
// when it aborted the transaction at its timeout: the zombie's stages stop
// with ErrFenced.)
func TestZombieFenced(t *testing.T) {
	t.Parallel()
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
	logs := map[string]string{} // instance id -> its diagnostics file, shown when the test fails
	var resumed string          // when a was resumed, as its log lines show the time
	start := func(id string, env ...string) *crashtest.Proc {
		cmd := crashtest.Self(append([]string{envCrashChild + "=" + strings.Join(addrs, ","), envCrashInstance + "=" + id,
			envCrashTimeouts + "=6000,8000", envCrashLog + "=1"}, env...)...)
		logf, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		logs[id] = logf.Name()
		cmd.Stderr = logf
		p := crashtest.Start(t, cmd)
		t.Cleanup(func() {
			p.Kill()
			logf.Close()
		})
		return p
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for id, name := range logs {
			b, _ := os.ReadFile(name)
			lines := strings.Split(string(b), "\n")
			// From shortly before SIGCONT (the kgo log lines start with the time).
			from := max(0, len(lines)-500)
			if resumed != "" {
				for i, l := range lines {
					if len(l) > 12 && l[:12] >= resumed {
						from = max(0, i-50)
						break
					}
				}
			}
			lines = lines[from:min(len(lines), from+600)]
			t.Logf("instance %s, %d lines of its log:\n%s", id, len(lines), strings.Join(lines, "\n"))
		}
	})
	f := follow(t, addrs, "out", false)
	a := start("zombie-a", envCrashStop+"=8", envCrashStopFile+"="+stopFile)
	var pid int64
	var acked int16 // the epoch of the acknowledged state entry the zombie stopped at (its open transaction's)
	deadline := time.Now().Add(60 * time.Second)
	for {
		f.poll(100 * time.Millisecond)
		if b, err := os.ReadFile(stopFile); err == nil && len(b) > 0 {
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
	t.Logf("a stopped inside a transaction (producer %d, epoch %d); %d records read", pid, acked, f.n)
	// Log the EndTxn requests of a's stages (diagnostics).
	obs := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Observe: true, Count: -1,
		When: func(r kmsg.Request) bool {
			if e, ok := r.(*kmsg.EndTxnRequest); ok && strings.HasSuffix(e.TransactionalID, ".zombie-a") {
				t.Logf("%s EndTxn %s producer %d epoch %d commit=%v", time.Now().Format("15:04:05.000"), e.TransactionalID, e.ProducerID, e.ProducerEpoch, e.Commit)
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
	resumed = time.Now().Format("15:04:05.000")
	t.Logf("%s SIGCONT", resumed)
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Give the zombie time to do whatever it would.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		f.poll(100 * time.Millisecond)
	}
	<-produced
	f.waitFinals(t, tumbleOracle(evs), 2*time.Minute)
	// Stop both (a clean stop) so the topics go quiet, then read them.
	for _, p := range []*crashtest.Proc{a, b} {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			t.Errorf("instance did not stop within 60 s of SIGTERM")
			p.Kill()
		}
	}
	// Nothing of the zombie commits after its stop: not the stopped
	// transaction, and no later one (its producer is fenced for good once
	// the broker aborted that transaction at its timeout; only this
	// process uses its transactional id).
	for _, topic := range []string{"out", "crash-state"} {
		byEpoch := producerRecords(t, addrs, topic, pid)
		t.Logf("%s: committed records of producer %d by epoch: %v", topic, pid, byEpoch)
		for e, k := range byEpoch {
			if e >= acked && k > 0 {
				t.Errorf("%d records of producer %d epoch %d (the transaction stopped at epoch %d, or a later one) are visible in %s", k, pid, e, acked, topic)
			}
		}
	}
	t.Logf("instance a: %v; instance b: %v", a.Cmd.ProcessState, b.Cmd.ProcessState)
}

// producerRecords reads topic with read_committed until it is quiet and
// counts the records of one producer id by epoch.
func producerRecords(t *testing.T, addrs []string, topic string, pid int64) map[int16]int {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n, total := map[int16]int{}, 0
	for quiet := 0; quiet < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if r.ProducerID == pid {
				n[r.ProducerEpoch]++
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
