package ubik_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/scripttest"
	"github.com/ubiksql/ubik/internal/testenv"
)

// TestScriptsCLI runs the behaviour tests through `ubik run` on files:
// each query's events in an input file (its second input in the file its
// CREATE TABLE or CREATE SOURCE names), its changelog, dead letters, late
// events and summary read back. Every script runs here at least in part.
func TestScriptsCLI(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "ubik")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/ubik")
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t)) // cmd/ubik is its own module
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	scripttest.Runner{Glob: scriptGlob, MustRun: true, Parallel: true}.Run(t, cliHost{bin: bin})
}

// cliHost runs each query of a script as one `ubik run`; a kill is a
// SIGKILL of the run, then the same command again on its state dir.
type cliHost struct{ bin string }

func (cliHost) Name() string { return "ubik run" }

func (cliHost) Unobserved(l scripttest.Line) string {
	if l.Kind == scripttest.Inputs {
		return "a query's inputs are the Go API's Query.Inputs"
	}
	return ""
}

// StopsAtFirstError: an error that is not a rejected event (those go to
// --dead-letter) stops a file run.
func (cliHost) StopsAtFirstError() bool { return true }

// Normalize: a file run's messages leave out the package names ("types:
// bad timestamp" is "bad timestamp"), as the CLI prints every message.
func (cliHost) Normalize(l scripttest.Line) string {
	if l.Kind != scripttest.EventError {
		return l.Text
	}
	return cleanMessage(l.Text)
}

// cleanMessage is internal/cli's: the package prefixes it strips.
func cleanMessage(s string) string {
	for _, p := range []string{"ubik", "types", "exec", "plan", "parser", "changelog", "kafka", "kafkasrc"} {
		s = strings.ReplaceAll(s, ": "+p+": ", ": ")
	}
	return s
}

func (cliHost) Cannot(q *scripttest.Query, c *scripttest.Cmd) string {
	switch c.Name {
	case "sql":
		if q.Name() == "" && strings.Count(strings.ToUpper(q.Text()), "CREATE VIEW") > 1 && !hasBareSelect(q.Text()) {
			return "a file run of several queries runs the one --query names, or each into its own file (--output-dir); the script names none"
		}
	case "watermark":
		return "a file run's watermark comes from its events' times: there is no advancing it by command"
	case "early":
		return "a file run emits early on the clock (EMIT EARLY EVERY), not on command"
	case "tick":
		return "a file run's processing clock is the machine's"
	case "table-watermark":
		return "a file run's table watermark comes from the rows of the table's file"
	case "table", "end-table":
		if q.After(c, "push") {
			return "a file run reads the table's file whole, and ends it, before the stream; the script pushes events first"
		}
	case "input":
		if !declares(q.Text(), c.Arg) {
			return "a file run reads the inputs its script declares, and " + c.Arg + " is none"
		}
	case "end-input":
		for _, o := range q.Cmds {
			if o.Line > c.Line && o.Name == "input" && o.Arg == c.Arg {
				return "a file run ends an input at the end of its file; the script pushes to it after ending it"
			}
		}
	case "kill":
		switch {
		case strings.Contains(strings.ToUpper(q.Text()), "EMIT EARLY"):
			return "a file run waiting at the kill point emits early on the clock"
		case q.After(c, "kill"):
			return "a file run resumes from a file, which it then reads to its end: one kill per run"
		case q.After(c, "close"):
			return "the run has ended: there is nothing to kill"
		}
	}
	if c.Name == "push" || c.Name == "input" || c.Name == "table" {
		if q.After(c, "close") {
			return "a file run's input ends with its files; the script pushes after closing"
		}
	}
	return ""
}

// declares reports whether the script declares source or table name.
func declares(sql, name string) bool {
	return regexp.MustCompile(`(?i)CREATE\s+(SOURCE|TABLE)\s+` + regexp.QuoteMeta(name) + `\s*\(`).MatchString(sql)
}

// hasBareSelect reports whether the script has a query that is not a view.
func hasBareSelect(sql string) bool {
	for _, st := range strings.Split(sql, ";") {
		if f := strings.Fields(st); len(f) > 0 && strings.EqualFold(f[0], "SELECT") {
			return true
		}
	}
	return false
}

func (h cliHost) Run(t *testing.T, g *scripttest.Segment) [][]string {
	var out []string
	for _, q := range g.Queries {
		if q.SQL == nil {
			for _, c := range q.Cmds {
				if c.Name != "expect" {
					out = append(out, "! no query running")
				}
			}
			continue
		}
		out = append(out, h.runQuery(t, q)...)
	}
	return [][]string{out}
}

