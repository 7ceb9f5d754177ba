// Package scripttest runs the engine's behaviour tests, kept as text
// scripts (testdata/script/*.txt), through every host of the engine: the
// root Go API, `ubik run` on files, the C ABI, Python and Kafka, after
// Prometheus's promqltest. A script is a sequence of commands, each a
// line starting with "> " followed by its block of lines:
//
//	> sql [NAME] [join-buffer=N]  the script to start (CREATE SOURCE ...; SELECT ...)
//	                              and which query; a query over views prints the
//	                              views' records and late events prefixed "VIEW: ".
//	                              A join holds at most N rows (default 4)
//	> push                        one JSON (or CSV) event per line, to the first input
//	> input NAME                  one record per line to input NAME (a join's second
//	                              stream, a graph's second source)
//	> end-input NAME              end input NAME
//	> table                       one row per line of the versioned table (a temporal join)
//	> table-watermark TS          advance the table's watermark
//	> end-table                   end the table's input
//	> watermark TS                advance the watermark
//	> early                       force early emission now
//	> tick DURATION               move the processing clock, then tick
//	> kill                        kill the query and restart it from its checkpoint
//	> close                       end of input
//	> stats                       print the counters
//	> join-stats                  print the temporal join's counters
//	> inputs                      print the query's inputs (Query.Inputs)
//	> expect                      the output since the previous expect, verbatim
//
// A kill never prints anything: the changelog must go on as if the query
// had not been killed. Each host runs it its own way: the Go API
// checkpoints, drops the query and restores a new one from the
// checkpoint; `ubik run --state-dir` is killed with SIGKILL and run
// again on its state directory; a Kafka pipeline's process is killed with
// SIGKILL and restarted.
//
// Output lines: "F rev=N key<TAB>value" for a final record, "P rev=N ..."
// for a provisional one, "! message" for a rejected event or an error
// ("! event N: ..." for the Nth event of an input), "late ..." for a late
// event, the counter lines of stats and join-stats, and "inputs: A, B".
//
// A segment is one query: a sql command and the commands up to the next
// one. A host runs the segments it can; for one it cannot, it names the
// command and why (Host.Cannot), and the test says so and skips it. A host
// that does not produce a kind of output line (the C ABI has no late-event
// callback) names why too (Host.Unobserved); the lines of that kind are
// left out of its comparison.
package scripttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cmd is one command: its line "> Name Arg" and the block that follows.
type Cmd struct {
	Name, Arg string
	Block     []string
	Line      int // 1-based line of "> ..." in the file
}

// Script is a parsed script file.
type Script struct {
	Path string
	Head []string // the lines before the first command (its description)
	Cmds []*Cmd
}

// commands are the commands a script may use.
var commands = map[string]bool{
	"sql": true, "push": true, "input": true, "end-input": true, "table": true, "table-watermark": true,
	"end-table": true, "watermark": true, "early": true, "tick": true, "kill": true, "close": true,
	"stats": true, "join-stats": true, "inputs": true, "expect": true,
}

// Parse reads a script file.
func Parse(path string) (*Script, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Script{Path: path}
	var cur *Cmd
	for i, l := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(l, "> "); ok {
			name, arg, _ := strings.Cut(rest, " ")
			if !commands[name] {
				return nil, fmt.Errorf("%s:%d: unknown command %q", path, i+1, name)
			}
			cur = &Cmd{Name: name, Arg: arg, Line: i + 1}
			s.Cmds = append(s.Cmds, cur)
			continue
		}
		if cur == nil {
			s.Head = append(s.Head, l)
			continue
		}
		cur.Block = append(cur.Block, l)
	}
	return s, nil
}

// Name is the script's file name without .txt.
func (s *Script) Name() string { return strings.TrimSuffix(filepath.Base(s.Path), ".txt") }

