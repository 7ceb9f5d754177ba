package metamorphic

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestViewInProcess runs view cases (GenerateView) through every
// in-process configuration: batch sizes, output bounds, checkpoints and
// restores of the whole graph.
func TestViewInProcess(t *testing.T) {
	for seed := uint64(300); seed < 310; seed++ {
		c := GenerateView(seed, Size{Events: shortEvents})
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d: %d finals of\n%s", seed, len(want), c.SQL)
		if len(want) == 0 {
			t.Errorf("seed %d: no final records", seed)
		}
	}
}

// TestViewPaths runs three view cases through the C ABI, Python,
// `ubik run --state-dir` under kill -9 and Kafka: the graph in each
// partition (the case's query groups by the view's GROUP BY cells, so it
// follows the view's partitioning), kill -9 and restart, the three cases
// covering 1, 3 and 4 partitions, repartitioned and direct, and each run
// comparing the view's own topic too. UBIK_METAMORPHIC_SEED replays one
// seed through all six Kafka runs.
func TestViewPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	viewPaths(t, tl, []uint64{201, 202, 203}, GenerateView)
}

// viewPaths runs the cases gen makes for seeds through every path, each
// taking two of the six Kafka runs (all six for UBIK_METAMORPHIC_SEED's
// seed). A shape Kafka refuses skips the Kafka path; cases that together
// take no Kafka run fail the test, which would cover nothing there.
func viewPaths(t *testing.T, tl *tools, seeds []uint64, gen func(uint64, Size) *Case) {
	t.Helper()
	casePaths(t, tl, seeds, gen, func(i int) []kafkaRun { return allKafka[2*i%len(allKafka):][:2] })
}

// casePaths is viewPaths with the Kafka runs of case i given by kruns(i).
func casePaths(t *testing.T, tl *tools, seeds []uint64, gen func(uint64, Size) *Case, kruns func(i int) []kafkaRun) {
	t.Helper()
	size := Size{Events: shortEvents}
	split := true
	if s := os.Getenv(envSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		seeds, size, split = []uint64{seed}, Size{Events: longEvents}, false
	}
	runs, took := 0, 0
	for i, seed := range seeds {
		kr := allKafka
		if split {
			kr = kruns(i)
		}
		n := one(t, tl, gen(seed, size), paths{capi: true, python: true, file: true, short: true, kafka: kr})
		runs += n
		if n > 0 {
			took++
		}
	}
	t.Logf("%d of %d cases took the Kafka path (%d Kafka runs)", took, len(seeds), runs)
	// A replayed seed (envSeed) may draw a shape Kafka refuses; the
	// fixed seeds must take the Kafka path at least once.
	if runs == 0 && split {
		t.Errorf("no case of seeds %v made a Kafka run", seeds)
	}
}

// TestIntervalJoinInProcess runs interval-join cases
// (GenerateIntervalJoin) through every in-process configuration: batch
// sizes, output bounds, checkpoints and restores of the whole graph.
func TestIntervalJoinInProcess(t *testing.T) {
	for seed := uint64(400); seed < 410; seed++ {
		c := GenerateIntervalJoin(seed, Size{Events: shortEvents})
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d: %d finals of\n%s", seed, len(want), c.SQL)
		if len(want) == 0 {
			t.Errorf("seed %d: no final records", seed)
		}
	}
}

// TestIntervalJoinPaths runs three interval-join cases through the C
// ABI, Python, `ubik run --state-dir` under kill -9 and Kafka (a join of
// two views: each side a pipeline publishing its view's topic, the join
// stage over their repartition topic), each taking two of the six Kafka
// runs, and each run comparing both views' topics too.
func TestIntervalJoinPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	viewPaths(t, tl, []uint64{211, 212, 213}, GenerateIntervalJoin)

	// The skip takes only a shape Kafka refuses: the generated one runs,
	// and so does the same join grouped by none of its equality columns
	// (its joined rows repartitioned by the GROUP BY).
	c := GenerateIntervalJoin(211, Size{Events: 20})
	if msg, err := tl.kafkaRefusal(t, c, t.TempDir()); err != nil || msg != "" {
		t.Fatalf("the generated join: refusal %q, %v", msg, err)
	}
	c.SQL = strings.Replace(strings.Replace(c.SQL, "SELECT a.g, ", "SELECT ", 1), "GROUP BY a.g, ", "GROUP BY ", 1)
	if msg, err := tl.kafkaRefusal(t, c, t.TempDir()); err != nil || msg != "" {
		t.Fatalf("the join grouped by its window only: refusal %q, %v\n%s", msg, err, c.SQL)
	}
}

