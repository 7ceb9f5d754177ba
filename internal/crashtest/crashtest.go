// Package crashtest kills processes with SIGKILL for the tests that check
// a restart resumes where a crash left it: a `ubik run --state-dir`, a
// Kafka pipeline in a child copy of the test binary, a script host. It is
// the one place those tests start, kill (kill -9: no handler runs, no
// buffer is flushed) and reap their processes, so every one of them
// cleans up a process it left running and shows its stderr when the test
// fails.
package crashtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a started process.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // its exit, once done is closed

	mu             sync.Mutex
	stdout, stderr bytes.Buffer
}

// lockedWriter appends to a buffer of p under its lock: the process
// writes while the test may read.
type lockedWriter struct {
	p *Proc
	b *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.b.Write(b)
}

// Start starts cmd, keeping its stdout and stderr unless the command
// already sends them somewhere. When the test ends the process is killed
// if it still runs, and its stderr is logged if the test failed.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p, err := Launch(cmd)
	if err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			if s := p.Stderr(); s != "" {
				t.Logf("%s stderr:\n%s", cmd.Path, s)
			}
		}
	})
	return p
}

// Launch is Start for a caller without a test at hand, which must end the
// process itself (Kill, KillAfter, or its own end).
func Launch(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = lockedWriter{p, &p.stdout}
	}
	if cmd.Stderr == nil {
		cmd.Stderr = lockedWriter{p, &p.stderr}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Stdout is what the process wrote to its stdout so far (if Start kept it).
func (p *Proc) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// Stderr is what the process wrote to its stderr so far (if Start kept it).
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL and waits for the process to end. It reports whether
// the signal ended it; if the process had ended by itself, it returns
// false and the process's own exit error.
func (p *Proc) Kill() (killed bool, err error) {
	select {
	case <-p.done:
		return false, p.err
	default:
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, err
	}
	<-p.done
	return killedBySignal(p.Cmd), p.errUnlessKilled()
}

// KillAfter waits up to d for the process to end by itself, then kills
// it (Kill).
func (p *Proc) KillAfter(d time.Duration) (killed bool, err error) {
	select {
	case <-p.done:
		return false, p.err
	case <-time.After(d):
	}
	return p.Kill()
}

// Wait waits up to timeout for the process to end and returns its exit
// error; at the timeout it kills the process and fails the test.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
	}
	p.Kill()
	t.Fatalf("%s did not end within %v", p.Cmd.Path, timeout)
	return nil
}

// errUnlessKilled is the exit error, nil when SIGKILL ended the process.
func (p *Proc) errUnlessKilled() error {
	if killedBySignal(p.Cmd) {
		return nil
	}
	return p.err
}

func killedBySignal(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Self is a command that runs this test binary again with no test
// selected and env (KEY=VALUE) added: a package's init (or TestMain)
// sees the variable and runs the child's work instead of the tests.
func Self(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Loop kills a run again and again: it starts the command next returns,
// kills it with SIGKILL after a delay drawn from [lo, hi), and repeats
// until kills runs were killed. A run that ends before its kill must end
// cleanly (else the test fails); then restart is called (a state
// directory removed, so the next run has work to be killed in) and the
// loop goes on. Loop returns how many runs ended by themselves.
func Loop(t testing.TB, r *rand.Rand, kills int, lo, hi time.Duration, next func() *exec.Cmd, restart func()) (finished int) {
	t.Helper()
	for killed := 0; killed < kills; {
		p := Start(t, next())
		k, err := p.KillAfter(lo + time.Duration(r.Int64N(int64(hi-lo))))
		if err != nil {
			t.Fatalf("run: %v\n%s", err, p.Stderr())
		}
		if k {
			killed++
			continue
		}
		finished++
		restart()
	}
	return finished
}

// StepRun starts cmd stopped and lets it run in slices of slice (SIGCONT,
// sleep, SIGSTOP), then kills it with SIGKILL after steps slices unless
// it ended first: a run of a few milliseconds is still killed at a point
// of its own progress, not of the machine's clock. With steps < 0 it
// never kills (the count measures a whole run). It returns how many
// slices the process had and whether it was killed; err is the exit error
// of a process that ended by itself.
func StepRun(cmd *exec.Cmd, steps int, slice time.Duration) (given int, killed bool, err error) {
	p, err := Launch(cmd)
	if err != nil {
		return 0, false, err
	}
	proc := cmd.Process
	_ = proc.Signal(syscall.SIGSTOP)
	for i := 0; steps < 0 || i < steps; i++ {
		_ = proc.Signal(syscall.SIGCONT)
		select {
		case <-p.done:
			return i + 1, false, p.err
		case <-time.After(slice):
		}
		_ = proc.Signal(syscall.SIGSTOP)
	}
	killed, err = p.Kill()
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, p.Stderr())
	}
	return steps, killed, err
}