// cliRun is one query's file run: its directory, files and arguments.
type cliRun struct {
	h       cliHost
	t       *testing.T
	q       *scripttest.Query
	dir     string
	primary string               // the query the run writes
	graph   []string             // the queries of its graph (its own name, and the views it reads)
	first   string               // its first input, which --input gives
	second  string               // its second input ("" for none), read from the file its CREATE names
	views   bool                 // the script has views: --output-dir
	input   *cliInput            // the first input's file
	seconds map[string]*cliInput // the second input's, by its name
	args    []string
}

func (h cliHost) runQuery(t *testing.T, q *scripttest.Query) []string {
	r := &cliRun{h: h, t: t, q: q, dir: t.TempDir(), views: strings.Contains(strings.ToUpper(q.Text()), "CREATE VIEW")}
	r.probe()
	if err := r.writeFiles(); err != nil {
		t.Fatalf("the query of line %d: %v", q.SQL.Line, err)
	}
	var p *crashtest.Proc
	if kill := r.killCmd(); kill != nil {
		p = r.runKilled(kill)
	} else {
		p = crashtest.Start(t, exec.Command(h.bin, r.args...))
		p.Wait(t, time.Minute)
	}
	return r.output(p)
}

func (r *cliRun) killCmd() *scripttest.Cmd {
	for _, c := range r.q.Cmds {
		if c.Name == "kill" {
			return c
		}
	}
	return nil
}