// TestViewJoinViewInProcess runs queries over a view of an interval join
// of two views (GenerateViewJoinView: the reader by g or by none) through
// every in-process configuration: batch sizes, output bounds, checkpoints
// and restores of the whole graph.
func TestViewJoinViewInProcess(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(430); seed < 438; seed++ {
		c := GenerateViewJoinView(seed, Size{Events: shortEvents})
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d (%s): %d finals", seed, c.Note, len(want))
		if len(want) == 0 {
			t.Errorf("seed %d: no final records of\n%s", seed, c.SQL)
		}
		kinds[c.Note]++
	}
	if len(kinds) < 2 {
		t.Errorf("the seeds drew one kind of reader only: %v", kinds)
	}
}

// TestViewJoinViewPaths runs two view-join-view cases through the C ABI,
// Python, `ubik run --state-dir` under kill -9 and Kafka (the join stage
// running the reader in its partitions), one reading by g and one by
// none (the reader behind a view repartition of the join's final rows),
// each taking Kafka runs.
func TestViewJoinViewPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	viewPaths(t, tl, []uint64{431, 433}, GenerateViewJoinView)
}

// TestViewCase: a view of a case alone is the source and that view,
// renamed, with the views it reads and without the others; its
// reference is the view's own final changelog.
func TestViewCase(t *testing.T) {
	c := GenerateIntervalJoin(211, Size{Events: shortEvents})
	for _, v := range c.Views {
		vc, err := c.ViewCase(v)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(vc.SQL, "CREATE VIEW "); n != 1 || !strings.Contains(vc.SQL, "CREATE VIEW "+QueryName+" AS") || strings.Contains(vc.SQL, " JOIN ") {
			t.Fatalf("view %s alone:\n%s", v, vc.SQL)
		}
		if _, want, err := Reference(vc); err != nil || len(want) == 0 {
			t.Fatalf("view %s alone: %d finals, %v", v, len(want), err)
		}
	}
	chain := &Case{SQL: Source + "CREATE VIEW a AS SELECT g, count(*) AS c FROM ev GROUP BY g;\n" +
		"CREATE VIEW b AS SELECT g, count(*) AS c FROM a GROUP BY g;\nCREATE VIEW z AS SELECT g, count(*) AS c FROM ev GROUP BY g;\n" +
		"CREATE VIEW " + QueryName + " AS SELECT g, count(*) AS c FROM b GROUP BY g;\n"}
	vc, err := chain.ViewCase("b")
	if err != nil {
		t.Fatal(err)
	}
	if want := Source + "CREATE VIEW a AS SELECT g, count(*) AS c FROM ev GROUP BY g;\nCREATE VIEW " + QueryName + " AS SELECT g, count(*) AS c FROM a GROUP BY g;\n"; vc.SQL != want {
		t.Fatalf("view b of a chain alone:\n%s\nwant\n%s", vc.SQL, want)
	}
	if _, err := chain.ViewCase("nope"); err == nil {
		t.Fatal("a view the script lacks")
	}
}

// TestViewRegroupInProcess runs view cases whose reader groups by less
// than its view (GenerateViewRegroup) through every in-process
// configuration.
func TestViewRegroupInProcess(t *testing.T) {
	byNone := map[bool]bool{}
	for seed := uint64(320); seed < 330; seed++ {
		c := GenerateViewRegroup(seed, Size{Events: shortEvents})
		byNone[strings.HasPrefix(c.Note, "view regrouped by [] ")] = true
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d (%s): %d finals", seed, c.Note, len(want))
		if len(want) == 0 {
			t.Errorf("seed %d: no final records", seed)
		}
	}
	// Readers by none of the view's cells and by some.
	if !byNone[true] || !byNone[false] {
		t.Errorf("the cases do not regroup both by none of the view's cells and by some: %v", byNone)
	}
}

// TestViewJoinSourcesPaths runs two joins of two views over two sources
// (GenerateViewJoinSources: the second source with a dedup key and
// retries) through the C ABI, Python, `ubik run --state-dir` under kill
// -9 and Kafka: one whose left view groups by g alone (over Kafka both
// views run in the join's stage, each source through its own dedup
// stage), one whose left view groups by more (a side).
func TestViewJoinSourcesPaths(t *testing.T) {
	seeds := []uint64{112, 12}
	for i, seed := range seeds {
		c := GenerateViewJoinSources(seed, Size{Events: shortEvents})
		if byG := strings.Contains(c.SQL, "GROUP BY g, TUMBLE(ts") || strings.Contains(c.SQL, "GROUP BY g, HOP(ts"); byG != (i == 0) {
			t.Fatalf("seed %d: the left view groups by g alone: %v, want %v\n%s", seed, byG, i == 0, c.SQL)
		}
	}
	tl := build(t, t.TempDir())
	viewPaths(t, tl, seeds, GenerateViewJoinSources)
}
