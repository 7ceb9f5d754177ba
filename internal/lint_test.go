// Package internal_test enforces the import direction and the module map of
// DESIGN.md: the core never imports a lander, a store SDK or Kafka, the
// Kafka runtime never imports a lander (the record header codec they share
// is in changelog), the hosts that run an operator (kafka/, internal/cli)
// reach it only through the one driver, internal/drive, never by importing
// exec, and no package or test of the root module imports another module
// of the repository or a host-side SDK, so an embedder's module graph holds
// none of them. The hosts of the public API import of the repository only
// what they may: the C ABI the root package and changelog, the command line
// those, the Kafka runtime, the landers and the usage log.
package internal_test

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// rootModule is the engine's module path.
const rootModule = "github.com/ubiksql/ubik"

// storeSDKs are the store clients only landers and usage logs may import.
func storeSDKs() []string {
	return []string{"github.com/redis/", "github.com/jackc/", "github.com/aws/", "github.com/ClickHouse/"}
}

// hostSDKs are the store clients and the CLI's own libraries (metrics,
// progress bar): the modules of the host side, never the root module's.
func hostSDKs() []string {
	return append(storeSDKs(), "github.com/prometheus/", "github.com/schollz/")
}

// rule is one import-direction rule: the packages pkgs (and, with tests,
// their test files) must not depend on anything under forbidden.
type rule struct {
	name      string
	pkgs      []string
	tests     bool
	forbidden []string
}

func coreRule(pkgs ...string) rule {
	return rule{name: "the core", pkgs: pkgs, forbidden: append([]string{
		"github.com/ubiksql/ubik/land", "github.com/ubiksql/ubik/usage", "github.com/ubiksql/ubik/kafka",
		"github.com/twmb/", "github.com/ubiksql/ubik/internal/cli",
	}, storeSDKs()...)}
}

// moduleRule: the root module's packages and their tests import no other
// module of the workspace (nested ones: land, usage, internal/cli, ...) and
// no host SDK. Its go.mod would have to require them otherwise, and every
// program that embeds the engine would get them in its module graph.
func moduleRule(t *testing.T, pkgs ...string) rule {
	var others []string
	for _, m := range workspaceModules(t) {
		if m.path != rootModule {
			others = append(others, m.path)
		}
	}
	if len(others) == 0 {
		t.Fatal("go.work lists no module besides the root one")
	}
	return rule{name: "the root module", pkgs: pkgs, tests: true, forbidden: append(others, hostSDKs()...)}
}

func kafkaRule(pkgs ...string) rule {
	return rule{name: "kafka", pkgs: pkgs, tests: true, forbidden: append([]string{
		"github.com/ubiksql/ubik/land", "github.com/ubiksql/ubik/usage", "github.com/ubiksql/ubik/internal/cli",
	}, storeSDKs()...)}
}

// under reports whether the import path dep is f or below it. An f that
// ends in "/" is a plain prefix (a host or an owner).
func under(dep, f string) bool {
	if strings.HasSuffix(f, "/") {
		return strings.HasPrefix(dep, f)
	}
	return dep == f || strings.HasPrefix(dep, f+"/")
}

