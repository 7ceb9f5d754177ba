package ubik_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

var update = flag.Bool("update", false, "rewrite the expect blocks of testdata/script/*.txt with the actual output")

// TestScripts runs the behaviour tests in testdata/script. A script is a
// sequence of commands, each a line starting with "> ", followed by its
// block:
//
//	> sql [NAME]             the script to start (CREATE SOURCE ...; SELECT ...), and
//	                         which query (a query over views prints the views'
//	                         records and late events prefixed "VIEW: ")
//	> push                   one JSON event per line
//	> watermark TIMESTAMP    advance the watermark
//	> early                  force early emission now
//	> close                  end of input
//	> table                  one JSON row of the versioned table per line (a temporal join)
//	> table-watermark TS     advance the table's watermark
//	> end-table              end the table's input
//	> join-stats             print the temporal join's counters
//	> stats                  print the counters
//	> expect                 the output since the previous expect, verbatim
//
// Output lines: "F rev=N key<TAB>value" for a final record, "P rev=N ..."
// for a provisional one, "! message" for a rejected event or error, and
// "late ..." for a late event.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/script")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCmd struct {
	name, arg string
	block     []string
	line      int
}

func parseScript(t *testing.T, text string) (head []string, cmds []*scriptCmd) {
	var cur *scriptCmd
	for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.HasPrefix(l, "> ") {
			f := strings.SplitN(strings.TrimPrefix(l, "> "), " ", 2)
			cur = &scriptCmd{name: f[0], line: i + 1}
			if len(f) > 1 {
				cur.arg = f[1]
			}
			cmds = append(cmds, cur)
			continue
		}
		if cur == nil {
			head = append(head, l)
			continue
		}
		cur.block = append(cur.block, l)
	}
	return head, cmds
}

func runScript(t *testing.T, path string) {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, cmds := parseScript(t, string(text))
	clock := time.Date(2026, 7, 18, 12, 0, 0, 0, time.UTC)
	opts := ubik.DefaultOptions()
	opts.Now = func() time.Time { return clock }
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var q *ubik.Query
	var out []string
	record := func(r changelog.Record) error {
		kind := "P"
		if r.Meta.Final {
			kind = "F"
		}
		out = append(out, fmt.Sprintf("%s rev=%d %s\t%s", kind, r.Meta.Revision, r.Key, r.Value))
		return nil
	}
	// A view's records and late events (a query over views) name the view.
	viewRecord := func(r changelog.Record) error {
		record(r)
		out[len(out)-1] = r.Meta.Query + ": " + out[len(out)-1]
		return nil
	}
	var late func(ev *ubik.LateEvent)
	viewLate := func(query string, ev *ubik.LateEvent) {
		late(ev)
		out[len(out)-1] = query + ": " + out[len(out)-1]
	}
	late = func(ev *ubik.LateEvent) {
		w := "-"
		if ev.Windowed {
			w = fmt.Sprintf("[%s, %s)", ts(ev.WindowStart), ts(ev.WindowEnd))
		}
		out = append(out, fmt.Sprintf("late %s: event %s window %s watermark %s",
			ev.Reason, ts(ev.EventTime), w, ts(ev.Watermark)))
	}
	failed := false
	for _, c := range cmds {
		if q == nil && c.name != "sql" && c.name != "expect" {
			out = append(out, "! no query running")
			continue
		}
		switch c.name {
		case "sql":
			q, err = eng.Start(strings.Join(c.block, "\n"), ubik.QueryOptions{Name: c.arg, OnRecord: record, OnLate: late,
				OnViewRecord: viewRecord, OnViewLate: viewLate, OnLateTable: late, JoinBuffer: 4})
			if err != nil {
				out = append(out, "! "+err.Error())
				type caret interface{ Caret() string }
				var ce caret
				if errors.As(err, &ce) {
					out = append(out, strings.Split(strings.TrimRight(ce.Caret(), "\n"), "\n")...)
				}
			}
		case "push":
			for _, l := range c.block {
				if err := q.Push([]byte(l)); err != nil {
					out = append(out, "! "+err.Error())
				}
			}
		case "table", "table-watermark", "end-table", "join-stats":
			out = append(out, joinScriptCmd(t, q, c)...)
		case "watermark":
			us, perr := types.ParseTimestamp([]byte(c.arg))
			if perr != nil {
				t.Fatalf("%s:%d: %v", path, c.line, perr)
			}
			if err := q.AdvanceWatermark(time.UnixMicro(us)); err != nil {
				out = append(out, "! "+err.Error())
			}
		case "early":
			if err := q.EmitEarly(); err != nil {
				out = append(out, "! "+err.Error())
			}
		case "tick":
			d, perr := time.ParseDuration(c.arg)
			if perr != nil {
				t.Fatalf("%s:%d: %v", path, c.line, perr)
			}
			clock = clock.Add(d)
			if err := q.Tick(); err != nil {
				out = append(out, "! "+err.Error())
			}
		case "close":
			if err := q.Close(); err != nil {
				out = append(out, "! "+err.Error())
			}
		case "stats":
			s := q.Stats()
			out = append(out, fmt.Sprintf("events=%d malformed=%d eval_errors=%d filtered=%d late=%d records=%d finalized=%d having_suppressed=%d live_groups=%d",
				s.EventsIn, s.Malformed, s.EvalErrors, s.Filtered, s.Late, s.RecordsOut, s.WindowsFinalized, s.HavingSuppressed, s.LiveGroups))
			if s.Duplicates+s.DedupLate+s.DedupKeys > 0 {
				out = append(out, fmt.Sprintf("duplicates=%d dedup_late=%d dedup_keys=%d", s.Duplicates, s.DedupLate, s.DedupKeys))
			}
		case "expect":
			got := out
			out = nil
			if *update {
				c.block = append([]string(nil), got...)
				continue
			}
			if strings.Join(got, "\n") != strings.Join(c.block, "\n") {
				failed = true
				t.Errorf("%s:%d: output differs\n--- got\n%s\n--- want\n%s", path, c.line, strings.Join(got, "\n"), strings.Join(c.block, "\n"))
			}
		default:
			t.Fatalf("%s:%d: unknown command %q", path, c.line, c.name)
		}
	}
	if len(out) > 0 && !*update {
		t.Errorf("%s: output after the last expect:\n%s", path, strings.Join(out, "\n"))
	}
	if *update {
		var b bytes.Buffer
		for _, l := range head {
			b.WriteString(l + "\n")
		}
		for _, c := range cmds {
			b.WriteString("> " + c.name)
			if c.arg != "" {
				b.WriteString(" " + c.arg)
			}
			b.WriteString("\n")
			for _, l := range c.block {
				b.WriteString(l + "\n")
			}
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = failed
}

func ts(us int64) string {
	b := changelog.AppendCell(nil, types.TS(us))
	return string(b[1 : len(b)-1])
}
