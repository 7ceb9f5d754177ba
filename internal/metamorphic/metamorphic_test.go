package metamorphic

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of the long run (see the package comment).
const (
	envMode     = "UBIK_METAMORPHIC"          // "long": the long run
	envDuration = "UBIK_METAMORPHIC_DURATION" // how long the long run generates cases (default 30m)
	envSeed     = "UBIK_METAMORPHIC_SEED"     // replay one seed through every path
	envFound    = "UBIK_METAMORPHIC_FOUND"    // where the long run writes minimized failures
)

// shortEvents and longEvents size the generated histories.
const (
	shortEvents = 400
	longEvents  = 1500
)

// paths selects the outside paths a case goes through.
type paths struct {
	capi, python, file bool
	kafka              []kafkaRun
	// short: one C ABI run (batch 1 or a batch) and one Python run (bytes
	// or dicts), drawn, instead of both of each.
	short bool
}

var allKafka = []kafkaRun{{1, false}, {3, false}, {4, false}, {1, true}, {3, true}, {4, true}}

func allPaths() paths { return paths{capi: true, python: true, file: true, kafka: allKafka} }

// failure is one path's disagreement.
type failure struct {
	path string
	err  error
}

// runInProcessPaths puts c through the reference and every in-process
// configuration; it returns the reference and the failures.
func runInProcessPaths(c *Case, r *rand.Rand) (*Result, Finals, []failure) {
	ref, want, err := Reference(c)
	if err != nil {
		return nil, nil, []failure{{"in-process reference", err}}
	}
	var fs []failure
	if ref.Malformed != 0 {
		fs = append(fs, failure{"in-process reference", fmt.Errorf("%d of the generated events are malformed; every one is valid", ref.Malformed)})
	}
	// What is late at a join must be the same on every path, which holds
	// only while no stream row is late (the generator makes none; late
	// table rows it makes on purpose, behind their own key).
	switch st := ref.Stats; {
	case st == nil:
	case st.Interval.LateLeft != 0 || st.Interval.LateRight != 0:
		fs = append(fs, failure{"in-process reference", fmt.Errorf("%d left and %d right rows late at the interval join; the generator makes none", st.Interval.LateLeft, st.Interval.LateRight)})
	case st.Join.LateEvents != 0:
		fs = append(fs, failure{"in-process reference", fmt.Errorf("%d events late at the temporal join; the generator makes none", st.Join.LateEvents)})
	}
	for _, cfg := range Configs(r, len(c.Lines)) {
		got, err := RunInProcess(c, cfg)
		if err == nil {
			err = Compare(c, ref, want, got)
		}
		if err == nil && cfg.Threads > 1 {
			one := cfg
			one.Threads = 0
			var base *Result
			if base, err = RunInProcess(c, one); err == nil {
				err = SameChangelog(base, got)
			}
		}
		if err != nil {
			fs = append(fs, failure{"in-process " + cfg.String(), err})
		}
	}
	return ref, want, fs
}

// runOutsidePaths puts c through the C ABI, Python, the file run and
// Kafka (each view's topic too), compared with the reference; it also
// returns how many Kafka runs it made (none when Kafka refuses the shape).
func runOutsidePaths(t *testing.T, tl *tools, c *Case, r *rand.Rand, p paths, ref *Result, want Finals) (fs []failure, kafkaRuns int) {
	last := time.Now()
	check := func(res *Result, err error) {
		if res != nil {
			t.Logf("seed %d: %s: %d records, %s", c.Seed, res.Path, len(res.Recs), time.Since(last).Round(time.Millisecond))
		}
		last = time.Now()
		if err == nil {
			err = Compare(c, ref, want, res)
		}
		if err != nil {
			name := "a path"
			if res != nil {
				name = res.Path
			}
			fs = append(fs, failure{name, err})
		}
	}
	pending := func() int { return []int{1, 3, 64, 65536}[r.IntN(4)] }
	if p.capi {
		batches := []int{1, []int{7, 1000}[r.IntN(2)]}
		if p.short {
			batches = batches[r.IntN(2):][:1]
		}
		for _, b := range batches {
			check(tl.runCAPI(t, c, t.TempDir(), pending(), b))
		}
	}
	if p.python {
		modes := []string{"bytes", "dict"}
		if p.short {
			modes = modes[r.IntN(2):][:1]
		}
		for _, m := range modes {
			check(tl.runPython(t, c, t.TempDir(), pending(), m))
		}
	}
	if p.file {
		res, _, err := tl.runFile(t, c, t.TempDir(), r, 3)
		check(res, err)
	}
	if len(p.kafka) == 0 {
		return fs, 0
	}
	// A shape Kafka refuses skips the Kafka path, and only so: the
	// refusal must be CheckQuery's, reported as it is by ubik run.
	refusal, err := tl.kafkaRefusal(t, c, t.TempDir())
	if err != nil {
		return append(fs, failure{"Kafka", err}), 0
	}
	if refusal != "" {
		t.Logf("seed %d: Kafka refuses the shape, no Kafka run: %s", c.Seed, refusal)
		return fs, 0
	}
	refs, err := viewRefs(c)
	if err != nil {
		return append(fs, failure{"Kafka", err}), 0
	}
	for _, kr := range p.kafka {
		if kr.direct && c.Second == RightName {
			// An interval join read partitioned by key is refused, and
			// only so skipped: ubik run's own words.
			msg, err := tl.directRefusal(t, c, t.TempDir())
			if err != nil {
				fs = append(fs, failure{kr.String(), err})
			} else {
				t.Logf("seed %d: %s: refused for a join: %s", c.Seed, kr, msg)
			}
			continue
		}
		res, views, _, err := tl.runKafka(t, c, t.TempDir(), r, kr, want, refs)
		check(res, err)
		if err != nil {
			continue
		}
		for _, v := range refs {
			vr := views[v.name]
			t.Logf("seed %d: %s: %d records", c.Seed, vr.Path, len(vr.Recs))
			if err := Compare(v.c, v.ref, v.want, vr); err != nil {
				fs = append(fs, failure{vr.Path, err})
			}
		}
		kafkaRuns++
	}
	return fs, kafkaRuns
}

