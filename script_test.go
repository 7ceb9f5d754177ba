package ubik_test

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/scripttest"
	"github.com/ubiksql/ubik/internal/types"
)

var update = flag.Bool("update", false, "rewrite the expect blocks of testdata/script/*.txt with the actual output")

// scriptGlob are the behaviour tests every host runs (internal/scripttest
// describes the format).
const scriptGlob = "testdata/script/*.txt"

// TestScripts runs the behaviour tests through the root Go API, the
// reference: its output is each expect block verbatim (-update rewrites
// them). TestScriptsCLI runs them through `ubik run`; capi and kafka run
// them through the C ABI, Python and Kafka.
func TestScripts(t *testing.T) {
	scripttest.Runner{Glob: scriptGlob, Reference: true, Update: *update, Parallel: true}.Run(t, apiHost{})
}

// apiHost runs a script through ubik.Query, every command as the API has
// it; a kill checkpoints the query, drops it and restores a new one.
type apiHost struct{}

func (apiHost) Name() string                                     { return "the Go API" }
func (apiHost) Unobserved(scripttest.Line) string                { return "" }
func (apiHost) Cannot(*scripttest.Query, *scripttest.Cmd) string { return "" }

// apiRun is one segment's run: the query, the output since the last
// expect, the processing clock and the checkpoint a kill restores.
type apiRun struct {
	t       *testing.T
	g       *scripttest.Segment
	sq      *scripttest.Query // the script's query running
	eng     *ubik.Engine
	clock   time.Time
	q       *ubik.Query
	out     []string
	entries map[string][]byte // the last checkpoint's entries (a kill's)
	// incremental: a kill's checkpoint holds only the entries changed
	// since the last (all of them, in the entry format, the first time).
	incremental bool
}

// Run runs the segment; one with a kill runs again with incremental
// checkpoints (a kill's full checkpoint and an incremental one restore
// through different paths), which must give the same output.
func (apiHost) Run(t *testing.T, g *scripttest.Segment) [][]string {
	blocks := apiHost{}.run(t, g, false)
	for _, c := range g.Cmds {
		if c.Name != "kill" {
			continue
		}
		if again := (apiHost{}).run(t, g, true); !slices.EqualFunc(blocks, again, slices.Equal) {
			t.Errorf("%s: with incremental checkpoints at the kills the output differs:\n%s\n--- with full checkpoints\n%s",
				g.At(), joinBlocks(again), joinBlocks(blocks))
		}
		break
	}
	return blocks
}

func joinBlocks(blocks [][]string) string {
	var b strings.Builder
	for _, l := range blocks {
		b.WriteString(strings.Join(l, "\n") + "\n> expect\n")
	}
	return b.String()
}

func (apiHost) run(t *testing.T, g *scripttest.Segment, incremental bool) [][]string {
	r := &apiRun{t: t, g: g, clock: time.Date(2026, 7, 18, 12, 0, 0, 0, time.UTC), incremental: incremental}
	opts := ubik.DefaultOptions()
	opts.Now = func() time.Time { return r.clock }
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	var blocks [][]string
	for _, sq := range g.Queries {
		if sq.SQL != nil {
			r.sq, r.q, r.entries = sq, nil, nil
			r.start()
			if r.incremental && r.q != nil {
				// A first checkpoint before any input: the kill's is a
				// delta over it.
				r.checkpoint(sq.SQL, false, "start")
			}
		}
		for _, c := range sq.Cmds {
			switch {
			case c.Name == "expect":
				blocks = append(blocks, r.out)
				r.out = nil
			case r.q == nil:
				r.out = append(r.out, "! no query running")
			default:
				r.do(c)
			}
		}
	}
	if len(r.out) > 0 {
		t.Errorf("%s: output after the last expect:\n%s", g.At(), strings.Join(r.out, "\n"))
	}
	return blocks
}