// Write writes the script back to its file (-update: the expect blocks
// hold the reference host's output).
func (s *Script) Write() error {
	var b bytes.Buffer
	for _, l := range s.Head {
		b.WriteString(l + "\n")
	}
	for _, c := range s.Cmds {
		b.WriteString("> " + c.Name)
		if c.Arg != "" {
			b.WriteString(" " + c.Arg)
		}
		b.WriteString("\n")
		for _, l := range c.Block {
			b.WriteString(l + "\n")
		}
	}
	return os.WriteFile(s.Path, b.Bytes(), 0o644)
}

// Segment is a part of a script whose output no other part shares: it
// starts at a sql command that follows an expect (or the script's start)
// and holds one query, or several when their output goes to one expect
// (a list of SQL errors). Its queries run one after the other, each
// replacing the one before.
type Segment struct {
	Script  *Script
	Index   int // 1-based among the script's segments
	Cmds    []*Cmd
	Queries []*Query
}

// Query is one sql command and the commands up to the next one (SQL nil
// for commands before a script's first sql).
type Query struct {
	SQL  *Cmd
	Cmds []*Cmd // after SQL
}

// Segments splits the script into its segments.
func (s *Script) Segments() []*Segment {
	var out []*Segment
	for _, c := range s.Cmds {
		if len(out) == 0 || c.Name == "sql" && last(out[len(out)-1].Cmds).Name == "expect" {
			out = append(out, &Segment{Script: s, Index: len(out) + 1})
		}
		g := out[len(out)-1]
		g.Cmds = append(g.Cmds, c)
		if c.Name == "sql" || len(g.Queries) == 0 {
			g.Queries = append(g.Queries, &Query{})
		}
		q := g.Queries[len(g.Queries)-1]
		if c.Name == "sql" {
			q.SQL = c
		} else {
			q.Cmds = append(q.Cmds, c)
		}
	}
	return out
}

func last(cs []*Cmd) *Cmd { return cs[len(cs)-1] }

// Name names the segment in test names: "q1", "q2", ...
func (g *Segment) Name() string { return "q" + strconv.Itoa(g.Index) }

// At names the segment's place in its file, for messages.
func (g *Segment) At() string {
	if len(g.Cmds) == 0 {
		return g.Script.Path
	}
	return fmt.Sprintf("%s:%d", g.Script.Path, g.Cmds[0].Line)
}

// Name is the query the sql command selects ("" for the script's only
// query).
func (q *Query) Name() string {
	name, _ := q.args()
	return name
}

// JoinBuffer is the most rows a join of the query holds (the sql
// command's join-buffer=N, 4 by default).
func (q *Query) JoinBuffer() int {
	_, n := q.args()
	return n
}

func (q *Query) args() (name string, joinBuffer int) {
	joinBuffer = 4
	if q.SQL == nil {
		return "", joinBuffer
	}
	for _, f := range strings.Fields(q.SQL.Arg) {
		if v, ok := strings.CutPrefix(f, "join-buffer="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				joinBuffer = n
			}
			continue
		}
		name = f
	}
	return name, joinBuffer
}

// Text is the query's SQL text.
func (q *Query) Text() string {
	if q.SQL == nil {
		return ""
	}
	return strings.Join(q.SQL.Block, "\n")
}

// Expects are the segment's expect commands, in order.
func (g *Segment) Expects() []*Cmd {
	var out []*Cmd
	for _, c := range g.Cmds {
		if c.Name == "expect" {
			out = append(out, c)
		}
	}
	return out
}

// Has reports whether the query has a command named name.
func (q *Query) Has(name string) bool {
	for _, c := range q.Cmds {
		if c.Name == name {
			return true
		}
	}
	return false
}

// After reports whether command c comes after a command named name in
// the query.
func (q *Query) After(c *Cmd, name string) bool {
	for _, o := range q.Cmds {
		if o == c {
			return false
		}
		if o.Name == name {
			return true
		}
	}
	return false
}
