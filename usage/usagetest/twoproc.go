package usagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage"
)

// Environment variables that turn a test binary into the second writer.
const (
	childTargetEnv = "UBIK_USAGETEST_CHILD_TARGET"
	childStartEnv  = "UBIK_USAGETEST_CHILD_START_MS"
	childKeysEnv   = "UBIK_USAGETEST_CHILD_KEYS"
)

// MaybeChild must be called first in the backend test's TestMain. In the
// child process started by RunTwoProcesses it opens the log at target,
// writes its copies of the shared keys, prints its WriteResult as JSON and
// exits; in any other process it returns immediately.
func MaybeChild(open func(ctx context.Context, target string) (usage.Log, error)) {
	target := os.Getenv(childTargetEnv)
	if target == "" {
		return
	}
	err := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l, err := open(ctx, target)
		if err != nil {
			return err
		}
		defer l.Close()
		start, _ := strconv.ParseInt(os.Getenv(childStartEnv), 10, 64)
		n, _ := strconv.Atoi(os.Getenv(childKeysEnv))
		res, err := raceWrite(ctx, l, "child", 2, n, time.UnixMilli(start))
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "usagetest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// raceWrite waits until start, then writes keys race-0..race-(n-1) one per
// Write call (the narrowest race window), tagging each copy with who wrote
// it and a quantity that identifies the writer.
func raceWrite(ctx context.Context, l usage.Log, who string, q float64, n int, start time.Time) (usage.WriteResult, error) {
	time.Sleep(time.Until(start))
	var total usage.WriteResult
	for i := 0; i < n; i++ {
		r, err := l.Write(ctx, []usage.Event{ev("race-"+strconv.Itoa(i), ms(int64(i)), "race", q, "writer", usage.String(who))})
		if err != nil {
			return total, err
		}
		total.Inserted += r.Inserted
		total.Duplicates += r.Duplicates
	}
	return total, nil
}

// RunTwoProcesses races this process against a second OS process (this
// test binary re-executed, see MaybeChild) writing the same keys with
// different facts, then checks that every key is one logical row whose
// facts come wholly from one writer. exactCounts says whether the backend's
// WriteResult counts are exact under the race (PostgreSQL) or may be
// optimistic by one per raced key (ClickHouse).
func RunTwoProcesses(t *testing.T, l usage.Log, target string, exactCounts bool) {
	const n = 150
	start := time.Now().Add(1500 * time.Millisecond)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childTargetEnv+"="+target,
		childStartEnv+"="+strconv.FormatInt(start.UnixMilli(), 10),
		childKeysEnv+"="+strconv.Itoa(n),
	)
	var stdout, stderr bytesBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the second writer process: %v", err)
	}
	mine, err := raceWrite(ctxT(t), l, "parent", 1, n, start)
	if err != nil {
		t.Fatalf("parent writer: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second writer process: %v\n%s", err, stderr.String())
	}
	var theirs usage.WriteResult
	if err := json.Unmarshal(stdout.Bytes(), &theirs); err != nil {
		t.Fatalf("second writer output %q: %v", stdout.String(), err)
	}
	t.Logf("parent %+v, child %+v", mine, theirs)
	if mine.Inserted+mine.Duplicates != n || theirs.Inserted+theirs.Duplicates != n {
		t.Fatalf("each writer must account for all %d events: parent %+v child %+v", n, mine, theirs)
	}
	ins := mine.Inserted + theirs.Inserted
	if exactCounts && ins != n {
		t.Fatalf("inserted %d in total, want exactly %d", ins, n)
	}
	if ins < n || ins > 2*n {
		t.Fatalf("inserted %d in total, want between %d and %d", ins, n, 2*n)
	}
	tot := total(t, l, "race", Base, Base.Add(time.Hour))
	if tot.Count != n {
		t.Fatalf("count %d, want %d logical rows", tot.Count, n)
	}
	var sums []usage.Decimal
	listed := listAll(t, l, usage.ListQuery{Meter: "race", Limit: 40}, n, listWait)
	if len(listed) != n {
		t.Fatalf("listing has %d keys, want %d", len(listed), n)
	}
	for i := 0; i < n; i++ {
		k := "race-" + strconv.Itoa(i)
		s, ok, err := l.Get(ctxT(t), k)
		if err != nil || !ok {
			t.Fatalf("Get(%s): %v %v", k, ok, err)
		}
		who := s.Dims["writer"].Str()
		if (who == "parent") != (s.Quantity == "1") || (who == "child") != (s.Quantity == "2") {
			t.Fatalf("Get(%s) mixes the two writers' facts: %+v", k, s)
		}
		if l := listed[k]; l.Quantity != s.Quantity || !l.Dims["writer"].Equal(s.Dims["writer"]) {
			t.Fatalf("%s: listing %+v disagrees with Get %+v", k, l, s)
		}
		sums = append(sums, s.Quantity)
	}
	want, _ := usage.SumDecimals(sums...)
	if tot.Sum != want {
		t.Fatalf("sum %s, want %s (the sum of the winners)", tot.Sum, want)
	}
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.b)+len(p) > 1<<20 { // bounded: the child prints one line; the rest is dropped
		p = p[:max(0, 1<<20-len(w.b))]
	}
	w.b = append(w.b, p...)
	return n, nil
}
func (w *bytesBuffer) Bytes() []byte  { return w.b }
func (w *bytesBuffer) String() string { return string(w.b) }