func report(t *testing.T, c *Case, fs []failure) {
	t.Helper()
	for _, f := range fs {
		msg := f.err.Error()
		if !strings.HasPrefix(msg, f.path) {
			msg = f.path + ": " + msg
		}
		if c.Note != "" {
			msg = "(" + c.Note + ") " + msg
		}
		t.Errorf("seed %d %s", c.Seed, msg)
	}
	if len(fs) > 0 {
		t.Logf("seed %d script:\n%s", c.Seed, c.SQL)
	}
}

func corpus(t *testing.T) []*Case {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.case")
	if err != nil {
		t.Fatal(err)
	}
	var cs []*Case
	for _, f := range files {
		c, err := ReadCase(f)
		if err != nil {
			t.Fatal(err)
		}
		if c.Note == "" {
			c.Note = filepath.Base(f)
		}
		cs = append(cs, c)
	}
	return cs
}

// TestInProcess: the corpus and 20 generated cases through every
// in-process configuration (batch sizes 1, 7 and 1000, MaxPendingRecords
// bounds, restore points).
//
// With UBIK_METAMORPHIC=long-inprocess it generates in-process cases only,
// for UBIK_METAMORPHIC_DURATION, as the long run of TestPaths does.
func TestInProcess(t *testing.T) {
	if os.Getenv(envMode) == "long-inprocess" {
		long(t, nil)
		return
	}
	cases := corpus(t)
	for seed := uint64(1); seed <= 20; seed++ {
		cases = append(cases, Generate(seed, Size{Events: shortEvents}))
	}
	for _, c := range cases {
		_, _, fs := runInProcessPaths(c, rand.New(rand.NewPCG(c.Seed, 1)))
		report(t, c, fs)
	}
}

// TestPaths: the corpus cases and a few generated ones through the C ABI,
// Python (bytes and dicts), the file run under kill -9, and Kafka (1, 3
// and 4 partitions, direct and repartitioned, kill -9 and restart), each
// compared with the unbatched in-process run. With UBIK_METAMORPHIC=long
// it generates cases for UBIK_METAMORPHIC_DURATION instead and writes
// each failure, minimized, to UBIK_METAMORPHIC_FOUND.
func TestPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	if s := os.Getenv(envSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		one(t, tl, generateKind(seed, Size{Events: longEvents}), allPaths())
		return
	}
	if os.Getenv(envMode) == "long" {
		long(t, tl)
		return
	}
	// A corpus case takes every path but one Kafka run (the most general:
	// 4 partitions, repartitioned); the long run takes all six.
	for _, c := range corpus(t) {
		p := allPaths()
		p.kafka, p.short = []kafkaRun{{4, false}}, true
		one(t, tl, c, p)
	}
	// Each generated case takes every kind of path once and two Kafka
	// runs, so that the three cases cover all six Kafka runs (the budget
	// of the whole short version is 90 s on a loaded 2-core machine).
	for i, seed := range []uint64{101, 102, 103} {
		p := allPaths()
		p.kafka, p.short = allKafka[2*i:2*i+2], true
		one(t, tl, Generate(seed, Size{Events: shortEvents}), p)
	}
}

// one puts c through the in-process configurations and the paths p; it
// returns how many Kafka runs it made.
func one(t *testing.T, tl *tools, c *Case, p paths) (kafkaRuns int) {
	t.Helper()
	r := rand.New(rand.NewPCG(c.Seed, 2))
	start := time.Now()
	ref, want, fs := runInProcessPaths(c, r)
	if ref != nil {
		var out []failure
		out, kafkaRuns = runOutsidePaths(t, tl, c, r, p, ref, want)
		fs = append(fs, out...)
	}
	report(t, c, fs)
	t.Logf("seed %d %q: %d lines, %d finals, %d Kafka runs, %s", c.Seed, c.Note, len(c.Lines), len(want), kafkaRuns, time.Since(start).Round(time.Millisecond))
	return kafkaRuns
}

