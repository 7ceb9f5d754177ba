package scripttest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Host runs scripts one way: in process, through a binary, over Kafka.
type Host interface {
	// Name names the host in messages.
	Name() string
	// Cannot says why the host cannot run command c of query q ("" when
	// it can). The segment is then skipped on this host, saying so.
	Cannot(q *Query, c *Cmd) string
	// Unobserved says why the host does not produce output line l (""
	// when it does): a kind of line, or a view's lines. Such lines are
	// left out of its comparison.
	Unobserved(l Line) string
	// Run runs the segment and returns its output: one slice per expect
	// command of the segment when the host knows where each expect falls,
	// or one slice for the whole segment (a process whose output is read
	// at its end). A host prints "?" for a counter it does not know.
	Run(t *testing.T, g *Segment) [][]string
}

// Normalizer is a host whose output differs from the reference's in a
// way it documents (a message shortened): Normalize maps a line, of the
// expect blocks and of the host's output alike, to the text compared.
type Normalizer interface {
	Normalize(l Line) string
}

// Stopper is a host whose run stops at an error that is not in the SQL (a
// process that exits): after such an error, the later errors of an
// expect block are not compared.
type Stopper interface {
	StopsAtFirstError() bool
}

// sqlError is a SQL error: it stops a query before it starts, not a run.
var sqlError = regexp.MustCompile(`^! line [0-9]+:[0-9]+: `)

// Killless is a host that cannot kill a query: it runs a query with kill
// commands without them (a kill changes no output, by the format's rule),
// and says so.
type Killless interface {
	// NoKill says why the host does not kill.
	NoKill() string
}

// Unordered is a host that keeps the order of each key's records, not the
// order of records of different keys (a Kafka topic read after the run):
// its streams are compared as sets of lines.
type Unordered interface {
	Unordered() bool
}

// Runner runs the scripts of Glob through a host.
type Runner struct {
	Glob string
	// Reference marks the host whose output is the expect blocks
	// verbatim: it must run every segment, its output is compared line for
	// line, and with Update it rewrites the expect blocks instead.
	Reference bool
	Update    bool
	// MustRun fails a script none of whose segments the host runs.
	MustRun bool
	// Parallel runs the scripts side by side (they share nothing).
	Parallel bool
}

// Run runs every script through h, one subtest per script and in it one
// per segment.
func (r Runner) Run(t *testing.T, h Host) {
	files, err := filepath.Glob(r.Glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s (%v)", r.Glob, err)
	}
	for _, f := range files {
		s, err := Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(s.Name(), func(t *testing.T) {
			if r.Parallel {
				t.Parallel()
			}
			r.runScript(t, h, s)
		})
	}
}

func (r Runner) runScript(t *testing.T, h Host, s *Script) {
	ran := 0
	var skipped []string
	for _, g := range s.Segments() {
		why := cannot(h, g)
		if why != "" {
			if r.Reference {
				t.Errorf("%s: the reference host %s cannot run it: %s", g.At(), h.Name(), why)
			}
			skipped = append(skipped, g.Name()+": "+why)
			t.Run(g.Name(), func(t *testing.T) { t.Skipf("%s: %s", h.Name(), why) })
			continue
		}
		ran++
		t.Run(g.Name(), func(t *testing.T) {
			if k, ok := h.(Killless); ok {
				for _, c := range g.Cmds {
					if c.Name == "kill" {
						t.Logf("%s: line %d: > kill: run without it: %s", h.Name(), c.Line, k.NoKill())
					}
				}
			}
			got := h.Run(t, g)
			if t.Failed() {
				return
			}
			r.compare(t, h, g, got)
		})
	}
	if r.Update && r.Reference && !t.Failed() {
		if err := s.Write(); err != nil {
			t.Fatal(err)
		}
	}
	if r.MustRun && ran == 0 {
		t.Errorf("%s runs no query of %s:\n%s", h.Name(), s.Path, strings.Join(skipped, "\n"))
	}
}

// cannot is why h cannot run g, naming the first command it cannot run.
func cannot(h Host, g *Segment) string {
	for _, q := range g.Queries {
		for _, c := range append([]*Cmd{q.SQL}, q.Cmds...) {
			if c == nil {
				continue
			}
			if why := h.Cannot(q, c); why != "" {
				return fmt.Sprintf("line %d: > %s: %s", c.Line, c.Name, why)
			}
		}
	}
	return ""
}

