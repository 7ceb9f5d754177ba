package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const timeVSample = `	Command being timed: "duckref --query std --input /tmp/x.jsonl"
	User time (seconds): 0.45
	System time (seconds): 0.10
	Percent of CPU this job got: 189%
	Elapsed (wall clock) time (h:mm:ss or m:ss): 0:00.29
	Average shared text size (kbytes): 0
	Maximum resident set size (kbytes): 114688
	Page size (bytes): 4096
	Exit status: 0
`

func TestParseTimeV(t *testing.T) {
	u, err := parseTimeV(strings.NewReader(timeVSample))
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{WallSeconds: 0.29, UserSeconds: 0.45, SysSeconds: 0.10, MaxRSSKB: 114688}
	if u != want {
		t.Fatalf("got %+v, want %+v", u, want)
	}
	if math.Abs(u.CPUSeconds()-0.55) > 1e-12 {
		t.Fatalf("cpu %v", u.CPUSeconds())
	}
	killed := strings.Replace(timeVSample, "\tExit status: 0\n", "\tCommand terminated by signal 9\n\tExit status: 0\n", 1)
	if u, err := parseTimeV(strings.NewReader(killed)); err != nil || u.Signal != 9 {
		t.Fatalf("signal: %+v %v", u, err)
	}
	if _, err := parseTimeV(strings.NewReader("real 0.29\n")); err == nil {
		t.Fatal("POSIX time output accepted, want an error naming the missing field")
	}
}

