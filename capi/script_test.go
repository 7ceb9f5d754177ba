package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/scripttest"
	"github.com/ubiksql/ubik/internal/types"
)

// TestScripts runs the behaviour tests of testdata/script (the format is
// internal/scripttest's) through the C ABI (capi/test/script_host.c) and
// through the Python binding (python/tests/script_host.py), as the root
// package runs them through the Go API and `ubik run`.
func TestScripts(t *testing.T) {
	t.Parallel()
	a := build(t)
	host := filepath.Join(a.dir, "script_host")
	gcc := exec.Command("gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-I"+a.dir,
		"capi/test/script_host.c", "-L"+a.dir, "-lubik", "-Wl,-rpath,"+a.dir, "-o", host)
	gcc.Dir = a.repo
	if out, err := gcc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required for the binding's tests: %v", err)
	}
	for _, h := range []*abiHost{
		{name: "the C ABI", cmd: []string{host}},
		{name: "Python", python: true, cmd: []string{py, filepath.Join(a.repo, "python/tests/script_host.py")},
			env: []string{"UBIK_LIB=" + a.lib, "PYTHONPATH=" + filepath.Join(a.repo, "python"), "PYTHONDONTWRITEBYTECODE=1"}},
	} {
		t.Run(strings.TrimPrefix(h.name, "the "), func(t *testing.T) {
			t.Parallel()
			scripttest.Runner{Glob: "../testdata/script/*.txt", Parallel: true}.Run(t, h)
		})
	}
}

// abiHost runs a script through a host program over libubik.so: the
// commands translated to its program (script_host.c describes it), its
// output read back per expect.
type abiHost struct {
	name   string
	python bool
	cmd    []string
	env    []string
}

func (h *abiHost) Name() string { return h.name }

func (h *abiHost) Cannot(q *scripttest.Query, c *scripttest.Cmd) string {
	switch c.Name {
	case "tick":
		return "the C ABI's processing clock is the machine's"
	case "end-input":
		return "the C ABI ends a versioned table's input (ubik_end_table), not a stream's"
	}
	return ""
}

// NoKill: a kill is left out.
func (h *abiHost) NoKill() string { return "the C ABI has no checkpoint and restore" }

func (h *abiHost) Unobserved(l scripttest.Line) string {
	switch {
	case l.Kind == scripttest.Inputs:
		return "a query's inputs are the Go API's Query.Inputs"
	case l.Kind == scripttest.Late:
		return "the C ABI has no late-event callback: late events are only counted"
	case l.View != "":
		return "the C ABI publishes a query's own records, not its views'"
	}
	return ""
}

// Normalize: a call on a query that failed (a CSV header the source does
// not match) reports the failure, "capi: the query has failed: " and why,
// where the Go API reports why again.
func (h *abiHost) Normalize(l scripttest.Line) string {
	if l.Kind != scripttest.Error {
		return l.Text
	}
	return strings.Replace(l.Text, "! capi: the query has failed: ", "! ", 1)
}

