package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStateDirLock starts a `ubik run --state-dir` process, stops it
// (SIGSTOP) once it holds the state dir, and checks that a second run over
// the same state dir, and one over another state dir writing the same
// output, fail at once with status 1 naming the holder's pid, touching
// nothing; then kills the holder with SIGKILL and checks that the same
// command resumes (the kernel released the lock) to the uninterrupted
// run's changelog.
func TestStateDirLock(t *testing.T) {
	bin := buildUbik(t)
	input := crashInput(t, 400_000)
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, []byte(crashSQLFinal), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", input, "--output", out, "--format", "jsonl", "--no-progress", "--quiet"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "5ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref.jsonl")
	if out, err := exec.Command(bin, args(ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	holder := startLockHolder(t, bin, args(got, state), state)
	defer holder.Process.Kill()

	pid := strconv.Itoa(holder.Process.Pid)
	for _, tc := range []struct{ name, state, want string }{
		{"same state dir", state, "is held by process " + pid},
		{"same output", filepath.Join(dir, "other"), "output " + got + " is written by process " + pid},
	} {
		before, _ := os.ReadFile(got)
		start := time.Now()
		out, err := exec.Command(bin, args(got, tc.state)...).CombinedOutput()
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Fatalf("%s: second run: %v, want exit 1 with %q:\n%s", tc.name, err, tc.want, out)
		}
		if after, _ := os.ReadFile(got); !bytes.Equal(before, after) {
			t.Fatalf("%s: the refused run changed the output (%d bytes, then %d)", tc.name, len(before), len(after))
		}
		t.Logf("%s: refused in %v: %s", tc.name, took.Round(time.Millisecond), strings.TrimSpace(string(out)))
		if took > 5*time.Second {
			t.Fatalf("%s: the refusal took %v", tc.name, took)
		}
	}

	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("restart after kill -9 of the holder: %v\n%s", err, out)
	}
	refB, _ := os.ReadFile(ref)
	gotB, _ := os.ReadFile(got)
	if len(refB) == 0 || !bytes.Equal(refB, gotB) {
		t.Fatalf("the resumed changelog differs from the uninterrupted run's (%d vs %d bytes)", len(refB), len(gotB))
	}
}

// startLockHolder starts bin with args and stops it with SIGSTOP once it
// has checkpointed into state (so it holds the state dir); a run that
// ends first is started again over a fresh state.
func startLockHolder(t *testing.T, bin string, args []string, state string) *exec.Cmd {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		os.RemoveAll(state)
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(filepath.Join(state, "checkpoint")); err == nil {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGSTOP)
		if procState(cmd.Process.Pid, 'T', time.Second) {
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatal("the holder finished before it could be stopped, 5 times")
	return nil
}

// procState waits up to d for process pid to be in state s (Linux's
// /proc/PID/stat: T stopped, Z finished).
func procState(pid int, s byte, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) {
			if b[i+2] == s {
				return true
			}
			if b[i+2] == 'Z' {
				return false
			}
		}
	}
	return false
}