func (r *apiRun) fail(err error) {
	if err != nil {
		r.out = append(r.out, "! "+err.Error())
	}
}

func (r *apiRun) record(rec changelog.Record) error {
	r.out = append(r.out, scripttest.RecordLine("", rec.Meta.Final, rec.Meta.Revision, string(rec.Key), string(rec.Value)))
	return nil
}

// late renders a late event (view names a view's, "" the query's own).
func (r *apiRun) late(view string, ev *ubik.LateEvent) {
	w := "-"
	if ev.Windowed {
		w = fmt.Sprintf("[%s, %s)", ts(ev.WindowStart), ts(ev.WindowEnd))
	}
	r.out = append(r.out, scripttest.LateLine(view, ev.Reason, ts(ev.EventTime), w, ts(ev.Watermark)))
}

func (r *apiRun) options() ubik.QueryOptions {
	return ubik.QueryOptions{Name: r.sq.Name(), OnRecord: r.record,
		OnLate:      func(ev *ubik.LateEvent) { r.late("", ev) },
		OnLateTable: func(ev *ubik.LateEvent) { r.late("", ev) },
		OnViewLate:  r.late,
		OnViewRecord: func(rec changelog.Record) error {
			r.out = append(r.out, scripttest.RecordLine(rec.Meta.Query, rec.Meta.Final, rec.Meta.Revision, string(rec.Key), string(rec.Value)))
			return nil
		},
		JoinBuffer: r.sq.JoinBuffer()}
}

func (r *apiRun) start() {
	q, err := r.eng.Start(r.sq.Text(), r.options())
	if err != nil {
		r.fail(err)
		type caret interface{ Caret() string }
		var ce caret
		if errors.As(err, &ce) {
			r.out = append(r.out, strings.Split(strings.TrimRight(ce.Caret(), "\n"), "\n")...)
		}
		return
	}
	r.q = q
}

// do runs one command on the running query.
func (r *apiRun) do(c *scripttest.Cmd) {
	q := r.q
	switch c.Name {
	case "push":
		for _, l := range c.Block {
			r.fail(q.Push([]byte(l)))
		}
	case "input":
		for _, l := range c.Block {
			r.fail(q.PushInput(c.Arg, []byte(l)))
		}
	case "end-input":
		r.fail(q.EndInput(c.Arg))
	case "table":
		for _, l := range c.Block {
			r.fail(q.PushTable([]byte(l)))
		}
	case "table-watermark":
		r.fail(q.AdvanceTableWatermark(r.time(c)))
	case "end-table":
		r.fail(q.EndTable())
	case "watermark":
		r.fail(q.AdvanceWatermark(r.time(c)))
	case "early":
		r.fail(q.EmitEarly())
	case "tick":
		d, err := time.ParseDuration(c.Arg)
		if err != nil {
			r.t.Fatalf("%s:%d: %v", r.g.Script.Path, c.Line, err)
		}
		r.clock = r.clock.Add(d)
		r.fail(q.Tick())
	case "close":
		r.fail(q.Close())
	case "kill":
		r.kill(c)
	case "stats":
		r.out = append(r.out, statsLines(q.Stats())...)
	case "join-stats":
		r.out = append(r.out, joinStatsLines(q.Stats())...)
	case "inputs":
		r.out = append(r.out, "inputs: "+strings.Join(q.Inputs(), ", "))
	}
}

func (r *apiRun) time(c *scripttest.Cmd) time.Time {
	us, err := types.ParseTimestamp([]byte(c.Arg))
	if err != nil {
		r.t.Fatalf("%s:%d: %v", r.g.Script.Path, c.Line, err)
	}
	return time.UnixMicro(us)
}

