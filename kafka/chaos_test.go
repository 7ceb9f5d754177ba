package kafka

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
)

const (
	envChaosEvents  = "UBIK_CHAOS_EVENTS"  // input size; default 100000
	envChaosSeconds = "UBIK_CHAOS_SECONDS" // how long events are produced under chaos; default 15
	envChaosSeed    = "UBIK_CHAOS_SEED"
)

// TestChaos runs three instances of one query (with a repartition stage)
// over a 4-partition topic as separate processes while events are
// produced, and at random moments kills one with SIGKILL and restarts it
// (same instance id), or freezes one with SIGSTOP for up to 10 s (longer
// than its session timeout: the others take its partitions, and it is a
// zombie when SIGCONT resumes it). Then every instance runs until the
// finals are complete. A read_committed consumer checks every record: no
// duplicate (key, revision), no revision going backwards, nothing after a
// final; and the finals equal the batch oracle (no event lost or counted
// twice). A long run by hand:
//
//	UBIK_CHAOS_EVENTS=500000 UBIK_CHAOS_SECONDS=180 go test -run TestChaos -v -timeout 30m ./kafka
func TestChaos(t *testing.T) {
	t.Parallel()
	n, secs := 100000, 15
	for env, p := range map[string]*int{envChaosEvents: &n, envChaosSeconds: &secs} {
		if s := os.Getenv(env); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				t.Fatalf("%s=%q is not a positive integer", env, s)
			}
			*p = v
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envChaosSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with %s=%d), %d events over %d s", seed, envChaosSeed, seed, n, secs)
	r := rand.New(rand.NewPCG(seed, 8))
	c := cluster(t)
	addrs := c.ListenAddrs()
	const parts, instances = 4, 3
	mkTopic(t, addrs, "events", parts, nil)
	evs := genEvents(seed, n)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, addrs, "events", parts, evs, time.Duration(secs)*time.Second)
	}()
	type inst struct {
		id      string
		p       *crashtest.Proc
		stopped bool
	}
	start := func(in *inst) {
		in.p = crashtest.Start(t, crashtest.Self(envCrashChild+"="+strings.Join(addrs, ","), envCrashInstance+"="+in.id,
			envCrashTimeouts+"=6000,8000"))
		in.stopped = false
	}
	all := make([]*inst, instances)
	for i := range all {
		all[i] = &inst{id: fmt.Sprintf("chaos-%d", i)}
		start(all[i])
	}
	f := follow(t, addrs, "out", false)
	var kills, stops int
	resume := map[*inst]time.Time{}
	for !isDone(produced) {
		for end := time.Now().Add(time.Duration(300+r.IntN(1500)) * time.Millisecond); time.Now().Before(end); {
			f.poll(100 * time.Millisecond)
		}
		for in, at := range resume {
			if time.Now().After(at) {
				in.p.Cmd.Process.Signal(syscall.SIGCONT)
				in.stopped = false
				delete(resume, in)
			}
		}
		in := all[r.IntN(len(all))]
		if in.stopped {
			continue
		}
		if r.IntN(3) == 0 {
			in.p.Cmd.Process.Signal(syscall.SIGSTOP)
			in.stopped = true
			resume[in] = time.Now().Add(time.Duration(500+r.IntN(9500)) * time.Millisecond)
			stops++
			continue
		}
		if killed, err := in.p.Kill(); !killed && !strings.Contains(in.p.Stderr(), "transactional producer fenced") {
			// A paused instance cut off past its session timeout is fenced
			// and exits, saying so, for its operator to restart it (as
			// this loop does); any other end before the kill is a failure.
			t.Fatalf("instance %s ended before its kill: %v\n%s", in.id, err, in.p.Stderr())
		}
		start(in)
		kills++
	}
	for in := range resume {
		in.p.Cmd.Process.Signal(syscall.SIGCONT)
		in.stopped = false
	}
	t.Logf("%d kills, %d stops while producing; %d records read so far", kills, stops, f.n)
	f.waitFinals(t, tumbleOracle(evs), 3*time.Minute)
	t.Logf("finals complete; %d records read", f.n)
}
