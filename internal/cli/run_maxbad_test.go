package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunMaxBadEveryInput: --max-bad counts the bad events of every input
// of a run, not only the first: a temporal join's table file, an interval
// join's right stream, and the second source of a join of two views. For
// each kind: bad rows only in the second input cross the limit (exit 3,
// the message naming the input, the file and the line of the event that
// crossed it, and each input's share); one bad event in each input
// crosses a limit of 1 that neither alone crosses; the same count under
// the limit passes; a percentage is of the events of every input;
// --strict stops at the second input's first bad row; a bad row that
// goes to --dead-letter still counts.
func TestRunMaxBadEveryInput(t *testing.T) {
	type kind struct {
		name, sql, query string
		first, second    string // the input names
		// firstFile and secondFile are the good rows of each input; a
		// bad row is appended (secondBad times to the second, firstBad
		// to the first) after them.
		firstFile, secondFile []string
	}
	kinds := []kind{
		{
			name: "temporal join table", sql: joinRunSQL, first: "usage", second: "prices",
			firstFile: []string{
				`{"customer":"c1","plan":"basic","qty":"2.00","ts":"2026-07-18 10:00:20"}`,
				`{"customer":"c1","plan":"basic","qty":"1.00","ts":"2026-07-18 10:00:40"}`,
				`{"customer":"c2","plan":"pro","qty":"3.50","ts":"2026-07-18 10:00:50"}`,
				`{"customer":"c1","plan":"basic","qty":"4.00","ts":"2026-07-18 10:01:30"}`,
			},
			secondFile: []string{
				`{"plan":"pro","price":"1.000000","valid_from":"2026-07-18 10:00:00"}`,
				`{"plan":"basic","price":"0.100000","valid_from":"2026-07-18 10:00:00"}`,
				`{"plan":"basic","price":"0.200000","valid_from":"2026-07-18 10:00:30"}`,
				`{"plan":"pro","price":"2.000000","valid_from":"2026-07-18 10:00:45"}`,
			},
		},
		{
			name: "interval join right stream", sql: ijoinRunSQL, first: "impressions", second: "clicks",
			firstFile: []string{
				`{"id":1,"campaign":"a","ts":"2026-07-18 10:00:00"}`,
				`{"id":2,"campaign":"b","ts":"2026-07-18 10:01:00"}`,
				`{"id":3,"campaign":"a","ts":"2026-07-18 10:02:00"}`,
				`{"id":4,"campaign":"b","ts":"2026-07-18 10:03:00"}`,
			},
			secondFile: []string{
				`{"impression_id":1,"ts":"2026-07-18 10:00:30"}`,
				`{"impression_id":2,"ts":"2026-07-18 10:01:30"}`,
				`{"impression_id":3,"ts":"2026-07-18 10:02:30"}`,
				`{"impression_id":4,"ts":"2026-07-18 10:03:30"}`,
			},
		},
		{
			name: "view join second source", sql: viewJoinRunSQL, query: "both_seen", first: "impressions", second: "clicks",
			firstFile: []string{
				`{"id":1,"campaign":"a","ts":"2026-07-18 10:00:01"}`,
				`{"id":2,"campaign":"a","ts":"2026-07-18 10:00:15"}`,
				`{"id":1,"campaign":"a","ts":"2026-07-18 10:00:21"}`,
				`{"id":2,"campaign":"a","ts":"2026-07-18 10:00:35"}`,
			},
			secondFile: []string{
				`{"impression_id":1,"ts":"2026-07-18 10:00:03"}`,
				`{"impression_id":2,"ts":"2026-07-18 10:00:16"}`,
				`{"impression_id":1,"ts":"2026-07-18 10:00:23"}`,
				`{"impression_id":2,"ts":"2026-07-18 10:00:36"}`,
			},
		},
	}
	const badRow = `{"oops": `
	for _, k := range kinds {
		for _, c := range []struct {
			name                string
			firstBad, secondBad int
			args                []string
			code                int
			want                []string // in stderr, FIRST and SECOND the files, NAME1 and NAME2 the inputs
		}{
			{"second input crosses a count", 0, 2, []string{"--max-bad", "1"}, ExitBadInput, []string{
				"more than 1 events were malformed or failed to evaluate over its inputs (--max-bad 1 counts every input: NAME1 0, NAME2 2); the last at SECOND:6 (input NAME2): ",
				"; failed: --max-bad 1"}},
			{"one bad in each input crosses a count of one", 1, 1, []string{"--max-bad", "1"}, ExitBadInput, []string{
				"more than 1 events were malformed or failed to evaluate over its inputs (--max-bad 1 counts every input: NAME1 1, NAME2 1); the last at ",
				"; failed: --max-bad 1"}},
			{"under the count", 0, 1, []string{"--max-bad", "1"}, 0, []string{"1 malformed (NAME1 0, NAME2 1)"}},
			{"second input crosses a percentage of every input", 0, 3, []string{"--max-bad", "20%"}, ExitBadInput, []string{
				"3 of 11 events were malformed or failed to evaluate (--max-bad 20%)", "; failed: --max-bad 20%"}},
			{"a percentage of every input not crossed", 0, 2, []string{"--max-bad", "25%"}, 0, []string{"2 malformed (NAME1 0, NAME2 2)"}},
			{"strict stops at the second input's first bad row", 0, 2, []string{"--strict"}, ExitBadInput, []string{
				"SECOND:5 (input NAME2): ", "(--strict stops at the first bad event)"}},
			{"dead letters still count", 0, 2, []string{"--max-bad", "1", "--dead-letter", "DEAD"}, ExitBadInput, []string{
				"the last at SECOND:6 (input NAME2): "}},
		} {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				dir := t.TempDir()
				lines := func(good []string, bad int) []byte {
					var b []byte
					for _, l := range good {
						b = append(b, l+"\n"...)
					}
					for range bad {
						b = append(b, badRow+"\n"...)
					}
					return b
				}
				first, second := filepath.Join(dir, k.first+".jsonl"), filepath.Join(dir, k.second+".jsonl")
				os.WriteFile(first, lines(k.firstFile, c.firstBad), 0o644)
				os.WriteFile(second, lines(k.secondFile, c.secondBad), 0o644)
				sql := filepath.Join(dir, "q.sql")
				switch k.sql {
				case joinRunSQL:
					os.WriteFile(sql, fmt.Appendf(nil, k.sql, second, ""), 0o644)
				default:
					os.WriteFile(sql, fmt.Appendf(nil, k.sql, second), 0o644)
				}
				stats, dead := filepath.Join(dir, "stats.json"), filepath.Join(dir, "dead.jsonl")
				args := []string{"run", sql, "--input", first, "--stats-json", stats}
				if k.query != "" {
					args = append(args, "--query", k.query)
				}
				for _, a := range c.args {
					args = append(args, strings.ReplaceAll(a, "DEAD", dead))
				}
				env, _, errb := runTestEnv("")
				code := Main(context.Background(), env, args)
				stderr := errb.String()
				if code != c.code {
					t.Fatalf("exit %d, want %d:\n%s", code, c.code, stderr)
				}
				for _, w := range c.want {
					w = strings.NewReplacer("FIRST", first, "SECOND", second, "NAME1", k.first, "NAME2", k.second).Replace(w)
					if !strings.Contains(stderr, w) {
						t.Fatalf("stderr lacks %q:\n%s", w, stderr)
					}
				}
				var s summary
				b, _ := os.ReadFile(stats)
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatalf("stats %s: %v", b, err)
				}
				read := int64(c.secondBad) // bad rows of the second input read
				if c.args[0] == "--strict" {
					read = 1 // it stops at the first
				}
				if len(s.Inputs) != 2 || s.Inputs[0].Input != k.first || s.Inputs[1].Input != k.second || s.Inputs[1].Malformed != read {
					t.Fatalf("stats inputs %+v, want %s then %s with %d malformed", s.Inputs, k.first, k.second, read)
				}
				if (c.code == ExitBadInput) != (s.BadInputLimit != "") {
					t.Fatalf("exit %d with bad_input_limit_crossed %q", code, s.BadInputLimit)
				}
				if strings.Contains(strings.Join(c.args, " "), "DEAD") {
					d, _ := os.ReadFile(dead)
					if n := strings.Count(string(d), "\n"); n != c.secondBad || !strings.Contains(string(d), `"input": "`+second) {
						t.Fatalf("dead letters (%d, want %d of %s):\n%s", n, c.secondBad, second, d)
					}
				}
			})
		}
	}
}
