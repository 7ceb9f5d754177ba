package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// TestHelpEveryCommand: --help, -h and "ubik help CMD" of every command
// print on stdout, exit 0, and end with two or three examples.
func TestHelpEveryCommand(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 7 {
		t.Fatalf("commands: %v", names)
	}
	check := func(what, out, errb string, code int) {
		t.Helper()
		if code != 0 || errb != "" {
			t.Fatalf("%s: exit %d, stderr %q", what, code, errb)
		}
		_, ex, ok := strings.Cut(out, "\nexamples:\n")
		lines := strings.Split(strings.TrimRight(ex, "\n"), "\n")
		if !ok || len(lines) < 2 || len(lines) > 3 {
			t.Fatalf("%s: the help does not end with two or three examples:\n%s", what, out)
		}
		for _, l := range lines {
			if !strings.Contains(l, "ubik ") {
				t.Fatalf("%s: example %q is not a ubik command", what, l)
			}
		}
	}
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {n, "-h"}, {"help", n}} {
			out, errb, code := runArgs(t, "", args...)
			check(strings.Join(args, " "), out, errb, code)
		}
	}
	for _, sub := range []string{"write", "aggregate", "list", "get"} {
		out, errb, code := runArgs(t, "", "usage", sub, "--help")
		check("usage "+sub+" --help", out, errb, code)
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		out, errb, code := runArgs(t, "", args...)
		check(args[0], out, errb, code)
	}
	// A mistake is still a usage error on stderr.
	if out, errb, code := runArgs(t, "", "run", "--no-such-flag"); code != ExitUsage || out != "" || !strings.Contains(errb, "-no-such-flag") {
		t.Fatalf("bad flag: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	for _, args := range [][]string{{"run", "a.sql", "b.sql"}, {"run", "--quiet", "a.sql", "extra"}, {"explain", "a.sql", "b.sql"}, {"infer", "a.jsonl", "b"}} {
		if _, errb, code := runArgs(t, "", args...); code != ExitUsage || !strings.Contains(errb, "unexpected argument") {
			t.Fatalf("ubik %v: exit %d, %s", args, code, errb)
		}
	}
	if _, errb, code := runArgs(t, ""); code != ExitUsage || !strings.Contains(errb, "commands:") {
		t.Fatalf("no command: exit %d, %s", code, errb)
	}
}

// TestVersion: ubik version and ubik --version print the module version
// and the VCS revision the binary was built from. Go stamps the revision
// when it builds in a git checkout whose .git is a directory; in a git
// worktree (.git is a file) it stamps none, and the command says so.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ubik")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ubiksql/ubik/cmd/ubik")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "GOWORK="+testenv.GoWork(t)) // cmd/ubik is its own module
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// In a checkout Go stamps a pseudo-version (v0.0.0-DATE-REV) or
	// (devel), then the revision.
	want := regexp.MustCompile(`^ubik (\(devel\)|v\S+) revision ` + strings.TrimSpace(string(rev)) + ` `)
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		want = regexp.MustCompile(`^ubik \(devel\) \(no VCS revision in the build info\) `)
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if s := string(out); !want.MatchString(s) || !strings.Contains(s, " go1.") {
			t.Fatalf("%s: %q, want %s", arg, s, want)
		}
	}
	// The rendering of a released build.
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-07-18T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf(bi, true), "ubik v1.2.3 revision abc123 (modified) committed 2026-07-18T10:00:00Z go1.26.0"; got != want {
		t.Fatalf("versionOf: %q, want %q", got, want)
	}
}
