//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A --state-dir run holds, for its whole life, an exclusive flock on the
// state dir's lock file and on every output file it resumes: two runs
// over one state dir (or one output) would interleave their writes and
// cut each other's files back. The kernel drops a flock when its holder
// exits, kill -9 included, so a crash never leaves a stale lock; the pid
// written into the lock file only names the holder in the error.

// lockStateDir takes the lock of state dir dir, or fails at once naming
// the process that holds it.
func lockStateDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, "lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state dir %s: lock %s: %w", dir, p, err)
		}
		return nil, fmt.Errorf("%w: state dir %s is held by %s (lock file %s); two runs over one state dir would corrupt its outputs: wait for that run to end or stop it, or give this run another --state-dir",
			ErrStateInUse, dir, holderName(pidOf(p, f)), p)
	}
	// The pid is informative only: the lock is the flock, so a reader
	// that catches the file empty or half written just names no pid.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// pidOf returns the pid recorded in lock file p, or else the holder's
// pid from the kernel's lock table, or 0.
func pidOf(p string, f *os.File) int {
	if b, err := os.ReadFile(p); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
	}
	return flockHolder(f)
}

func holderName(pid int) string {
	if pid <= 0 {
		return "another process"
	}
	return fmt.Sprintf("process %d", pid)
}

// lockOutput takes an exclusive flock on output f (path p), before
// anything cuts it back, or fails at once naming the holder.
func lockOutput(f *os.File, p string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("output %s: lock: %w", p, err)
	}
	pid := flockHolder(f)
	if pid == os.Getpid() {
		return fmt.Errorf("%w: output %s is named twice in this run; give each output its own file", ErrUsage, p)
	}
	return fmt.Errorf("%w: output %s is written by %s, another run with --state-dir; wait for it to end or stop it, or write to another file",
		ErrStateInUse, p, holderName(pid))
}

// flockHolder finds, in Linux's /proc/locks, the pid holding a flock on
// f's file; 0 when it cannot tell.
func flockHolder(f *os.File) int {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	dev := uint64(st.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	lf, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer lf.Close()
	sc := bufio.NewScanner(lf)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9978111 0 EOF"; a waiter's
		// line has "->" after the number.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fs[4]); err == nil {
			return pid
		}
	}
	return 0
}