func TestParseClock(t *testing.T) {
	for in, want := range map[string]float64{"0:00.29": 0.29, "2:03.50": 123.5, "1:02:03": 3723} {
		if got, err := parseClock(in); err != nil || math.Abs(got-want) > 1e-9 {
			t.Errorf("parseClock(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "12", "a:b", "1:2:3:4", "1.5:00", "-1:00"} {
		if _, err := parseClock(bad); err == nil {
			t.Errorf("parseClock(%q) succeeded", bad)
		}
	}
}

// fixture writes a runs.tsv with time and stats files for two repeats of
// std at 1M events: ubik at 0.4/0.5 CPU-s, DuckDB at 0.5/0.5.
func fixture(t *testing.T, ubikSkipped bool) string {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "runs"), 0o755)
	var tsv strings.Builder
	tsv.WriteString(runsHeader + "\n")
	write := func(name, text string) string {
		if err := os.WriteFile(filepath.Join(dir, "runs", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return "runs/" + name
	}
	timeFile := func(name string, user, sys, wall float64, rssKB int) string {
		return write(name, fmt.Sprintf("\tUser time (seconds): %.2f\n\tSystem time (seconds): %.2f\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:%05.2f\n\tMaximum resident set size (kbytes): %d\n\tExit status: 0\n", user, sys, wall, rssKB))
	}
	for rep, c := range []struct{ ubik, duck float64 }{{0.4, 0.5}, {0.5, 0.5}} {
		r := rep + 1
		if ubikSkipped {
			fmt.Fprintf(&tsv, "main\tstd\tmerchant\t1000000\t10000\tzipf\t%d\tubik\tskipped: not built (run: not implemented yet)\t\t\t\n", r)
		} else {
			tf := timeFile(fmt.Sprintf("u%d.time", r), c.ubik, 0, 0.5, 60*1024)
			sf := write(fmt.Sprintf("u%d.json", r), `{"events_read": 1000000, "late": 0, "malformed": 0, "emit_latency_p50_ms": 400, "emit_latency_p99_ms": 1004, "state_bytes_per_group": 96, "live_groups_peak": 12000}`)
			fmt.Fprintf(&tsv, "main\tstd\tmerchant\t1000000\t10000\tzipf\t%d\tubik\tran\t%s\t%s\t\n", r, tf, sf)
		}
		tf := timeFile(fmt.Sprintf("d%d.time", r), c.duck-0.1, 0.1, 0.3, 112*1024)
		sf := write(fmt.Sprintf("d%d.json", r), `{"engine": "duckdb", "rows": 101458}`)
		fmt.Fprintf(&tsv, "main\tstd\tmerchant\t1000000\t10000\tzipf\t%d\tduckdb\tran\t%s\t%s\t\n", r, tf, sf)
	}
	// q12 with one failed ubik repeat.
	write("fail.log", "ubik: q12: out of memory\nmore\n")
	fail := write("fail.time", "\tUser time (seconds): 0.10\n\tSystem time (seconds): 0.00\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:00.20\n\tMaximum resident set size (kbytes): 1000\n\tExit status: 1\n")
	if !ubikSkipped {
		fmt.Fprintf(&tsv, "main\tq12\tbids\t1000000\t10000\tzipf\t1\tubik\tran\t%s\t\truns/fail.log\n", fail)
	}
	if !ubikSkipped {
		// q8: ubik refuses the query, DuckDB runs it.
		fmt.Fprintf(&tsv, "main\tq8\tauction\t1000000\t10000\tzipf\t1\tubik\tskipped: not built (ubik run refuses q8: unknown source)\t\t\t\n")
		q8 := timeFile("q8d.time", 0.2, 0.1, 0.25, 90*1024)
		fmt.Fprintf(&tsv, "main\tq8\tauction\t1000000\t10000\tzipf\t1\tduckdb\tran\t%s\t\t\n", q8)
	}
	d := timeFile("q12d.time", 0.3, 0.1, 0.25, 90*1024)
	fmt.Fprintf(&tsv, "main\tq12\tbids\t1000000\t10000\tzipf\t1\tduckdb\tran\t%s\t\t\n", d)
	path := filepath.Join(dir, "runs.tsv")
	if err := os.WriteFile(path, []byte(tsv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func summarizeFixture(t *testing.T, ubikSkipped bool) Results {
	t.Helper()
	path := fixture(t, ubikSkipped)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := readRuns(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := summarize(runs, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarize(t *testing.T) {
	res := summarizeFixture(t, false)
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(res.Rows))
	}
	byQuery := map[string]Row{}
	for _, r := range res.Rows {
		byQuery[r.Query] = r
	}
	if q8 := byQuery["q8"]; q8.Ubik.Status != "not built (ubik run refuses q8: unknown source)" || q8.DuckDB.Status != "ok" || q8.CPURatio != nil {
		t.Errorf("q8 (ubik refuses it): %+v", q8)
	}
	std := res.Rows[0]
	if std.Ubik.Status != "ok" || std.Ubik.Runs != 2 || std.DuckDB.Runs != 2 {
		t.Fatalf("std: %+v", std)
	}
	// ubik CPU 0.4 and 0.5 s: median 0.45 s over 1M events = 0.45 µs/event.
	if !near(std.Ubik.CPUMicrosPerEvent, 0.45) || !near(std.DuckDB.CPUMicrosPerEvent, 0.5) {
		t.Errorf("cpu per event: ubik %v duckdb %v", std.Ubik.CPUMicrosPerEvent, std.DuckDB.CPUMicrosPerEvent)
	}
	// Paired ratios 0.8 and 1.0: median 0.9.
	if std.CPURatio == nil || !near(*std.CPURatio, 0.9) {
		t.Errorf("cpu ratio %v, want 0.9", std.CPURatio)
	}
	if !near(std.Ubik.EventsPerSecond, 2e6) || !near(std.Ubik.PeakRSSMB, 60) {
		t.Errorf("ubik events/s %v rss %v", std.Ubik.EventsPerSecond, std.Ubik.PeakRSSMB)
	}
	if std.Ubik.Stats["state_bytes_per_group"] != 96 || std.DuckDB.Stats["rows"] != 101458 {
		t.Errorf("stats: %v / %v", std.Ubik.Stats, std.DuckDB.Stats)
	}
	q12 := byQuery["q12"]
	if !strings.HasPrefix(q12.Ubik.Status, "failed: rep 1 exit 1") || !strings.Contains(q12.Ubik.Status, "out of memory") {
		t.Errorf("q12 ubik status %q", q12.Ubik.Status)
	}
	if q12.CPURatio != nil {
		t.Errorf("q12 ratio %v with no successful ubik run", *q12.CPURatio)
	}
	want := map[string]bool{
		"std: CPU per event vs DuckDB (1M events)":                          false, // 0.9, over 0.6
		"std: wall time vs DuckDB (events/s at least DuckDB's) (1M events)": false, // 0.5 s against 0.3 s
		"std: peak RSS (1M events)":                                         true,
		"std: state bytes per live (group, window) (1M events)":             true,
		"std: p99 emission latency (1M events)":                             true,
	}
	if len(res.Targets) != len(want) {
		t.Fatalf("targets %+v", res.Targets)
	}
	for _, tg := range res.Targets {
		if pass, ok := want[tg.Name]; !ok || tg.Pass != pass {
			t.Errorf("target %+v", tg)
		}
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| std | 1M | 0.50 | 2.00M | 0.45 | 60 | 400.0 / 1004.0 | 96 |", "| 0.90 |", "failed", "out of memory",
		"| q8 | 1M | not built |", "- ubik q8 1M events, 10k groups: not built (ubik run refuses q8: unknown source)"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}

func TestSummarizeUbikNotBuilt(t *testing.T) {
	res := summarizeFixture(t, true)
	if st := res.Rows[0].Ubik.Status; st != "not built (run: not implemented yet)" {
		t.Fatalf("status %q", st)
	}
	if len(res.Targets) != 0 {
		t.Errorf("targets without ubik: %+v", res.Targets)
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "**ubik: not built (run: not implemented yet)**") || !strings.Contains(md.String(), "| std | 1M | not built |") {
		t.Errorf("markdown does not say ubik is not built:\n%s", md.String())
	}
	if !strings.Contains(md.String(), "| 0.30 | 3.33M | 0.50 | 112 | 101458 | — |") {
		t.Errorf("DuckDB figures missing:\n%s", md.String())
	}
	js, err := json.Marshal(res)
	if err != nil || !bytes.Contains(js, []byte(`"cpu_us_per_event":0.5`)) {
		t.Errorf("json: %s %v", js, err)
	}
}

func TestReadRunsRejects(t *testing.T) {
	for _, bad := range []string{
		"wrong header\n",
		runsHeader + "\nmain\tstd\n",
		runsHeader + "\nmain\tstd\tmerchant\tx\t1\tzipf\t1\tubik\tran\t\t\t\n",
		runsHeader + "\nmain\tstd\tmerchant\t10\t1\tzipf\t1\tflink\tran\t\t\t\n",
		runsHeader + "\nmain\tstd\tmerchant\t10\t1\tzipf\t1\tubik\tdone\t\t\t\n",
	} {
		if _, err := readRuns(strings.NewReader(bad)); !errors.Is(err, ErrRuns) {
			t.Errorf("readRuns(%q): %v, want ErrRuns", bad, err)
		}
	}
}

func TestScalingVerdict(t *testing.T) {
	row := func(groups int64, ubik, duck float64) Row {
		return Row{Set: "scaling", Query: "std", Groups: groups,
			Ubik: Measure{Status: "ok", CPUMicrosPerEvent: ubik}, DuckDB: Measure{Status: "ok", CPUMicrosPerEvent: duck}}
	}
	s := scaling([]Row{row(10_000_000, 0.6, 2), row(1000, 0.5, 0.5), row(100_000, 0.55, 1)})
	if s == nil || !near(s.UbikGrowth, 1.2) || !near(s.DuckDBGrowth, 4) || !strings.HasPrefix(s.Verdict, "flat") {
		t.Fatalf("%+v", s)
	}
	s = scaling([]Row{row(1000, 0.5, 0.5), row(10_000_000, 1.0, 0.5)})
	if !strings.HasPrefix(s.Verdict, "not flat: ubik's CPU per event grows 2.00x from 1k to 10M groups") {
		t.Fatalf("%+v", s)
	}
}

func TestMedianAndRatio(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if r := pairedRatio(map[int]float64{1: 1, 2: 3}, map[int]float64{2: 1}); r == nil || *r != 3 {
		t.Errorf("ratio %v: only repeat 2 is paired", r)
	}
}

func TestCompare(t *testing.T) {
	ref := `{"key": ["m1", "2026-07-18 10:00:00"], "value": {"merchant": "m1", "orders": 3, "total": 30.000000000000004}}
{"key": ["m2", "2026-07-18 10:00:00"], "value": {"merchant": "m2", "orders": 1, "total": 5.0}}
{"key": ["m3", "2026-07-18 10:00:00"], "value": {"merchant": "m3", "orders": 1, "total": 5.0}}
{"key": [1000, "2026-07-18"], "value": {"auction": 1000, "n": 1}}
`
	// Early emissions first, then the final values; keys with other spacing
	// or as strings; one value within tolerance; m3 differs; m4 is extra.
	got := `{"key": "[\"m1\", \"2026-07-18 10:00:00\"]", "value": "{\"merchant\": \"m1\", \"orders\": 1, \"total\": 10.0}", "final": false}
{"key": ["m1","2026-07-18 10:00:00"], "value": {"merchant": "m1", "orders": 3, "total": 30.0}}
{"key": ["m2", "2026-07-18 10:00:00"], "value": {"merchant": "m2", "orders": 1, "total": 5.0}}
{"key": ["m3", "2026-07-18 10:00:00"], "value": {"merchant": "m3", "orders": 2, "total": 5.0}}
{"key": ["m4", "2026-07-18 10:00:00"], "value": {"merchant": "m4", "orders": 2, "total": 5.0}}
`
	rr, err := finalRows(strings.NewReader(ref), "ref")
	if err != nil {
		t.Fatal(err)
	}
	gr, err := finalRows(strings.NewReader(got), "got")
	if err != nil {
		t.Fatal(err)
	}
	r := compareRows(rr, gr, 1e-9)
	if r.Exact != 1 || r.Close != 1 || r.Differ != 1 || r.Missing != 1 || r.Extra != 1 {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{`{"k": 1}`, `{"key": [1], "value": 3}`, `{"key": "[1", "value": {}}`, `[1]`, `{"key": [1], "value": {"a": }`} {
		if _, err := finalRows(strings.NewReader("\n"+bad+"\n"), "bad"); err == nil || !strings.Contains(err.Error(), "bad:2") {
			t.Errorf("%s: error %v does not name the line", bad, err)
		}
	}
	// One key in two spellings is one key; the last value wins.
	esc, err := finalRows(strings.NewReader(`{"key": ["\u0041\n", 1.50], "value": {"a": 1}}`+"\n"+`{"key": "[\"A\\n\", 1.50]", "value": {"a": 2}}`), "esc")
	if err != nil || len(esc.vals) != 1 || esc.vals[esc.order[0]] != `{"a":2}` {
		t.Errorf("escaped spellings of one key: %v %+v", err, esc)
	}
	same := compareRows(rr, rr, 0)
	if same.Exact != 4 || same.Differ+same.Missing+same.Extra+same.Close != 0 {
		t.Errorf("self comparison %+v", same)
	}
}

func TestCLI(t *testing.T) {
	path := fixture(t, true)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"summarize", "--runs", path, "--out-dir", out, "--meta", "seed=1"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	for _, f := range []string{"results.json", "results.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stdout.String(), "- seed: 1") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	for _, args := range [][]string{nil, {"plot"}, {"summarize"}, {"compare", "--ref", "x"}, {"summarize", "--runs", path, "--meta", "novalue"}} {
		if err := run(args, &stdout, &stderr); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// A join's summary counts each input and sums them: the point's events
// are one input's, and reading them all is no note.
func TestReadAllTwoInputs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(p, []byte(`{"events_read": 1502000, "inputs": [{"input": "person", "events_read": 502000}, {"input": "auction", "events_read": 1000000}]}`), 0o644)
	st, err := readStats(p)
	if err != nil {
		t.Fatal(err)
	}
	if st["input.auction.events_read"] != 1e6 || st["input.person.events_read"] != 502000 {
		t.Fatalf("stats %v", st)
	}
	if _, ok := readAll(st, 1_000_000); !ok {
		t.Error("the auctions were read whole, but readAll says not")
	}
	if ev, ok := readAll(st, 2_000_000); ok || ev != 1502000 {
		t.Errorf("readAll(2M) = %d, %v: 1.502M of 2M events is a short read", ev, ok)
	}
	if _, ok := readAll(map[string]float64{"events_read": 10}, 10); !ok {
		t.Error("one input read whole")
	}
}

// TestSummarizeBaseline: a second ubik binary in the same repeats gets its
// own figures, ratios paired repeat by repeat, the regression targets of
// the other queries and the scaling target.
func TestSummarizeBaseline(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "runs"), 0o755)
	var tsv strings.Builder
	tsv.WriteString(runsHeader + "\n")
	n := 0
	add := func(set, q, wl string, events, groups int64, dist string, rep int, engine string, cpu, wall float64) {
		n++
		name := fmt.Sprintf("runs/%d.time", n)
		text := fmt.Sprintf("\tUser time (seconds): %.2f\n\tSystem time (seconds): 0.00\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:%05.2f\n\tMaximum resident set size (kbytes): 40960\n\tExit status: 0\n", cpu, wall)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&tsv, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\tran\t%s\t\t\n", set, q, wl, events, groups, dist, rep, engine, name)
	}
	// std: ubik 0.5 and 0.6 CPU-s against the baseline's 1.0 and 0.8
	// (pairs 0.5 and 0.75), DuckDB 1.0 both times.
	for rep, c := range []struct{ ubik, base float64 }{{0.5, 1.0}, {0.6, 0.8}} {
		add("main", "std", "merchant", 1_000_000, 10000, "zipf", rep+1, "ubik", c.ubik, 0.4)
		add("main", "std", "merchant", 1_000_000, 10000, "zipf", rep+1, "baseline", c.base, 0.8)
		add("main", "std", "merchant", 1_000_000, 10000, "zipf", rep+1, "duckdb", 1.0, 0.5)
	}
	// q7 regressed: 1.2 against 1.0; q11 within the bound: 1.05 against 1.0.
	add("main", "q7", "bids", 1_000_000, 10000, "zipf", 1, "ubik", 1.2, 1)
	add("main", "q7", "bids", 1_000_000, 10000, "zipf", 1, "baseline", 1.0, 1)
	add("main", "q7", "bids", 1_000_000, 10000, "zipf", 1, "duckdb", 1.0, 1)
	add("main", "q11", "bids", 1_000_000, 10000, "zipf", 1, "ubik", 1.05, 1)
	add("main", "q11", "bids", 1_000_000, 10000, "zipf", 1, "baseline", 1.0, 1)
	add("main", "q11", "bids", 1_000_000, 10000, "zipf", 1, "duckdb", 1.0, 1)
	// Scaling: 0.5 µs/event at 1k groups, 0.8 at 10M: growth 1.6.
	add("scaling", "std", "merchant", 1_000_000, 1000, "uniform", 1, "ubik", 0.5, 1)
	add("scaling", "std", "merchant", 1_000_000, 1000, "uniform", 1, "duckdb", 0.5, 1)
	add("scaling", "std", "merchant", 1_000_000, 10_000_000, "uniform", 1, "ubik", 0.8, 1)
	add("scaling", "std", "merchant", 1_000_000, 10_000_000, "uniform", 1, "duckdb", 0.5, 1)
	runs, err := readRuns(strings.NewReader(tsv.String()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := summarize(runs, dir)
	if err != nil {
		t.Fatal(err)
	}
	std := res.Rows[0]
	if std.Baseline == nil || std.Baseline.Runs != 2 || !near(std.Baseline.CPUMicrosPerEvent, 0.9) {
		t.Fatalf("std baseline: %+v", std.Baseline)
	}
	if std.BaselineCPURatio == nil || !near(*std.BaselineCPURatio, 0.625) {
		t.Errorf("ubik/baseline CPU %v, want 0.625 (pairs 0.5, 0.75)", std.BaselineCPURatio)
	}
	if std.BaselineWallRatio == nil || !near(*std.BaselineWallRatio, 0.5) || std.BaselineDuckDBCPURatio == nil || !near(*std.BaselineDuckDBCPURatio, 0.9) {
		t.Errorf("wall ratio %v, baseline/DuckDB %v", std.BaselineWallRatio, std.BaselineDuckDBCPURatio)
	}
	if std.CPURatio == nil || !near(*std.CPURatio, 0.55) || std.WallRatio == nil || !near(*std.WallRatio, 0.8) {
		t.Errorf("ubik/DuckDB: CPU %v wall %v", std.CPURatio, std.WallRatio)
	}
	if res.Rows[3].Baseline != nil {
		t.Errorf("a point the baseline did not run has its figures: %+v", res.Rows[3].Baseline)
	}
	want := map[string]bool{
		"std: CPU per event vs DuckDB (1M events)":                          true,
		"std: wall time vs DuckDB (events/s at least DuckDB's) (1M events)": true,
		"std: peak RSS (1M events)":                                         true,
		"q7: CPU per event vs the baseline (no regression) (1M events)":     false,
		"q11: CPU per event vs the baseline (no regression) (1M events)":    true,
		"scaling: CPU per event at 10M groups over 1k":                      false,
	}
	got := map[string]bool{}
	for _, tg := range res.Targets {
		got[tg.Name] = tg.Pass
	}
	for name, pass := range want {
		if p, ok := got[name]; !ok || p != pass {
			t.Errorf("target %q: pass %v (present %v), want %v", name, p, ok, pass)
		}
	}
	if len(got) != len(want) {
		t.Errorf("targets %+v", res.Targets)
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## ubik against the baseline binary", "| main | std | 1M | 10k | 0.55 | 0.90 | 0.62 | 0.40 | 0.80 | 0.50 | 40 | 40 | 0.90 |", "| 0.55 | 0.80 |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}
