package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stateDirRun runs crashSQLFinal over input in process with --state-dir
// state, a checkpoint every millisecond, writing out (with its dead
// letters and late events beside it).
func stateDirRun(t *testing.T, input, out, state string) (int, string) {
	t.Helper()
	sql := filepath.Join(t.TempDir(), "q.sql")
	os.WriteFile(sql, []byte(crashSQLFinal), 0o644)
	env, _, errb := runTestEnv("")
	code := Main(context.Background(), env, []string{"run", sql, "--input", input, "--output", out, "--format", "jsonl",
		"--dead-letter", out + ".dead", "--late-output", out + ".late", "--no-progress", "--quiet",
		"--state-dir", state, "--checkpoint-interval", "1ms"})
	return code, errb.String()
}

// TestStateDirPlantedLinks plants symlinks where a run writes its
// checkpoint's temporary file (the name it used to write), and its lock
// file, and checks that their targets are never written: the temporary
// is a fresh name made with O_EXCL, the lock file is opened with
// O_NOFOLLOW (the run is refused, naming it).
func TestStateDirPlantedLinks(t *testing.T) {
	input := crashInput(t, 20_000)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("keep me\n"), 0o600)
	if err := os.Symlink(secret, filepath.Join(state, "checkpoint.tmp")); err != nil {
		t.Fatal(err)
	}
	if code, errs := stateDirRun(t, input, filepath.Join(dir, "out.jsonl"), state); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(secret); string(b) != "keep me\n" {
		t.Fatalf("the checkpoint wrote through the planted checkpoint.tmp link: the target holds %d bytes", len(b))
	}
	if fi, err := os.Lstat(filepath.Join(state, "checkpoint")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("checkpoint: %v, %v", fi, err)
	}
	if m, _ := filepath.Glob(filepath.Join(state, ckptTempPattern)); len(m) != 0 {
		t.Fatalf("temporaries left behind: %v", m)
	}

	state2 := filepath.Join(dir, "state2")
	os.Mkdir(state2, 0o700)
	os.Symlink(secret, filepath.Join(state2, "lock"))
	code, errs := stateDirRun(t, input, filepath.Join(dir, "out2.jsonl"), state2)
	if code != 1 || !strings.Contains(errs, "lock file") {
		t.Fatalf("a planted lock link: exit %d, %s", code, errs)
	}
	if b, _ := os.ReadFile(secret); string(b) != "keep me\n" {
		t.Fatalf("the lock wrote through the planted link: the target holds %q", b)
	}
}

// TestStateDirModes checks that a --state-dir run makes its state dir
// 0700 and its state and output files 0600, less what the umask takes.
func TestStateDirModes(t *testing.T) {
	input := crashInput(t, 20_000)
	for _, umask := range []int{0, 0o022, 0o027, 0o077} {
		dir := t.TempDir()
		state := filepath.Join(dir, "a", "state")
		out := filepath.Join(dir, "out.jsonl")
		old := syscall.Umask(umask)
		code, errs := stateDirRun(t, input, out, state)
		syscall.Umask(old)
		if code != 0 {
			t.Fatalf("umask %03o: exit %d: %s", umask, code, errs)
		}
		want := func(p string, mode os.FileMode) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if mode &^= os.FileMode(umask); fi.Mode().Perm() != mode {
				t.Errorf("umask %03o: %s has mode %v, want %v", umask, p, fi.Mode().Perm(), mode)
			}
		}
		want(filepath.Join(dir, "a"), 0o700)
		want(state, 0o700)
		for _, p := range []string{filepath.Join(state, "checkpoint"), filepath.Join(state, "lock"), out, out + ".dead", out + ".late"} {
			want(p, 0o600)
		}
	}
}
