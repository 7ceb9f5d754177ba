// Package golden runs behaviour tests kept as data files: a file is a
// sequence of cases, each an input and its expected output,
//
//	=== name
//	input (any number of lines)
//	---
//	expected output
//
// and `go test -update` rewrites the expected outputs with what the code
// produces now (read the diff before committing it). Lines before the first
// case are a comment kept verbatim.
package golden

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Updating reports whether the test run rewrites golden files.
func Updating() bool { return *update }

type goldenCase struct {
	name, input, want string
}

func readGolden(t *testing.T, path string) (header string, cases []goldenCase) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cur *goldenCase
	var in, out []string
	inOut := false
	flush := func() {
		if cur != nil {
			cur.input = strings.Join(in, "\n")
			cur.want = strings.TrimRight(strings.Join(out, "\n"), "\n")
			cases = append(cases, *cur)
		}
	}
	var head []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "=== "):
			flush()
			cur = &goldenCase{name: strings.TrimPrefix(l, "=== ")}
			in, out, inOut = nil, nil, false
		case cur == nil:
			head = append(head, l)
		case l == "---" && !inOut:
			inOut = true
		case inOut:
			out = append(out, l)
		default:
			in = append(in, l)
		}
	}
	flush()
	return strings.Join(head, "\n"), cases
}

func writeGolden(t *testing.T, path, header string, cases []goldenCase) {
	t.Helper()
	var b strings.Builder
	b.WriteString(header)
	if header != "" && !strings.HasSuffix(header, "\n") {
		b.WriteString("\n")
	}
	for _, c := range cases {
		b.WriteString("=== " + c.name + "\n" + c.input + "\n---\n" + c.want + "\n\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Run runs fn over every case of path and compares (or, with -update,
// rewrites) the expected outputs.
func Run(t *testing.T, path string, fn func(input string) string) {
	header, cases := readGolden(t, path)
	for i := range cases {
		c := &cases[i]
		got := strings.TrimRight(fn(c.input), "\n")
		if *update {
			c.want = got
			continue
		}
		if got != c.want {
			t.Errorf("%s: case %q\ninput:\n%s\ngot:\n%s\nwant:\n%s", path, c.name, c.input, got, c.want)
		}
	}
	if *update {
		writeGolden(t, path, strings.TrimRight(header, "\n")+"\n", cases)
	}
}
