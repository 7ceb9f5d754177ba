package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalStop sends SIGINT and SIGTERM to `ubik run --state-dir` over a
// file: the run checkpoints, prints a one-line "stopped" summary, exits
// 130 or 143, and the same command then resumes to a changelog equal to an
// uninterrupted run's.
func TestSignalStop(t *testing.T) {
	bin := buildUbik(t)
	input := crashInput(t, 400_000)
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, []byte(crashSQLFinal), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", input, "--output", out, "--no-progress", "--stats-json", out + ".stats", "--dead-letter", out + ".dead"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref.tsv")
	if out, err := exec.Command(bin, args(ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	refB, _ := os.ReadFile(ref)
	for _, sig := range []struct {
		sig    syscall.Signal
		status int
		name   string
	}{{syscall.SIGINT, 130, "interrupted by SIGINT"}, {syscall.SIGTERM, 143, "terminated by SIGTERM"}} {
		t.Run(sig.sig.String(), func(t *testing.T) {
			got := filepath.Join(t.TempDir(), "got.tsv")
			state := filepath.Join(t.TempDir(), "state")
			stopped := false
			for attempt := 0; attempt < 20 && !stopped; attempt++ {
				os.RemoveAll(state)
				cmd := exec.Command(bin, args(got, state)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Signal once the run has checkpointed at least once, so it is
				// surely past its start and still reading.
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					if _, err := os.Stat(filepath.Join(state, "checkpoint")); err == nil {
						break
					}
					time.Sleep(time.Millisecond)
				}
				cmd.Process.Signal(sig.sig)
				err := cmd.Wait()
				if err == nil {
					continue // it finished before the signal: try again
				}
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != sig.status {
					t.Fatalf("exit %v, want %d:\n%s", err, sig.status, stderr.String())
				}
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if len(lines) != 1 || !strings.Contains(lines[0], "ubik: q: stopped ("+sig.name+") after line ") {
					t.Fatalf("stderr is not one stopped line:\n%s", stderr.String())
				}
				var s summary
				b, _ := os.ReadFile(got + ".stats")
				if err := json.Unmarshal(b, &s); err != nil || s.Stopped != sig.name || s.StoppedAtLine <= 0 || s.StoppedAtLine >= 400_000 {
					t.Fatalf("stats %s (%v)", b, err)
				}
				stopped = true
			}
			if !stopped {
				t.Fatal("every run finished before the signal")
			}
			out, err := exec.Command(bin, args(got, state)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "resuming from line") {
				t.Fatalf("resumed run: %v\n%s", err, out)
			}
			if gotB, _ := os.ReadFile(got); !bytes.Equal(refB, gotB) {
				t.Fatalf("after the stop and resume the changelog differs from the uninterrupted run (%d vs %d bytes)", len(refB), len(gotB))
			}
		})
	}
}