// long generates cases until the duration is up; a failing case is
// minimized on the path that failed and written to the found directory.
// Without tools (tl nil) it runs the in-process configurations only.
func long(t *testing.T, tl *tools) {
	d := 30 * time.Minute
	if s := os.Getenv(envDuration); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s=%q: %v", envDuration, s, err)
		}
	}
	found := os.Getenv(envFound)
	if found == "" {
		found = filepath.Join(os.TempDir(), "ubik-metamorphic-found")
	}
	if err := os.MkdirAll(found, 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(d)
	seeds := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	n, failed, inProc := 0, 0, 0
	save := func(c *Case, fs []failure, m *Case) {
		path := filepath.Join(found, fmt.Sprintf("seed%d.case", c.Seed))
		m.Note = fmt.Sprintf("seed %d, %s: %s", c.Seed, fs[0].path, firstLine(fs[0].err.Error()))
		if err := WriteCase(path, m); err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d minimized to %d lines: %s", c.Seed, len(m.Lines), path)
	}
	for time.Now().Before(deadline) {
		// The in-process configurations are cheap: many cases of them
		// between two cases that take every path.
		for range 20 {
			seed := seeds.Uint64() >> 1
			c := generateKind(seed, Size{Events: 20 + seeds.IntN(3000)})
			inProc++
			if _, _, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 2))); len(fs) > 0 {
				failed++
				report(t, c, fs)
				save(c, fs, minimizeFailure(t, tl, c, fs[0]))
			}
		}
		if tl == nil {
			continue
		}
		seed := seeds.Uint64() >> 1
		c := generateKind(seed, Size{Events: 50 + seeds.IntN(longEvents)})
		r := rand.New(rand.NewPCG(seed, 2))
		ref, want, fs := runInProcessPaths(c, r)
		if ref != nil {
			out, _ := runOutsidePaths(t, tl, c, r, allPaths(), ref, want)
			fs = append(fs, out...)
		}
		n++
		if len(fs) == 0 {
			t.Logf("case %d seed %d: %s, %d lines, %d finals: every path agrees", n, seed, kindOf(c), len(c.Lines), len(want))
			continue
		}
		failed++
		report(t, c, fs)
		save(c, fs, minimizeFailure(t, tl, c, fs[0]))
	}
	t.Logf("long run: %d cases through every path and %d more in process in %s; %d failed", n, inProc, d, failed)
}

// generateKind is the case of seed of the kind the seed draws (its
// last decimal digit): plain queries (0-4, 35 of 100 cases), views (5),
// readers that group by less than their view (6), interval joins of two
// views (7), temporal joins (8), interval joins of two streams (9),
// readers of a view of a temporal join (3 when the tens digit is odd),
// readers of a view of an interval join of two streams (4 when the
// tens digit is odd) or of two views (7 when the tens digit is odd), and
// interval joins of two views over two sources (2 when the tens digit
// is odd).
func generateKind(seed uint64, size Size) *Case {
	switch seed % 10 {
	case 2:
		if seed/10%2 == 1 {
			return GenerateViewJoinSources(seed, size)
		}
	case 3:
		if seed/10%2 == 1 {
			return GenerateTemporalJoinView(seed, size)
		}
	case 4:
		if seed/10%2 == 1 {
			return GenerateStreamJoinView(seed, size)
		}
	case 5:
		return GenerateView(seed, size)
	case 6:
		return GenerateViewRegroup(seed, size)
	case 7:
		if seed/10%2 == 1 {
			return GenerateViewJoinView(seed, size)
		}
		return GenerateIntervalJoin(seed, size)
	case 8:
		return GenerateTemporalJoin(seed, size)
	case 9:
		return GenerateStreamJoin(seed, size)
	}
	return Generate(seed, size)
}

// kindOf names c's kind in the long run's log.
func kindOf(c *Case) string {
	if c.Query != nil {
		return c.Query.Window
	}
	return c.Note
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// minimizeFailure shrinks c while the failing path still disagrees: an
// in-process failure against the in-process configurations, an outside
// one against that path alone (Kafka: all six runs, slow, so a shorter
// budget).
func minimizeFailure(t *testing.T, tl *tools, c *Case, f failure) *Case {
	inProc := strings.HasPrefix(f.path, "in-process")
	budget := 5 * time.Minute
	return Minimize(c, func(try *Case) bool {
		r := rand.New(rand.NewPCG(c.Seed, 2))
		ref, want, fs := runInProcessPaths(try, r)
		if inProc || ref == nil {
			return len(fs) > 0
		}
		p := paths{capi: strings.HasPrefix(f.path, "C ABI"), python: strings.HasPrefix(f.path, "Python"),
			file: strings.HasPrefix(f.path, "file"), kafka: nil}
		if strings.HasPrefix(f.path, "Kafka") {
			p.kafka = allKafka
		}
		out, _ := runOutsidePaths(t, tl, try, r, p, ref, want)
		return len(out) > 0
	}, budget)
}
