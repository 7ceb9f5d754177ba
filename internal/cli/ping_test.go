package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// stopSelf stops this process with SIGSTOP for about d: a child sends the
// SIGCONT.
func stopSelf(t *testing.T, d time.Duration) {
	t.Helper()
	pid := os.Getpid()
	cont := exec.Command("sh", "-c", fmt.Sprintf("sleep %.1f; kill -CONT %d", d.Seconds(), pid))
	if err := cont.Start(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := cont.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestRetryStalled: a check that timed out while the process was stopped
// (SIGSTOP: a supervisor, a paused container) is tried again; one that
// timed out while the process ran is a failure at once. The chaos test
// saw a just-restarted instance frozen inside its broker check exit with
// "cannot reach Kafka".
func TestRetryStalled(t *testing.T) {
	ctx := context.Background()
	calls := 0
	n, err := retryStalled(ctx, func(c context.Context) error {
		calls++
		if calls == 1 {
			stopSelf(t, 1500*time.Millisecond) // past the timeout, while stopped
			<-c.Done()
			return c.Err()
		}
		return nil
	}, time.Second, 4, 500*time.Millisecond)
	if err != nil || n != 2 {
		t.Fatalf("stopped during the first attempt: %d attempts, err %v; want 2, nil", n, err)
	}

	// The control: an attempt that times out with the process running
	// fails the check, without another attempt.
	n, err = retryStalled(ctx, func(c context.Context) error {
		<-c.Done()
		return c.Err()
	}, 300*time.Millisecond, 4, 2*time.Second) // a stall bound no scheduling delay reaches
	if err == nil || n != 1 {
		t.Fatalf("a silent broker: %d attempts, err %v; want 1 and an error", n, err)
	}

	// Every attempt stalled: the bound on attempts holds.
	n, err = retryStalled(ctx, func(c context.Context) error {
		stopSelf(t, 700*time.Millisecond)
		<-c.Done()
		return c.Err()
	}, 200*time.Millisecond, 3, 400*time.Millisecond)
	if err == nil || n != 3 {
		t.Fatalf("stalled every time: %d attempts, err %v; want 3 and an error", n, err)
	}

	// A stop of the caller ends it at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	n, err = retryStalled(cctx, func(c context.Context) error { return c.Err() }, time.Second, 4, 500*time.Millisecond)
	if err == nil || n != 1 {
		t.Fatalf("a canceled caller: %d attempts, err %v", n, err)
	}
}
