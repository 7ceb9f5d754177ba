package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCLIFuncLines bounds a function of the command line: a command's
// lifecycle is a few steps that each return an error (fileRun, for ubik
// run), not one function of closures.
const maxCLIFuncLines = 150

// TestCLIFunctionLength: no function (or method) of internal/cli, tests
// aside, is longer than maxCLIFuncLines lines, its signature and closing
// brace included.
func TestCLIFunctionLength(t *testing.T) {
	n := eachSource(t, "cli", func(f string, src []byte) {
		long, err := longFuncs(f, src, maxCLIFuncLines)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range long {
			t.Errorf("%s: split it into steps that return errors (at most %d lines)", l, maxCLIFuncLines)
		}
	})
	if n < 10 {
		t.Fatalf("found only %d Go files in internal/cli", n)
	}
}

// eachSource calls fn with the name and text of each non-test Go file of
// the package in dir, and returns how many it read.
func eachSource(t *testing.T, dir string, fn func(name string, src []byte)) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fn(f, src)
		n++
	}
	return n
}

// TestCLIFunctionLengthControl: the check reports a function one line
// over the bound, and passes one at the bound.
func TestCLIFunctionLengthControl(t *testing.T) {
	fn := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + fn("atBound", maxCLIFuncLines) + fn("over", maxCLIFuncLines+1)
	long, err := longFuncs("p.go", []byte(src), maxCLIFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("p.go:%d: over is %d lines", 3+maxCLIFuncLines, maxCLIFuncLines+1)
	if len(long) != 1 || long[0] != want {
		t.Errorf("over a function of %d lines and one of %d: %q, want [%q]", maxCLIFuncLines, maxCLIFuncLines+1, long, want)
	}
}

// longFuncs returns "file:line: name is N lines" for each function of src
// longer than max lines.
func longFuncs(name string, src []byte, max int) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := end.Line - start.Line + 1; n > max {
			out = append(out, fmt.Sprintf("%s:%d: %s is %d lines", name, start.Line, fd.Name.Name, n))
		}
	}
	return out, nil
}
