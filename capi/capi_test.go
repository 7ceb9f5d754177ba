package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The library, the C test program (plain and with AddressSanitizer) and the
// ubik CLI are built once per test binary: the c-shared link is the slow
// part.
type artifacts struct {
	dir     string // libubik.so, ubik.h, ubik_test, ubik_test_asan, ubik
	lib     string
	cTest   string
	cAsan   string
	cli     string
	repo    string
	elapsed time.Duration
}

var built = sync.OnceValues(func() (*artifacts, error) {
	start := time.Now()
	repo, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ubik-capi-test-")
	if err != nil {
		return nil, err
	}
	a := &artifacts{
		dir: dir, repo: repo,
		lib: filepath.Join(dir, "libubik.so"), cTest: filepath.Join(dir, "ubik_test"),
		cAsan: filepath.Join(dir, "ubik_test_asan"), cli: filepath.Join(dir, "ubik"),
	}
	steps := [][]string{
		{"bash", "capi/build.sh"},
		{"gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
			"-fsanitize=address", "-fno-omit-frame-pointer", "-I" + dir, "capi/test/ubik_test.c",
			"-L" + dir, "-lubik", "-lpthread", "-Wl,-rpath," + dir, "-o", a.cAsan},
		{"go", "build", "-o", a.cli, "./cmd/ubik"},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "UBIK_BUILD_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	a.elapsed = time.Since(start)
	return a, nil
})

func build(t testing.TB) *artifacts {
	t.Helper()
	a, err := built()
	if err != nil {
		t.Fatalf("building the C ABI (gcc, go and bash are required): %v", err)
	}
	return a
}

func TestMain(m *testing.M) {
	code := m.Run()
	if a, err := built(); err == nil && a != nil {
		os.RemoveAll(a.dir)
	}
	os.Exit(code)
}

// run executes a command and returns its stdout, stderr and error.
func run(t testing.TB, env []string, name string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// asanEnv makes AddressSanitizer fail on leaks too (LeakSanitizer), with a
// distinct exit code.
var asanEnv = []string{"ASAN_OPTIONS=detect_leaks=1:exitcode=23:abort_on_error=0"}

func TestSelftestAddressSanitizer(t *testing.T) {
	t.Parallel()
	a := build(t)
	out, errOut, err := run(t, asanEnv, a.cAsan, "selftest")
	if err != nil || !strings.Contains(out, "selftest ok") {
		t.Fatalf("ubik_test selftest under ASan: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

func TestSelftestPlain(t *testing.T) {
	t.Parallel()
	a := build(t)
	out, errOut, err := run(t, nil, a.cTest, "selftest")
	if err != nil || !strings.Contains(out, "selftest ok") {
		t.Fatalf("ubik_test selftest: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

const volumeRecords = 100000

// 100k records through ubik_push_lines / ubik_next_keyed under
// LeakSanitizer: every record checked, no leak, no use of freed memory.
func TestVolumeLeakSanitizer(t *testing.T) {
	t.Parallel()
	a := build(t)
	out, errOut, err := run(t, asanEnv, a.cAsan, "volume", strconv.Itoa(volumeRecords))
	if err != nil || !strings.Contains(out, fmt.Sprintf("volume ok: %d records", volumeRecords)) {
		t.Fatalf("ubik_test volume under ASan/LSan: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// valgrindArgs: memcheck for leaks and for invalid accesses to heap blocks.
// Uninitialised-value tracking is off: memcheck cannot follow the Go
// runtime's own stacks and reports hundreds of false errors in them.
func valgrindArgs(a *artifacts, args ...string) []string {
	return append([]string{"--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
		"--undef-value-errors=no", "--error-limit=no", "--num-callers=30",
		"--suppressions=" + filepath.Join(a.repo, "capi/test/valgrind.supp"), a.cTest}, args...)
}

// valgrindEnv: Go's asynchronous preemption writes below the stack pointer
// from a signal handler, which memcheck reports; turning it off removes
// that noise without changing what the test exercises. cpu.rdtscp=off:
// valgrind's virtual CPU advertises RDTSCP but VEX 3.19 cannot decode it on
// every host, and the runtime's cputicks would then die with SIGILL.
var valgrindEnv = []string{"GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"}

// leakLine matches the leak summary. "still reachable" counts too: the
// library frees everything a host releases, and memory a host forgot to
// release is referenced only from the Go heap, which memcheck scans.
var leakLine = regexp.MustCompile(`(definitely lost|indirectly lost|possibly lost|still reachable): ([\d,]+) bytes`)

// valgrindProblems returns the memcheck reports that matter: any error
// about a heap block (alloc'd or free'd: the memory the ABI hands out) or
// raised in the C host's own code, and any lost bytes.
//
// An error raised in Go code (innermost frame in a .go file) about an
// anonymous segment is not one: that is the Go heap or a goroutine stack,
// which the Go runtime manages itself (the garbage collector reads heap
// bitmaps memcheck never saw written). memcheck sometimes unwinds such a
// GC assist into the C frames below it, so naming ubik_test.c somewhere in
// the stack is not enough; the innermost frame decides.
func valgrindProblems(stderr string) []string {
	var problems []string
	var block []string
	flush := func() {
		text := strings.Join(block, "\n")
		switch {
		case strings.Contains(text, "alloc'd") || strings.Contains(text, "free'd"):
			problems = append(problems, text)
		case strings.Contains(text, " lost in loss record"):
		case goRuntimeNoise(block):
		case strings.Contains(text, "ubik_test.c"):
			problems = append(problems, text)
		}
		block = block[:0]
	}
	for _, line := range strings.Split(stderr, "\n") {
		msg := line
		if strings.HasPrefix(line, "==") {
			if i := strings.Index(line[2:], "=="); i >= 0 {
				msg = strings.TrimSpace(line[i+4:])
			}
		}
		if msg == "" {
			flush()
			continue
		}
		block = append(block, msg)
		if m := leakLine.FindStringSubmatch(msg); m != nil && m[2] != "0" {
			problems = append(problems, msg)
		}
	}
	flush()
	if !strings.Contains(stderr, "ERROR SUMMARY") {
		problems = append(problems, "valgrind printed no ERROR SUMMARY")
	}
	return problems
}

// goRuntimeNoise reports whether a memcheck error block was raised in Go
// code against an anonymous segment (see valgrindProblems).
func goRuntimeNoise(block []string) bool {
	anon := false
	for _, l := range block {
		if strings.Contains(l, "anonymous segment") {
			anon = true
		}
	}
	if !anon {
		return false
	}
	for _, l := range block {
		if strings.HasPrefix(l, "at 0x") {
			return strings.Contains(l, ".go:")
		}
	}
	return false
}

func TestVolumeValgrind(t *testing.T) {
	t.Parallel()
	a := build(t)
	out, errOut, err := run(t, valgrindEnv, "valgrind", valgrindArgs(a, "volume", strconv.Itoa(volumeRecords))...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("volume ok: %d records", volumeRecords)) {
		t.Fatalf("ubik_test volume under valgrind: %v\nstdout:\n%s\nstderr (tail):\n%s", err, out, tail(errOut, 4000))
	}
	if p := valgrindProblems(errOut); len(p) > 0 {
		t.Fatalf("valgrind found %d problems:\n%s", len(p), strings.Join(p, "\n\n"))
	}
}

// The checks above can fail: a host that keeps a record pointer past the
// next ubik_next_keyed, or never frees a query, is caught by both tools.
func TestSanitizersCatchMisuse(t *testing.T) {
	t.Parallel()
	a := build(t)
	_, errOut, err := run(t, asanEnv, a.cAsan, "misuse", "stale-pointer")
	if err == nil || !strings.Contains(errOut, "heap-use-after-free") {
		t.Errorf("ASan did not catch a stale record pointer: %v\n%s", err, errOut)
	}
	_, errOut, err = run(t, asanEnv, a.cAsan, "misuse", "leak")
	if err == nil || !strings.Contains(errOut, "LeakSanitizer: detected memory leaks") {
		t.Errorf("LSan did not catch an unfreed query: %v\n%s", err, errOut)
	}
	for _, what := range []string{"stale-pointer", "leak"} {
		_, errOut, err = run(t, valgrindEnv, "valgrind", valgrindArgs(a, "misuse", what)...)
		if err != nil {
			t.Errorf("valgrind misuse %s: %v\n%s", what, err, tail(errOut, 4000))
		}
		if p := valgrindProblems(errOut); len(p) == 0 {
			t.Errorf("valgrind did not catch misuse %s:\n%s", what, tail(errOut, 4000))
		}
	}
}

// The in-process key and value bytes are the ones `ubik run` prints
// (tsv: key<TAB>value), record for record, over every query shape.
func TestKeysMatchCLI(t *testing.T) {
	t.Parallel()
	a := build(t)
	sqls, err := filepath.Glob("testdata/*.sql")
	if err != nil || len(sqls) == 0 {
		t.Fatalf("no testdata/*.sql: %v", err)
	}
	for _, sqlPath := range sqls {
		name := strings.TrimSuffix(filepath.Base(sqlPath), ".sql")
		t.Run(name, func(t *testing.T) {
			input := strings.TrimSuffix(sqlPath, ".sql") + ".jsonl"
			if _, err := os.Stat(input); err != nil {
				input = filepath.Join(a.repo, "examples/events.jsonl")
			}
			want, errOut, err := run(t, nil, a.cli, "run", sqlPath, "--input", input, "--no-progress", "--quiet")
			if err != nil {
				t.Fatalf("ubik run: %v\n%s", err, errOut)
			}
			got, errOut, err := run(t, asanEnv, a.cAsan, "cat", sqlPath, input, name)
			if err != nil {
				t.Fatalf("ubik_test cat: %v\n%s", err, errOut)
			}
			if strings.Count(want, "\n") < 5 {
				t.Fatalf("ubik run printed only %d records", strings.Count(want, "\n"))
			}
			if got != want {
				t.Fatalf("C ABI output differs from ubik run:\n%s", firstDiff(want, got))
			}
		})
	}
}

// The Python binding's unittest suite, against the library built here.
func TestPython(t *testing.T) {
	t.Parallel()
	a := build(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required for the binding's tests: %v", err)
	}
	pyDir := filepath.Join(a.repo, "python")
	out, errOut, err := run(t, []string{"UBIK_LIB=" + a.lib, "UBIK_BIN=" + a.cli, "PYTHONPATH=" + pyDir, "PYTHONDONTWRITEBYTECODE=1"},
		py, "-m", "unittest", "discover", "-s", filepath.Join(pyDir, "tests"), "-v")
	if err != nil {
		t.Fatalf("python tests: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("%s", tail(errOut, 3000))
}

// ubik.h declares every exported function with the signature cgo exports
// (up to const), and every function it declares is in the library.
func TestHeaderDeclaresEveryExport(t *testing.T) {
	t.Parallel()
	header, err := os.ReadFile("ubik.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := parseHeaderPrototypes(t, string(header))
	exported := parseGoExports(t)
	for name, sig := range exported {
		hs, ok := declared[name]
		if !ok {
			t.Errorf("//export %s is not declared in ubik.h", name)
			continue
		}
		if hs != sig {
			t.Errorf("%s: ubik.h declares %q, the export is %q", name, hs, sig)
		}
	}
	a := build(t)
	out, errOut, err := run(t, nil, "nm", "-D", "--defined-only", a.lib)
	if err != nil {
		t.Fatalf("nm: %v\n%s", err, errOut)
	}
	syms := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "ubik") {
			syms[f[2]] = true
		}
	}
	for name := range declared {
		if !syms[name] {
			t.Errorf("ubik.h declares %s, libubik.so does not define it", name)
		}
	}
	for name := range syms {
		if _, ok := declared[name]; !ok {
			t.Errorf("libubik.so exports %s, ubik.h does not declare it", name)
		}
	}
}

var protoRE = regexp.MustCompile(`(?m)^([a-z_][a-z0-9_ ]*?[ *]+)(ubik_[a-z_]+)\(([^)]*)\);`)

// parseHeaderPrototypes maps each function of ubik.h to a normalized
// signature "ret(type,type)" without const and parameter names.
func parseHeaderPrototypes(t *testing.T, header string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range protoRE.FindAllStringSubmatch(header, -1) {
		var params []string
		if args := strings.TrimSpace(p[3]); args != "void" {
			for _, arg := range strings.Split(args, ",") {
				arg = strings.Join(strings.Fields(arg), " ")
				// drop the parameter name: the last identifier
				i := strings.LastIndexAny(arg, " *")
				params = append(params, normType(arg[:i+1]))
			}
		}
		m[p[2]] = normType(p[1]) + "(" + strings.Join(params, ",") + ")"
	}
	if len(m) < 15 {
		t.Fatalf("found only %d prototypes in ubik.h", len(m))
	}
	return m
}

func normType(s string) string {
	s = strings.ReplaceAll(s, "const", "")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "*", " * ")), "")
}

// cTypes are the C spellings of the cgo types the exports use.
var cTypes = map[string]string{
	"int": "int", "char": "char", "size_t": "size_t", "uint8_t": "uint8_t", "int64_t": "int64_t",
	"ubik_engine": "ubik_engine", "ubik_query": "ubik_query", "ubik_meta": "ubik_meta",
}

// parseGoExports maps each //export function of this package to the same
// normalized signature, from the Go declarations.
func parseGoExports(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	cType := func(e ast.Expr) string {
		stars := ""
		for {
			s, ok := e.(*ast.StarExpr)
			if !ok {
				break
			}
			stars += "*"
			e = s.X
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || fmt.Sprint(sel.X) != "C" || cTypes[sel.Sel.Name] == "" {
			t.Errorf("export uses a non-C type %T %v", e, e)
			return "?"
		}
		return cTypes[sel.Sel.Name] + stars
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil || !slices.ContainsFunc(fd.Doc.List, func(c *ast.Comment) bool {
				return c.Text == "//export "+fd.Name.Name
			}) {
				continue
			}
			var params []string
			for _, p := range fd.Type.Params.List {
				n := max(len(p.Names), 1)
				for range n {
					params = append(params, cType(p.Type))
				}
			}
			ret := "void"
			if fd.Type.Results != nil {
				ret = cType(fd.Type.Results.List[0].Type)
			}
			m[fd.Name.Name] = ret + "(" + strings.Join(params, ",") + ")"
		}
	}
	if len(m) < 15 {
		t.Fatalf("found only %d exports", len(m))
	}
	return m
}

var codeDefine = regexp.MustCompile(`(?m)^#define (UBIK_(?:OK|NONE|END|ERR_[A-Z_]+)) (-?\d+)`)

// The status codes of ubik.h and the table behind ubik_error_name are the
// same set, with the same names, and every number is distinct.
func TestCodeTableMatchesHeader(t *testing.T) {
	header, err := os.ReadFile("ubik.h")
	if err != nil {
		t.Fatal(err)
	}
	inHeader := map[string]int{}
	for _, m := range codeDefine.FindAllStringSubmatch(string(header), -1) {
		n, _ := strconv.Atoi(m[2])
		inHeader[m[1]] = n
	}
	seen := map[int]string{}
	for _, c := range codes {
		n := int(c.num)
		if hn, ok := inHeader[c.name]; !ok || hn != n {
			t.Errorf("table entry %s = %d; ubik.h has %d (present %v)", c.name, n, hn, ok)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share code %d", c.name, other, n)
		}
		seen[n] = c.name
		if c.description == "" {
			t.Errorf("%s has no description", c.name)
		}
		if c.retryable != (c.name == "UBIK_ERR_BACKPRESSURE" || c.name == "UBIK_ERR_JOIN_BUFFER") {
			t.Errorf("%s retryable = %v", c.name, c.retryable)
		}
	}
	var missing []string
	for name := range inHeader {
		found := false
		for _, c := range codes {
			found = found || c.name == name
		}
		if !found {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("ubik.h codes missing from the table: %v", missing)
	}
	if len(inHeader) != len(codes) {
		t.Errorf("ubik.h has %d codes, the table %d", len(inHeader), len(codes))
	}
}

// BenchmarkCVolume runs the C host over 100k records per iteration (one
// process each, so it includes loading the library and starting the Go
// runtime) and reports records/s through the C ABI.
func BenchmarkCVolume(b *testing.B) {
	a := build(b)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if out, errOut, err := run(b, nil, a.cTest, "volume", strconv.Itoa(volumeRecords)); err != nil {
			b.Fatalf("%v\n%s%s", err, out, errOut)
		}
	}
	b.ReportMetric(float64(volumeRecords)*float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n ubik run: %q\n C ABI:    %q\n(%d vs %d lines)", i+1, w, g, len(wl), len(gl))
		}
	}
	return "(no line differs)"
}

// The memcheck report filter, on recorded reports: a GC assist that
// memcheck unwound into the host's frames is noise (CI saw it once); a
// host error on a freed block, a host write into an anonymous segment and
// a leak are each a problem.
func TestValgrindProblemsFilter(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata/valgrind", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if p := valgrindProblems(read("gc_assist_noise.txt")); len(p) != 0 {
		t.Errorf("GC assist noise reported as %d problems:\n%s", len(p), strings.Join(p, "\n\n"))
	}
	if p := valgrindProblems(read("host_errors.txt")); len(p) != 3 {
		t.Errorf("want 3 problems (freed block, host write, leak), got %d:\n%s", len(p), strings.Join(p, "\n\n"))
	}
}
