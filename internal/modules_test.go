package internal_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// module is one module of the workspace.
type module struct{ path, dir string }

// workspaceModules lists go.work's modules (go list -m in workspace mode).
func workspaceModules(t *testing.T) []module {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var ms []module
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, d, _ := strings.Cut(line, "\t")
		ms = append(ms, module{p, d})
	}
	return ms
}

// goModJSON is the part of `go mod edit -json` (and `go work edit -json`)
// these tests read.
type goModJSON struct {
	Use     []struct{ DiskPath string }
	Require []struct {
		Path     string
		Indirect bool
	}
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func editJSON(t *testing.T, args ...string) goModJSON {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var g goModJSON
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return g
}

const kfake = "github.com/twmb/franz-go/pkg/kfake"

// TestWorkspaceListsEveryModule: every go.mod in the repository is a module
// of go.work (so CI, which tests go.work's modules, tests it), except the
// patched kfake, which go.work and every module that imports kfake replace
// upstream's with.
func TestWorkspaceListsEveryModule(t *testing.T) {
	gowork := testenv.GoWork(t)
	root := filepath.Dir(gowork)
	work := editJSON(t, "work", "edit", "-json", gowork)
	used := map[string]bool{}
	for _, u := range work.Use {
		used[filepath.Join(root, u.DiskPath)] = true
	}
	patched := filepath.Join(root, "third_party", "kfake")
	var workReplacesKfake bool
	for _, r := range work.Replace {
		if r.Old.Path == kfake && filepath.Join(root, r.New.Path) == patched {
			workReplacesKfake = true
		}
	}
	if !workReplacesKfake {
		t.Errorf("go.work does not replace %s with ./third_party/kfake", kfake)
	}
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" {
			return nil
		}
		dir := filepath.Dir(p)
		found = append(found, dir)
		rel, _ := filepath.Rel(root, dir)
		if dir != patched && !used[dir] {
			t.Errorf("%s is a module that go.work does not use: add it (go work use ./%s), so the tests run it", p, rel)
		}
		mod := editJSON(t, "mod", "edit", "-json", p)
		direct := slices.ContainsFunc(mod.Require, func(r struct {
			Path     string
			Indirect bool
		}) bool {
			return r.Path == kfake && !r.Indirect
		})
		if !direct {
			return nil
		}
		if !slices.ContainsFunc(mod.Replace, func(r struct {
			Old struct{ Path, Version string }
			New struct{ Path, Version string }
		}) bool {
			return r.Old.Path == kfake && filepath.Join(dir, r.New.Path) == patched
		}) {
			t.Errorf("%s imports kfake but does not replace it with the patched copy in third_party/kfake", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for u := range used {
		if !slices.Contains(found, u) {
			t.Errorf("go.work uses %s, which has no go.mod", u)
		}
	}
	if len(found) < 3 {
		t.Fatalf("found only %d go.mod files under %s", len(found), root)
	}
}

// hostModules are the module paths an embedder of the engine must not get.
var hostModules = []string{
	"github.com/aws/aws-sdk-go-v2", "github.com/jackc/pgx", "github.com/prometheus/client_golang",
	"github.com/redis/go-redis", "github.com/schollz/progressbar",
}

// TestEmbedderModuleGraph: a new module whose program imports only the
// engine (github.com/ubiksql/ubik) gets none of the host side's modules in
// `go list -m all` after `go mod tidy`, and builds, outside the workspace.
// The control, a module that imports land/pglander, must see pgx, so the
// check is known to see a store SDK when there is one.
func TestEmbedderModuleGraph(t *testing.T) {
	root := filepath.Dir(testenv.GoWork(t))
	graph := embedderGraph(t, root, "github.com/ubiksql/ubik", nil)
	for _, m := range graph {
		for _, h := range hostModules {
			if strings.HasPrefix(m, h) {
				t.Errorf("an embedder of the engine gets %s", m)
			}
		}
		if p, _, _ := strings.Cut(m, " "); strings.HasPrefix(p, rootModule+"/") {
			t.Errorf("an embedder of the engine gets the repository's module %s", m)
		}
	}
	t.Logf("an embedder's module graph: %d modules", len(graph))

	ctl := embedderGraph(t, root, "github.com/ubiksql/ubik/land/pglander", []string{"land"})
	if !slices.ContainsFunc(ctl, func(m string) bool { return strings.HasPrefix(m, "github.com/jackc/pgx/v5 ") }) {
		t.Errorf("the control, a module that imports land/pglander, does not see pgx: %q", ctl)
	}
	// A host that lands into PostgreSQL gets no Prometheus client: the
	// metrics are land/landprom, a module of their own.
	for _, m := range ctl {
		if strings.HasPrefix(m, "github.com/prometheus/") {
			t.Errorf("a module that imports only land/pglander gets %s", m)
		}
	}
	prom := embedderGraph(t, root, "github.com/ubiksql/ubik/land/landprom", []string{"land", "land/landprom"})
	if !slices.ContainsFunc(prom, func(m string) bool { return strings.HasPrefix(m, "github.com/prometheus/client_golang ") }) {
		t.Errorf("the control, a module that imports land/landprom, does not see client_golang: %q", prom)
	}
}

// embedderGraph makes a module in a temporary directory whose main imports
// pkg, requiring the root module and the nested modules named in nested
// (replaced with this checkout), tidies and builds it with GOWORK=off, and
// returns `go list -m all`. The go.sum files of the modules it replaces
// seed its own, so no checksum has to be looked up that the repository
// does not already pin.
func embedderGraph(t *testing.T, root, pkg string, nested []string) []string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module example.com/embedder\n\ngo 1.26.0\n\nrequire " + rootModule + " v0.0.0\n\nreplace " + rootModule + " => " + root + "\n"
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nested {
		gomod += "\nrequire " + rootModule + "/" + n + " v0.0.0\n\nreplace " + rootModule + "/" + n + " => " + filepath.Join(root, n) + "\n"
		s, err := os.ReadFile(filepath.Join(root, n, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s...)
	}
	main := "// Command embedder imports " + pkg + " and nothing else.\npackage main\n\nimport _ \"" + pkg + "\"\n\nfunc main() {}\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sums, "main.go": []byte(main)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module importing %s: %v\n%s", strings.Join(args, " "), pkg, err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", filepath.Join(dir, "embedder"), ".")
	return strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n")
}
