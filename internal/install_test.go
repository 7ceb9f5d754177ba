package internal_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// installVersion is the version the test releases the checkout at.
const installVersion = "v0.0.0-installtest"

// TestInstallFromRelease: `go install github.com/ubiksql/ubik/cmd/ubik@VERSION`
// works for a release made by scripts/release.sh. The script writes the
// release of this checkout as a module proxy; go install runs outside the
// workspace (GOWORK=off) with an empty GOPATH and module cache, fetching the
// repository's modules from that proxy only (no checksum database knows
// them) and every other module through the proxy go env names (after the
// local module cache, which holds what that proxy served before), each
// checked against the checksum database as a user's install is. The
// installed binary must report the version, be built from the released
// modules at that version and without kfake, and run a query.
func TestInstallFromRelease(t *testing.T) {
	root := filepath.Dir(testenv.GoWork(t))
	proxy := t.TempDir()
	release := exec.Command("bash", "scripts/release.sh", "--proxy", proxy, installVersion)
	release.Dir = root
	if out, err := release.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh --proxy: %v\n%s", err, out)
	}

	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	env := append(os.Environ(),
		"GOWORK=off",
		// -modcacherw: the test's module cache can be removed; -trimpath:
		// the build cache keys a module's packages by module and version,
		// not by the (temporary) directory, so a second run compiles only
		// what changed.
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOPATH="+filepath.Join(home, "gopath"),
		"GOMODCACHE="+filepath.Join(home, "modcache"),
		"GOBIN="+bin,
		"GOPROXY="+strings.Join([]string{fileURL(proxy), fileURL(filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download")), goEnv(t, "GOPROXY")}, ","),
		"GONOSUMDB=github.com/ubiksql/ubik",
		"GOPRIVATE=", "GONOPROXY=",
	)
	install := exec.Command("go", "install", "github.com/ubiksql/ubik/cmd/ubik@"+installVersion)
	install.Dir = home // no go.mod or go.work around it
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install github.com/ubiksql/ubik/cmd/ubik@%s: %v\n%s", installVersion, err, out)
	}
	ubik := filepath.Join(bin, "ubik")

	out, err := exec.Command(ubik, "version").Output()
	if err != nil {
		t.Fatalf("ubik version: %v", err)
	}
	if want := regexp.MustCompile(`^ubik ` + regexp.QuoteMeta(installVersion) + ` go1\.\S+ \S+/\S+\n$`); !want.Match(out) {
		t.Errorf("ubik version: %q, want %s", out, want)
	}
	checkInstalledModules(t, ubik)

	run := exec.Command(ubik, "run", "examples/merchant_totals.sql", "--input", "examples/events.jsonl", "--no-progress")
	run.Dir = root
	var stderr strings.Builder
	run.Stderr = &stderr
	got, err := run.Output()
	if err != nil {
		t.Fatalf("ubik run: %v\n%s", err, stderr.String())
	}
	final := `["initech", "2026-07-18 10:04:00"]` + "\t" + `{"merchant": "initech", "window_start": "2026-07-18 10:04:00", "orders": 8, "total": 1899.08, "biggest": 400.86}` + "\n"
	if !strings.HasSuffix(string(got), final) || !strings.Contains(stderr.String(), "401 events read, 1 malformed") {
		t.Errorf("ubik run of the README's example: last record and summary not as expected\nstdout ends %q\nstderr %s", tail(string(got), 200), stderr.String())
	}
}

// checkInstalledModules: the binary's build info (go version -m) has every
// repository module at installVersion, none at another version, and no
// kfake (the patched broker is a test dependency, never the command's).
func checkInstalledModules(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	repo := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "mod" && f[0] != "dep" && f[0] != "=>") {
			continue
		}
		if f[0] == "=>" {
			t.Errorf("the installed binary has a replaced module: %s", line)
		}
		if strings.HasPrefix(f[1], "github.com/twmb/franz-go/pkg/kfake") {
			t.Errorf("the installed binary links kfake: %s", line)
		}
		if f[1] == "github.com/ubiksql/ubik" || strings.HasPrefix(f[1], "github.com/ubiksql/ubik/") {
			repo[f[1]] = true
			if f[2] != installVersion {
				t.Errorf("the installed binary has %s at %s, want %s", f[1], f[2], installVersion)
			}
		}
	}
	for _, m := range []string{"cmd/ubik", "internal/cli", "land", "land/landprom", "usage"} {
		if !repo["github.com/ubiksql/ubik/"+m] {
			t.Errorf("the installed binary's build info has no github.com/ubiksql/ubik/%s:\n%s", m, out)
		}
	}
	if !repo["github.com/ubiksql/ubik"] {
		t.Errorf("the installed binary's build info has no github.com/ubiksql/ubik:\n%s", out)
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