func (r Runner) compare(t *testing.T, h Host, g *Segment, got [][]string) {
	exp := g.Expects()
	if r.Reference {
		if len(got) != len(exp) {
			t.Fatalf("%s: %d outputs for %d expects", g.At(), len(got), len(exp))
		}
		for i, c := range exp {
			if r.Update {
				c.Block = append([]string(nil), got[i]...)
				continue
			}
			if strings.Join(got[i], "\n") != strings.Join(c.Block, "\n") {
				t.Errorf("%s:%d: output differs\n--- got\n%s\n--- want\n%s", g.Script.Path, c.Line, strings.Join(got[i], "\n"), strings.Join(c.Block, "\n"))
			}
		}
		return
	}
	switch len(got) {
	case len(exp):
		for i, c := range exp {
			compareStreams(t, h, fmt.Sprintf("%s:%d", g.Script.Path, c.Line), got[i], c.Block)
		}
	case 1:
		var want []string
		for _, c := range exp {
			want = append(want, c.Block...)
		}
		compareStreams(t, h, g.At()+" (the expect blocks of the query together)", got[0], want)
	default:
		t.Fatalf("%s: %s gave %d outputs for %d expects", g.At(), h.Name(), len(got), len(exp))
	}
}

// compareStreams compares got and want stream by stream, leaving out the
// kinds h does not produce.
func compareStreams(t *testing.T, h Host, at string, got, want []string) {
	t.Helper()
	g, w := streams(h, Classify(got)), streams(h, Classify(want))
	if u, ok := h.(Unordered); ok && u.Unordered() {
		for _, m := range []map[string][]Line{g, w} {
			for _, ls := range m {
				slices.SortStableFunc(ls, func(a, b Line) int { return strings.Compare(a.Text, b.Text) })
			}
		}
	}
	var bad []string
	for _, name := range keys(g, w) {
		if d := diffStream(g[name], w[name]); d != "" {
			bad = append(bad, name+": "+d)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %s output differs:\n%s\n--- got\n%s\n--- want (the kinds %s produces)\n%s", at, h.Name(),
			strings.Join(bad, "\n"), strings.Join(got, "\n"), h.Name(), strings.Join(observed(h, want), "\n"))
	}
}

func streams(h Host, lines []Line) map[string][]Line {
	out := map[string][]Line{}
	stopped := false
	for _, l := range lines {
		if h.Unobserved(l) != "" {
			continue
		}
		if n, ok := h.(Normalizer); ok {
			l.Text = n.Normalize(l)
		}
		if l.Kind == Error {
			if stopped {
				continue
			}
			st, ok := h.(Stopper)
			stopped = ok && st.StopsAtFirstError() && !sqlError.MatchString(l.Text)
		}
		out[l.Stream] = append(out[l.Stream], l)
	}
	return out
}

func observed(h Host, lines []string) []string {
	var out []string
	for _, l := range Classify(lines) {
		if h.Unobserved(l) == "" {
			out = append(out, l.Text)
		}
	}
	return out
}

func keys(a, b map[string][]Line) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range []map[string][]Line{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// diffStream describes the first difference of two streams ("" if none).
// A counter the host printed "?" matches any value.
func diffStream(got, want []Line) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("line %d missing: %q", i+1, want[i].Text)
		case i >= len(want):
			return fmt.Sprintf("line %d extra: %q", i+1, got[i].Text)
		case !sameLine(got[i], want[i]):
			return fmt.Sprintf("line %d: got %q, want %q", i+1, got[i].Text, want[i].Text)
		}
	}
	return ""
}

func sameLine(got, want Line) bool {
	if got.Text == want.Text {
		return true
	}
	if got.Kind != Stats && got.Kind != JoinStats {
		return false
	}
	g, w := strings.Fields(got.Text), strings.Fields(want.Text)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		gk, gv, _ := strings.Cut(g[i], "=")
		wk, _, _ := strings.Cut(w[i], "=")
		if g[i] != w[i] && (gk != wk || gv != "?") {
			return false
		}
	}
	return true
}