// violations runs go list -deps in dir over r's packages and returns every
// import edge that crosses r: "A imports B" where A is allowed and B is
// forbidden, so each violation names the file's package to fix.
func violations(t *testing.T, dir string, r rule) []string {
	t.Helper()
	args := []string{"list", "-deps", "-test=" + strconv.FormatBool(r.tests),
		"-f", `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}`}
	cmd := exec.Command("go", append(args, r.pkgs...)...)
	cmd.Dir = dir
	// The fixture imports a lander, which is in another module: resolve
	// through the repository's workspace also when the test runs without.
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	bad := func(p string) bool {
		p, _, _ = strings.Cut(p, " ") // "pkg [pkg.test]" is pkg's test variant
		return slices.ContainsFunc(r.forbidden, func(f string) bool { return under(p, f) })
	}
	var vs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, "\t")
		if pkg == "" || bad(pkg) {
			continue
		}
		for _, imp := range strings.Fields(imps) {
			if bad(imp) {
				vs = append(vs, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

func TestImportDirection(t *testing.T) {
	for _, r := range []rule{
		coreRule(".", "./internal/types", "./changelog", "./internal/sql/...", "./internal/exec"),
		kafkaRule("./kafka/..."),
		// In workspace mode ./... at the root matches the root module's
		// packages only; each nested module is matched from its own dir.
		moduleRule(t, "./..."),
	} {
		for _, v := range violations(t, "..", r) {
			t.Errorf("%s must not depend on it: %s", r.name, v)
		}
	}
}

// TestImportDirectionControl: the checker catches a deliberate bad import.
// testdata/badimport imports land/kafkasrc (which imports franz-go, and is
// in the land module), so under each rule it must report exactly that edge.
func TestImportDirectionControl(t *testing.T) {
	const (
		fixture = "github.com/ubiksql/ubik/internal/testdata/badimport"
		lander  = "github.com/ubiksql/ubik/land/kafkasrc"
	)
	want := []string{fixture + " imports " + lander}
	for _, r := range []rule{coreRule("./testdata/badimport"), kafkaRule("./testdata/badimport"), moduleRule(t, "./testdata/badimport")} {
		if got := violations(t, ".", r); !slices.Equal(got, want) {
			t.Errorf("%s over the fixture: %q, want %q", r.name, got, want)
		}
	}
}

// execPkg is the operator's package, which only the driver and the core
// import.
const execPkg = "github.com/ubiksql/ubik/internal/exec"

// driverRule: the hosts reach the operator through internal/drive.
func driverRule(pkgs ...string) rule {
	return rule{name: "a host of the driver", pkgs: pkgs, tests: true, forbidden: []string{execPkg}}
}

// directViolations runs go list in dir over r's packages and returns every
// direct import (of a package or, with tests, of its test files) of a
// package under r.forbidden. Only direct imports count: the driver that
// the packages use imports exec itself, so go list -deps would show exec
// below every one of them.
func directViolations(t *testing.T, dir string, r rule) []string {
	t.Helper()
	format := `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}`
	if r.tests {
		format += ` {{join .TestImports " "}} {{join .XTestImports " "}}`
	}
	cmd := exec.Command("go", append([]string{"list", "-f", format}, r.pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t)) // internal/cli is its own module
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	var vs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, "\t")
		for _, imp := range strings.Fields(imps) {
			if slices.ContainsFunc(r.forbidden, func(f string) bool { return under(imp, f) }) {
				vs = append(vs, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

func TestDriverImports(t *testing.T) {
	r := driverRule("./kafka/...", "./internal/cli/...")
	for _, v := range directViolations(t, "..", r) {
		t.Errorf("%s must reach the operator through internal/drive: %s", r.name, v)
	}
}

// TestDriverImportsControl: the checker catches a deliberate direct
// import of exec (testdata/badexec), and does not count the driver's own
// import of exec against a package that imports only the driver
// (testdata/drivehost, which has exec among its dependencies).
func TestDriverImportsControl(t *testing.T) {
	const fixture = "github.com/ubiksql/ubik/internal/testdata/badexec"
	want := []string{fixture + " imports " + execPkg}
	if got := directViolations(t, ".", driverRule("./testdata/badexec")); !slices.Equal(got, want) {
		t.Errorf("the driver rule over the fixture: %q, want %q", got, want)
	}
	if got := directViolations(t, ".", driverRule("./testdata/drivehost")); len(got) != 0 {
		t.Errorf("the driver rule over a package that imports only the driver: %q, want none", got)
	}
}

// internalPrefix is every package an embedder cannot import.
const internalPrefix = "github.com/ubiksql/ubik/internal/"

// allowRule: of this repository's packages, the packages pkgs (and, with
// tests, their test files) import directly only the root package (when
// root is set) and those under allowed. Whatever else they need, the root
// package (or, for the command line, the Kafka runtime) owns.
type allowRule struct {
	name    string
	pkgs    []string
	tests   bool
	root    bool
	allowed []string
	testing []string // further packages the test files may import (test helpers)
}

// embedderRule: a program built on the public API (the C ABI is one)
// imports the root package and changelog, never another package of the
// repository.
func embedderRule(pkgs ...string) allowRule {
	return allowRule{name: "an embedder of the public API", pkgs: pkgs, root: true,
		allowed: []string{rootModule + "/changelog"}}
}

// cliRule: the command line is a host of the public API: the root
// package, changelog, the Kafka runtime, the landers and the usage log
// (and, in its tests, the test helpers).
func cliRule(pkgs ...string) allowRule {
	return allowRule{name: "the command line", pkgs: pkgs, tests: true, root: true,
		allowed: []string{rootModule + "/changelog", rootModule + "/kafka", rootModule + "/land", rootModule + "/usage", rootModule + "/internal/cli"},
		testing: []string{rootModule + "/internal/testenv", rootModule + "/internal/crashtest"}}
}

// allowViolations runs go list in dir over r's packages and returns every
// direct import of a package of the repository that r does not allow.
func allowViolations(t *testing.T, dir string, r allowRule) []string {
	t.Helper()
	format := `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}{{"\t"}}`
	if r.tests {
		format += `{{join .TestImports " "}} {{join .XTestImports " "}}`
	}
	cmd := exec.Command("go", append([]string{"list", "-f", format}, r.pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t)) // internal/cli is its own module
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	ok := func(imp string, allowed []string) bool {
		if imp != rootModule && !strings.HasPrefix(imp, rootModule+"/") {
			return true // not the repository's
		}
		if imp == rootModule {
			return r.root
		}
		return slices.ContainsFunc(allowed, func(a string) bool { return under(imp, a) })
	}
	var vs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		for i, imps := range parts[1:] {
			allowed := r.allowed
			if i == 1 { // the test files'
				allowed = append(slices.Clone(r.allowed), r.testing...)
			}
			for _, imp := range strings.Fields(imps) {
				if !ok(imp, allowed) {
					vs = append(vs, parts[0]+" imports "+imp)
				}
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

func TestEmbedderImports(t *testing.T) {
	r := embedderRule("./capi/...")
	for _, v := range allowViolations(t, "..", r) {
		t.Errorf("%s must reach the engine through the root package: %s", r.name, v)
	}
}

func TestCLIImports(t *testing.T) {
	r := cliRule("./internal/cli/...")
	for _, v := range allowViolations(t, "..", r) {
		t.Errorf("%s must reach the engine through the root package (or the Kafka runtime's API): %s", r.name, v)
	}
}

// TestPublicImportsControl: the rules catch a direct import of an
// internal package (testdata/badexec imports internal/exec,
// testdata/drivehost internal/drive) and, for an embedder, of a public
// package besides the root and changelog (testdata/badimport imports a
// lander); a package that imports only the root package and changelog
// (testdata/embedder) passes both.
func TestPublicImportsControl(t *testing.T) {
	const fixtures = "github.com/ubiksql/ubik/internal/testdata/"
	for _, c := range []struct {
		r    allowRule
		want []string
	}{
		{embedderRule("./testdata/badexec"), []string{fixtures + "badexec imports " + execPkg}},
		{embedderRule("./testdata/badimport"), []string{fixtures + "badimport imports " + rootModule + "/land/kafkasrc"}},
		{embedderRule("./testdata/embedder"), nil},
		{cliRule("./testdata/drivehost"), []string{fixtures + "drivehost imports " + rootModule + "/internal/drive"}},
		{cliRule("./testdata/badexec"), []string{fixtures + "badexec imports " + execPkg}},
		{cliRule("./testdata/badimport"), nil}, // a lander: the command line's
		{cliRule("./testdata/embedder"), nil},
	} {
		if got := allowViolations(t, ".", c.r); !slices.Equal(got, c.want) {
			t.Errorf("%s over %s: %q, want %q", c.r.name, c.r.pkgs[0], got, c.want)
		}
	}
}
