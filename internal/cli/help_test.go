package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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

// TestVersion: ubik version and ubik --version print the version linked in
// with -ldflags -X main.version, the VCS revision the binary was built from,
// the Go version and the platform. Go stamps the revision when it builds in
// a git checkout whose .git is a directory; in a git worktree (.git is a
// file) it stamps none.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ubik")
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags=-X main.version=v9.8.7-rc.1", "github.com/ubiksql/ubik/cmd/ubik")
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
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	want := regexp.MustCompile(`^ubik v9\.8\.7-rc\.1 revision ` + strings.TrimSpace(string(rev)) + ` (\(modified\) )?committed \S+ go1\.\S+` + platform + `$`)
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		want = regexp.MustCompile(`^ubik v9\.8\.7-rc\.1 go1\.\S+` + platform + `$`)
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if !want.Match(out) {
			t.Fatalf("%s: %q, want %s", arg, out, want)
		}
	}
}

// TestVersionOf: what ubik version prints from each kind of build.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-07-18T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name, linked string
		bi           *debug.BuildInfo
		want         string
	}{
		{"go build in a git checkout", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260718100000-abc123"}, Settings: vcs},
			"ubik v0.0.0-20260718100000-abc123 revision abc123 (modified) committed 2026-07-18T10:00:00Z go1.26.0" + platform},
		{"go install module@version", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			"ubik v1.2.3 go1.26.0" + platform},
		{"a release build with -ldflags -X", "v1.2.4", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"ubik v1.2.4 go1.26.0" + platform},
		{"-buildvcs=false", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"ubik (devel) go1.26.0" + platform + " (no version: built outside a git checkout or with -buildvcs=false, and without -ldflags -X main.version=VERSION)"},
		{"no build info", "", nil,
			"ubik (devel) " + runtime.Version() + platform + " (no version: built outside a git checkout or with -buildvcs=false, and without -ldflags -X main.version=VERSION)"},
	} {
		if got := versionOf(c.linked, c.bi, c.bi != nil); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