// runKilled runs the query up to the kill from a FIFO, so the run waits
// there; once it has checkpointed every line before the kill it is
// killed with SIGKILL. The FIFO is then replaced by a file with the same
// lines and the rest, and the same command resumes from the state dir.
func (r *cliRun) runKilled(kill *scripttest.Cmd) *crashtest.Proc {
	t, in := r.t, r.input
	if err := syscall.Mkfifo(in.path, 0o600); err != nil {
		t.Fatal(err)
	}
	first := crashtest.Start(t, exec.Command(r.h.bin, r.args...))
	before := in.before(kill)
	fifo, err := feedFIFO(in.path, before, first)
	if err != nil {
		t.Fatalf("feeding the run before the kill: %v\n%s", err, first.Stderr())
	}
	defer fifo.Close()
	if err := waitCheckpoint(filepath.Join(r.dir, "state", "checkpoint"), int64(len(bytes.Split(before, []byte("\n")))-1), first); err != nil {
		t.Fatalf("the kill of line %d: %v\n%s", kill.Line, err, first.Stderr())
	}
	if killed, err := first.Kill(); !killed {
		t.Fatalf("the run before the kill ended by itself: %v\n%s", err, first.Stderr())
	}
	if err := os.Remove(in.path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.path, in.all(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := crashtest.Start(t, exec.Command(r.h.bin, r.args...))
	p.Wait(t, time.Minute)
	if want := fmt.Sprintf("resuming from line %d", killLines); !strings.Contains(p.Stderr(), want) {
		t.Fatalf("the run after the kill did not say %q:\n%s", want, p.Stderr())
	}
	return p
}

// output renders what the run wrote: its SQL error, records, rejected
// events, late events and counters.
func (r *cliRun) output(p *crashtest.Proc) []string {
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		return r.failed(p.Stderr())
	}
	out := r.records()
	out = append(out, r.rejected()...)
	out = append(out, r.lates()...)
	return append(out, r.counters()...)
}

// failed renders a run that stopped on an error as the script's error
// lines: "ubik: query.sql: line 2:8: ..." is "! line 2:8: ...".
func (r *cliRun) failed(stderr string) []string {
	msg := strings.TrimRight(stderr, "\n")
	if i := strings.LastIndex(msg, "\nubik: "); i >= 0 {
		msg = msg[i+1:]
	}
	msg = strings.TrimPrefix(msg, "ubik: ")
	if m, ok := strings.CutPrefix(msg, filepath.Join(r.dir, "query.sql")+": "); ok {
		// The script did not start: no command has a query.
		out := []string{"! " + m}
		for _, c := range r.q.Cmds {
			if c.Name != "expect" {
				out = append(out, "! no query running")
			}
		}
		return out
	}
	// An input's error names the file and line: "FILE:LINE: message".
	if at := regexp.MustCompile(`^` + regexp.QuoteMeta(r.dir) + `/[^:]+:[0-9]+: `).FindString(msg); at != "" {
		msg = msg[len(at):]
	}
	return []string{"! " + msg}
}

// counters renders each stats and join-stats command: from the summary
// for one after close (the run's end), unknown ("?") before.
func (r *cliRun) counters() []string {
	var out []string
	sum := r.summary()
	for _, c := range r.q.Cmds {
		end := r.q.After(c, "close")
		switch {
		case c.Name == "stats" && end:
			out = append(out, sum.stats()...)
		case c.Name == "stats":
			// Unknown before the end; with the dedup line if the run has one.
			var c scripttest.Counters
			if sum.Duplicates+sum.DedupLate+sum.DedupKeys > 0 {
				c.Duplicates = scripttest.Int(1)
			}
			l := scripttest.StatsLines(c)
			if len(l) > 1 {
				l[1] = "duplicates=? dedup_late=? dedup_keys=?"
			}
			out = append(out, l...)
		case c.Name == "join-stats" && end:
			out = append(out, sum.joinStats()...)
		case c.Name == "join-stats":
			out = append(out, scripttest.JoinStatsLines(scripttest.JoinCounters{TableWatermark: "?"})...)
		}
	}
	return out
}

// cliSummary is the part of --stats-json the scripts print.
type cliSummary struct {
	Query            string `json:"query"`
	EventsRead       int64  `json:"events_read"`
	Malformed        int64  `json:"malformed"`
	EvalErrors       int64  `json:"eval_errors"`
	Filtered         int64  `json:"filtered"`
	Late             int64  `json:"late"`
	Duplicates       int64  `json:"duplicates"`
	DedupLate        int64  `json:"dedup_late"`
	DedupKeys        int64  `json:"dedup_keys"`
	RecordsEmitted   int64  `json:"records_emitted"`
	HavingSuppressed int64  `json:"having_suppressed"`
	WindowsFinalized int64  `json:"windows_finalized"`
	Inputs           []struct {
		EventsRead int64 `json:"events_read"`
		Malformed  int64 `json:"malformed"`
		Late       int64 `json:"late"`
	} `json:"inputs"`
	Join *struct {
		TableRows      int64 `json:"table_rows_read"`
		TableMalformed int64 `json:"table_malformed"`
		TableLate      int64 `json:"table_late"`
		Joined         int64 `json:"events_joined"`
		Unmatched      int64 `json:"events_unmatched"`
		JoinLate       int64 `json:"events_late_at_join"`
		VersionsDrop   int64 `json:"join_versions_dropped"`
	} `json:"join"`
}

// summary reads the primary query's summary.
func (r *cliRun) summary() *cliSummary {
	b, err := os.ReadFile(filepath.Join(r.dir, "stats.json"))
	if err != nil {
		r.t.Fatal(err)
	}
	var all []*cliSummary
	if json.Unmarshal(b, &all) != nil {
		var one cliSummary
		if err := json.Unmarshal(b, &one); err != nil {
			r.t.Fatalf("--stats-json: %v\n%s", err, b)
		}
		all = []*cliSummary{&one}
	}
	for _, s := range all {
		if s.Query == r.primary || len(all) == 1 {
			return s
		}
	}
	r.t.Fatalf("--stats-json has no summary of %s:\n%s", r.primary, b)
	return nil
}

// stats renders the summary as stats prints it. A query of two inputs
// counts its first input's events (the summary's totals add the second's).
func (s *cliSummary) stats() []string {
	i := scripttest.Int
	events, malformed, late := s.EventsRead, s.Malformed, s.Late
	if len(s.Inputs) == 2 {
		events, malformed, late = s.Inputs[0].EventsRead, s.Inputs[0].Malformed, s.Inputs[0].Late
	}
	return scripttest.StatsLines(scripttest.Counters{Events: i(events), Malformed: i(malformed), EvalErrors: i(s.EvalErrors),
		Filtered: i(s.Filtered), Late: i(late), Records: i(s.RecordsEmitted), Finalized: i(s.WindowsFinalized),
		HavingSuppressed: i(s.HavingSuppressed), Duplicates: i(s.Duplicates), DedupLate: i(s.DedupLate), DedupKeys: i(s.DedupKeys)})
}

// joinStats renders the join's part of the summary as join-stats prints
// it; the summary has no current state (held events, versions, keys).
func (s *cliSummary) joinStats() []string {
	i := scripttest.Int
	c := scripttest.JoinCounters{TableWatermark: "?"}
	if j := s.Join; j != nil {
		c.LateEvents, c.Joined, c.Unmatched, c.Dropped = i(j.JoinLate), i(j.Joined), i(j.Unmatched), i(j.VersionsDrop)
		c.TableRows, c.TableMalformed, c.TableLate = i(j.TableRows), i(j.TableMalformed), i(j.TableLate)
	}
	return scripttest.JoinStatsLines(c)
}

// probe starts the query in process to learn its name, its graph and its
// first input (the one --input gives). A bare SELECT is named after the
// script's file, query.sql, in a file run, as "query" in process.
func (r *cliRun) probe() {
	r.primary = r.q.Name()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		r.t.Fatal(err)
	}
	defer eng.Close()
	uq, err := eng.Start(r.q.Text(), ubik.QueryOptions{Name: r.q.Name()})
	if err != nil {
		return // the run fails the same way
	}
	r.primary, r.graph, r.first = uq.Plan().Name(), uq.Queries(), uq.Inputs()[0]
	if in := uq.Inputs(); len(in) > 1 {
		r.second = in[1]
	}
}