// kill checkpoints the query (in full the first time unless the run is
// incremental; then the entries changed since, applied to the kept ones),
// drops it, and starts a new one restored from the entries; the position
// comes back.
func (r *apiRun) kill(c *scripttest.Cmd) {
	pos := fmt.Sprintf("line %d", c.Line)
	r.checkpoint(c, r.entries == nil && !r.incremental, pos)
	q, err := r.eng.Start(r.sq.Text(), r.options())
	if err != nil {
		r.t.Fatalf("%s:%d: restart: %v", r.g.Script.Path, c.Line, err)
	}
	keys := make([]string, 0, len(r.entries))
	for k := range r.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var got []byte
	for _, k := range keys {
		p, err := q.Restore([]byte(k), r.entries[k])
		if err != nil {
			r.t.Fatalf("%s:%d: restore %q: %v", r.g.Script.Path, c.Line, k, err)
		}
		if p != nil {
			got = p
		}
	}
	if err := q.FinishRestore(); err != nil {
		r.t.Fatalf("%s:%d: restore: %v", r.g.Script.Path, c.Line, err)
	}
	if string(got) != pos {
		r.t.Fatalf("%s:%d: restored position %q, want %q", r.g.Script.Path, c.Line, got, pos)
	}
	r.q = q
}

// checkpoint takes a checkpoint of the query at position pos, applied
// to the entries kept (a nil value deletes one).
func (r *apiRun) checkpoint(c *scripttest.Cmd, full bool, pos string) {
	if r.entries == nil {
		r.entries = map[string][]byte{}
	}
	err := r.q.Checkpoint(full, []byte(pos), func(k, v []byte) error {
		if v == nil {
			delete(r.entries, string(k))
		} else {
			r.entries[string(k)] = slices.Clone(v)
		}
		return nil
	})
	if err != nil {
		r.t.Fatalf("%s:%d: checkpoint: %v", r.g.Script.Path, c.Line, err)
	}
}

func statsLines(s ubik.Stats) []string {
	i := scripttest.Int
	return scripttest.StatsLines(scripttest.Counters{Events: i(s.EventsIn), Malformed: i(s.Malformed), EvalErrors: i(s.EvalErrors),
		Filtered: i(s.Filtered), Late: i(s.Late), Records: i(s.RecordsOut), Finalized: i(s.WindowsFinalized),
		HavingSuppressed: i(s.HavingSuppressed), LiveGroups: i(s.LiveGroups),
		Duplicates: i(s.Duplicates), DedupLate: i(s.DedupLate), DedupKeys: i(s.DedupKeys)})
}

func joinStatsLines(s ubik.Stats) []string {
	i, j := scripttest.Int, s.Join
	return scripttest.JoinStatsLines(scripttest.JoinCounters{Events: i(j.Events), LateEvents: i(j.LateEvents), Joined: i(j.Joined),
		Unmatched: i(j.Unmatched), NullKeys: i(j.NullKeys), Buffered: i(j.Buffered), Versions: i(j.Versions), Keys: i(j.Keys),
		Dropped: i(j.Dropped), TableRows: i(s.Table.RowsIn), TableMalformed: i(s.Table.Malformed), TableLate: i(s.Table.Late),
		TableWatermark: wmTS(j.TableWM)})
}

func ts(us int64) string {
	b := changelog.AppendCell(nil, types.TS(us))
	return string(b[1 : len(b)-1])
}

func wmTS(us int64) string {
	if us < types.MinTimestamp || us > types.MaxTimestamp {
		return "-"
	}
	return ts(us)
}

// scriptSQL is the SQL of the nth query (from 1) of script name: the join
// and view tests that generate their histories run the shapes the
// scripts keep.
func scriptSQL(t testing.TB, name string, n int) string {
	t.Helper()
	s, err := scripttest.Parse(filepath.Join("testdata", "script", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range s.Segments() {
		for _, q := range g.Queries {
			if q.SQL != nil {
				if n--; n == 0 {
					return q.Text()
				}
			}
		}
	}
	t.Fatalf("%s has no query %d", s.Path, n)
	return ""
}