func (h *abiHost) Run(t *testing.T, g *scripttest.Segment) [][]string {
	dir := t.TempDir()
	var prog strings.Builder
	var stats []string // the stats and join-stats commands, in order
	for i, q := range g.Queries {
		if q.SQL != nil {
			file := filepath.Join(dir, fmt.Sprintf("q%d.sql", i))
			if err := os.WriteFile(file, []byte(q.Text()), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&prog, "sql\t%s\t%d\t%s\n", q.Name(), q.JoinBuffer(), file)
		}
		for _, c := range q.Cmds {
			if c.Name == "stats" || c.Name == "join-stats" {
				stats = append(stats, c.Name)
			}
			prog.WriteString(program(t, q, c))
		}
	}
	file := filepath.Join(dir, "program")
	if err := os.WriteFile(file, []byte(prog.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(h.cmd[0], append(h.cmd[1:], file)...)
	cmd.Env = append(os.Environ(), h.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", h.name, err, stderr.String())
	}
	return h.parse(t, string(out), stats)
}

// program is command c of query q as the host program's lines.
func program(t *testing.T, q *scripttest.Query, c *scripttest.Cmd) string {
	var b strings.Builder
	switch c.Name {
	case "push":
		for _, l := range c.Block {
			b.WriteString("push\t" + l + "\n")
		}
	case "input", "table":
		name := c.Arg
		if c.Name == "table" {
			name = tableName(q.Text())
		}
		for _, l := range c.Block {
			b.WriteString("input\t" + name + "\t" + l + "\n")
		}
	case "watermark", "table-watermark":
		us, err := types.ParseTimestamp([]byte(c.Arg))
		if err != nil {
			t.Fatalf("line %d: %v", c.Line, err)
		}
		fmt.Fprintf(&b, "%s\t%d\n", c.Name, us)
	case "stats", "join-stats":
		b.WriteString("stats\n")
	case "end-table", "early", "close", "expect":
		b.WriteString(c.Name + "\n")
	}
	return b.String()
}

// tableName is the name of the script's versioned table.
func tableName(sql string) string {
	m := regexp.MustCompile(`(?i)CREATE\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*)`).FindStringSubmatch(sql)
	if m == nil {
		return ""
	}
	return m[1]
}

// parse reads the host program's output into one block per expect.
func (h *abiHost) parse(t *testing.T, out string, stats []string) [][]string {
	var blocks [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		kind, rest, _ := strings.Cut(l, "\t")
		switch kind {
		case "X":
			blocks, cur = append(blocks, cur), nil
		case "R":
			f := strings.SplitN(rest, "\t", 5)
			rev, err := strconv.ParseUint(f[1], 10, 64)
			if len(f) != 5 || err != nil {
				t.Fatalf("%s: record line %q", h.name, l)
			}
			cur = append(cur, scripttest.RecordLine("", f[0] == "1", rev, f[3], f[4]))
		case "E":
			msg := strings.NewReplacer(`\\`, `\`, `\n`, "\n").Replace(rest)
			cur = append(cur, strings.Split("! "+msg, "\n")...)
		case "S":
			if len(stats) == 0 {
				t.Fatalf("%s: stats the script did not ask for: %s", h.name, rest)
			}
			cur = append(cur, statsLines(t, stats[0], rest)...)
			stats = stats[1:]
		case "":
		default:
			t.Fatalf("%s: output line %q", h.name, l)
		}
	}
	return blocks
}

// abiStats is the part of ubik_query_stats the scripts print.
type abiStats struct {
	EventsIn         int64 `json:"events_in"`
	Malformed        int64 `json:"malformed"`
	EvalErrors       int64 `json:"eval_errors"`
	Filtered         int64 `json:"filtered"`
	Late             int64 `json:"late"`
	RecordsOut       int64 `json:"records_out"`
	WindowsFinalized int64 `json:"windows_finalized"`
	HavingSuppressed int64 `json:"having_suppressed"`
	LiveGroups       int64 `json:"live_groups"`
	Duplicates       int64 `json:"duplicates"`
	DedupLate        int64 `json:"dedup_late"`
	Table            *struct {
		RowsIn    int64 `json:"rows_in"`
		Malformed int64 `json:"malformed"`
		Late      int64 `json:"late"`
	} `json:"table"`
	Join *struct {
		Events           int64  `json:"events"`
		LateEvents       int64  `json:"late_events"`
		Joined           int64  `json:"joined"`
		Unmatched        int64  `json:"unmatched"`
		NullKeys         int64  `json:"null_keys"`
		Buffered         int64  `json:"buffered"`
		Versions         int64  `json:"versions"`
		Keys             int64  `json:"keys"`
		Dropped          int64  `json:"dropped"`
		TableWatermarkUs *int64 `json:"table_watermark_us"`
	} `json:"join"`
}

// statsLines renders the stats JSON as command name (stats or join-stats)
// prints it.
func statsLines(t *testing.T, name, js string) []string {
	var s abiStats
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("stats %s: %v", js, err)
	}
	i := scripttest.Int
	if name == "stats" {
		return scripttest.StatsLines(scripttest.Counters{Events: i(s.EventsIn), Malformed: i(s.Malformed), EvalErrors: i(s.EvalErrors),
			Filtered: i(s.Filtered), Late: i(s.Late), Records: i(s.RecordsOut), Finalized: i(s.WindowsFinalized),
			HavingSuppressed: i(s.HavingSuppressed), LiveGroups: i(s.LiveGroups), Duplicates: i(s.Duplicates), DedupLate: i(s.DedupLate)})
	}
	c := scripttest.JoinCounters{TableWatermark: "-"}
	if j := s.Join; j != nil {
		c.Events, c.LateEvents, c.Joined, c.Unmatched, c.NullKeys = i(j.Events), i(j.LateEvents), i(j.Joined), i(j.Unmatched), i(j.NullKeys)
		c.Buffered, c.Versions, c.Keys, c.Dropped = i(j.Buffered), i(j.Versions), i(j.Keys), i(j.Dropped)
		if us := j.TableWatermarkUs; us != nil && *us >= types.MinTimestamp && *us <= types.MaxTimestamp {
			b := changelog.AppendCell(nil, types.TS(*us))
			c.TableWatermark = string(b[1 : len(b)-1])
		}
	}
	if tb := s.Table; tb != nil {
		c.TableRows, c.TableMalformed, c.TableLate = i(tb.RowsIn), i(tb.Malformed), i(tb.Late)
	}
	return scripttest.JoinStatsLines(c)
}
