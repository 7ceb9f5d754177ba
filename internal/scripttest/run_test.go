package scripttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.txt")
	text := "# about\n> sql q join-buffer=9\nSELECT 1\n> sql\nSELECT 2\n> expect\n! a\n> sql\nSELECT 3\n> push\n{}\n> kill\n> expect\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Segments()
	if len(g) != 2 || len(g[0].Queries) != 2 || len(g[1].Queries) != 1 {
		t.Fatalf("segments: %d, queries %d and %d", len(g), len(g[0].Queries), len(g[len(g)-1].Queries))
	}
	q := g[0].Queries[0]
	if q.Name() != "q" || q.JoinBuffer() != 9 || q.Text() != "SELECT 1" || g[1].Queries[0].JoinBuffer() != 4 {
		t.Fatalf("query: %q, buffer %d, text %q", q.Name(), q.JoinBuffer(), q.Text())
	}
	if c := g[1].Queries[0].Cmds; !g[1].Queries[0].After(c[2], "push") || g[1].Queries[0].After(c[0], "kill") {
		t.Fatal("After")
	}
	if err := s.Write(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != text {
		t.Fatalf("written back:\n%s", b)
	}
	if os.WriteFile(path, []byte("> nope\n"), 0o644) == nil {
		if _, err := Parse(path); err == nil || !strings.Contains(err.Error(), `unknown command "nope"`) {
			t.Fatalf("an unknown command: %v", err)
		}
	}
}

func TestClassify(t *testing.T) {
	got := Classify([]string{"v: F rev=2 [1]\t{}", "P rev=1 []\t{}", "! line 1:2: bad", "SELECT x", "  ^",
		"! event 3: table t: column", "v: late x: event", "events=1 late=0", "join: events=1", "inputs: a, b"})
	want := []struct {
		k      Kind
		view   string
		stream string
	}{{Record, "v", "records v"}, {Record, "", "records "}, {Error, "", "errors"}, {EventError, "", "rejected table t"},
		{Late, "v", "late v"}, {Stats, "", "stats"}, {JoinStats, "", "join stats"}, {Inputs, "", "inputs"}}
	if len(got) != len(want) {
		t.Fatalf("%d lines: %+v", len(got), got)
	}
	for i, w := range want {
		if got[i].Kind != w.k || got[i].View != w.view || got[i].Stream != w.stream {
			t.Errorf("line %d: %+v, want %+v", i, got[i], w)
		}
	}
	if got[2].Text != "! line 1:2: bad\nSELECT x\n  ^" {
		t.Errorf("the caret is not the error's: %q", got[2].Text)
	}
}

// host is a host for the comparison: it leaves out late lines, stops at
// an error, and runs unordered when told.
type host struct{ unordered bool }

func (host) Name() string                        { return "test" }
func (host) Cannot(*Query, *Cmd) string          { return "" }
func (host) Run(*testing.T, *Segment) [][]string { return nil }
func (host) StopsAtFirstError() bool             { return true }
func (h host) Unordered() bool                   { return h.unordered }
func (host) Unobserved(l Line) string {
	if l.Kind == Late {
		return "no late lines"
	}
	return ""
}

func TestStreams(t *testing.T) {
	diff := func(h host, got, want []string) string {
		g, w := streams(h, Classify(got)), streams(h, Classify(want))
		var out []string
		for _, k := range keys(g, w) {
			if d := diffStream(g[k], w[k]); d != "" {
				out = append(out, k+": "+d)
			}
		}
		return strings.Join(out, "; ")
	}
	for _, c := range []struct {
		got, want []string
		bad       bool
	}{
		{[]string{"F rev=1 [1]\t{}", "events=? late=2"}, []string{"late x", "events=4 late=2", "F rev=1 [1]\t{}"}, false},
		{[]string{"F rev=1 [1]\t{}"}, []string{"F rev=2 [1]\t{}"}, true},
		{[]string{"events=3 late=2"}, []string{"events=4 late=2"}, true},
		{[]string{"! stop"}, []string{"! stop", "! again"}, false},
		{[]string{"! line 1:1: a"}, []string{"! line 1:1: a", "! line 2:1: b"}, true},
		{[]string{"F rev=1 [2]\t{}", "F rev=1 [1]\t{}"}, []string{"F rev=1 [1]\t{}", "F rev=1 [2]\t{}"}, true},
	} {
		if d := diff(host{}, c.got, c.want); (d != "") != c.bad {
			t.Errorf("%q against %q: %q", c.got, c.want, d)
		}
	}
}
