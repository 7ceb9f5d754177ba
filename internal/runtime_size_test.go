package internal_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The dataflow's runtime (the physical plan, and the driver and graph
// that run it on one thread or many) stays readable: no file over
// maxRuntimeFileLines lines, no function over maxRuntimeFuncLines.
const (
	maxRuntimeFileLines = 600
	maxRuntimeFuncLines = 80
)

// runtimePackages are the dataflow's runtime, relative to internal/.
var runtimePackages = []string{"dataflow", "drive"}

// TestRuntimeSize: no non-test file of the runtime's packages is longer
// than maxRuntimeFileLines lines, and no function in them longer than
// maxRuntimeFuncLines.
func TestRuntimeSize(t *testing.T) {
	n := 0
	for _, pkg := range runtimePackages {
		n += eachSource(t, pkg, func(f string, src []byte) {
			for _, p := range runtimeSizeProblems(f, src) {
				t.Error(p)
			}
		})
	}
	if n < 20 {
		t.Fatalf("found only %d Go files in %v", n, runtimePackages)
	}
}

// runtimeSizeProblems lists what in src is over the runtime's bounds.
func runtimeSizeProblems(name string, src []byte) []string {
	var out []string
	if lines := bytes.Count(src, []byte("\n")); lines > maxRuntimeFileLines {
		out = append(out, fmt.Sprintf("%s is %d lines: split it by topic (at most %d)", name, lines, maxRuntimeFileLines))
	}
	long, err := longFuncs(name, src, maxRuntimeFuncLines)
	if err != nil {
		return append(out, err.Error())
	}
	for _, l := range long {
		out = append(out, fmt.Sprintf("%s: split it (at most %d lines)", l, maxRuntimeFuncLines))
	}
	return out
}

// TestRuntimeSizeControl: a file one line over the bound and a function
// one line over the bound are reported; both at the bound pass.
func TestRuntimeSizeControl(t *testing.T) {
	fn := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	at := "package p\n\n" + fn("atBound", maxRuntimeFuncLines)
	at += strings.Repeat("\n", maxRuntimeFileLines-strings.Count(at, "\n"))
	if p := runtimeSizeProblems("at.go", []byte(at)); len(p) != 0 {
		t.Errorf("a file and a function at the bounds: %q, want none", p)
	}
	over := "package p\n\n" + fn("over", maxRuntimeFuncLines+1)
	over += strings.Repeat("\n", maxRuntimeFileLines+1-strings.Count(over, "\n"))
	if p := runtimeSizeProblems("over.go", []byte(over)); len(p) != 2 {
		t.Errorf("a file and a function one line over the bounds: %q, want two problems", p)
	}
}
