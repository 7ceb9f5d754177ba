package ubik_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/scripttest"
)

// cliInput is one input file of a file run: its lines, and for each line
// the command it came from and the event number the Go API gives it.
type cliInput struct {
	path  string
	lines []string
	from  []*scripttest.Cmd
	seq   map[int]int // line (1-based) -> event number
}

func (in *cliInput) add(c *scripttest.Cmd, l string, header bool) {
	in.lines = append(in.lines, l)
	in.from = append(in.from, c)
	if !header {
		in.seq[len(in.lines)] = len(in.seq) + 1
	}
}

// all is the file's content.
func (in *cliInput) all() []byte {
	var b bytes.Buffer
	for _, l := range in.lines {
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

// killLines is where a run stops before a kill: the lines before it are
// followed by blank lines (no events) up to this line, so that the run
// checkpoints there (it checkpoints every 4,096 lines).
const killLines = 4096

// before is the lines before command kill, padded to killLines lines with
// blank ones; the lines after the kill are renumbered past them.
func (in *cliInput) before(kill *scripttest.Cmd) []byte {
	n := 0
	for n < len(in.lines) && in.from[n].Line < kill.Line {
		n++
	}
	pad := killLines - n
	lines := append(append(append([]string(nil), in.lines[:n]...), make([]string, pad)...), in.lines[n:]...)
	from := append(append(append([]*scripttest.Cmd(nil), in.from[:n]...), make([]*scripttest.Cmd, pad)...), in.from[n:]...)
	seq := map[int]int{}
	for l, s := range in.seq {
		if l > n {
			l += pad
		}
		seq[l] = s
	}
	in.lines, in.from, in.seq = lines, from, seq
	var b bytes.Buffer
	for _, l := range lines[:killLines] {
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

// writeFiles writes the query's script (its second input's file named in
// it), its input files, and the run's arguments.
func (r *cliRun) writeFiles() error {
	q, sql := r.q, r.q.Text()
	csv := regexp.MustCompile(`(?i)format\s*=\s*'csv'`).MatchString(sql) && !regexp.MustCompile(`(?i)header\s*=\s*'false'`).MatchString(sql)
	first := r.first
	r.input = &cliInput{path: filepath.Join(r.dir, "events"), seq: map[int]int{}}
	seconds := map[string]*cliInput{}
	if r.second != "" {
		// The second input's file, empty unless rows are pushed to it.
		seconds[r.second] = &cliInput{path: filepath.Join(r.dir, "input-"+r.second), seq: map[int]int{}}
	}
	for _, c := range q.Cmds {
		switch {
		case c.Name == "push" || c.Name == "input" && c.Arg == first:
			for _, l := range c.Block {
				r.input.add(c, l, csv && len(r.input.lines) == 0)
			}
		case c.Name == "input" || c.Name == "table":
			name := c.Arg
			if c.Name == "table" || strings.EqualFold(name, r.second) {
				name = r.second
			}
			in := seconds[name]
			if in == nil {
				in = &cliInput{path: filepath.Join(r.dir, "input-"+name), seq: map[int]int{}}
				seconds[name] = in
			}
			for _, l := range c.Block {
				in.add(c, l, false)
			}
		}
	}
	for name, in := range seconds {
		var err error
		if sql, err = withPath(sql, name, in.path); err != nil {
			return err
		}
		if err := os.WriteFile(in.path, in.all(), 0o644); err != nil {
			return err
		}
	}
	script := filepath.Join(r.dir, "query.sql")
	if err := os.WriteFile(script, []byte(sql), 0o644); err != nil {
		return err
	}
	r.seconds = seconds
	if r.killCmd() == nil {
		if err := os.WriteFile(r.input.path, r.input.all(), 0o644); err != nil {
			return err
		}
	}
	r.args = []string{"run", script, "--input", r.input.path, "--format", "jsonl", "--no-progress",
		"--dead-letter", filepath.Join(r.dir, "dead.jsonl"), "--late-output", filepath.Join(r.dir, "late.jsonl"),
		"--stats-json", filepath.Join(r.dir, "stats.json"), "--join-buffer", fmt.Sprint(q.JoinBuffer())}
	if r.views {
		r.args = append(r.args, "--output-dir", filepath.Join(r.dir, "out"))
	} else {
		r.args = append(r.args, "--output", filepath.Join(r.dir, "out.jsonl"))
		if q.Name() != "" {
			r.args = append(r.args, "--query", q.Name())
		}
	}
	if r.killCmd() != nil {
		r.args = append(r.args, "--state-dir", filepath.Join(r.dir, "state"), "--checkpoint-interval", "1ns")
	}
	return nil
}

// withPath gives source or table name of the script the option path =
// 'file', the file a run reads it from.
func withPath(sql, name, file string) (string, error) {
	re := regexp.MustCompile(`(?i)CREATE\s+(?:SOURCE|TABLE)\s+` + regexp.QuoteMeta(name) + `\s*\(`)
	loc := re.FindStringIndex(sql)
	if loc == nil {
		return "", fmt.Errorf("the script declares no source or table %s", name)
	}
	depth, quoted, end := 1, false, -1
	for i := loc[1]; i < len(sql) && end < 0; i++ {
		switch c := sql[i]; {
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				end = i + 1
			}
		}
	}
	if end < 0 {
		return "", fmt.Errorf("the column list of %s does not end", name)
	}
	option := "path = '" + file + "'"
	if w := regexp.MustCompile(`(?i)^\s*WITH\s*\(`).FindStringIndex(sql[end:]); w != nil {
		at := end + w[1]
		return sql[:at] + option + ", " + sql[at:], nil
	}
	return sql[:end] + " WITH (" + option + ")" + sql[end:], nil
}

// feedFIFO writes data to the FIFO path once the run p has opened it,
// and returns the FIFO open: the run reads on until it is closed.
func feedFIFO(path string, data []byte, p *crashtest.Proc) (*os.File, error) {
	var f *os.File
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var err error
		if f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			break
		}
		select {
		case <-p.Done():
			return nil, errors.New("the run ended before it read its input")
		default:
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			return nil, err
		}
	}
	for len(data) > 0 {
		n, err := f.Write(data)
		data = data[n:]
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// waitCheckpoint waits for the run's checkpoint at line: the file a
// state dir holds starts with a magic, the query's identity (32 bytes), a
// finished byte, then the input offset and line as varints.
func waitCheckpoint(path string, line int64, p *crashtest.Proc) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		select {
		case <-p.Done():
			return errors.New("the run ended before its kill")
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 41 || !bytes.HasPrefix(b, []byte("UBIKCKP")) || b[40] != 0 {
			continue // none yet, or the run's last (finished)
		}
		r := bytes.NewReader(b[41:])
		if _, err := binary.ReadVarint(r); err != nil {
			continue
		}
		if l, err := binary.ReadVarint(r); err == nil && l == line {
			return nil
		}
	}
	return fmt.Errorf("no checkpoint at line %d of the input within a minute", line)
}

// envelope is a record of `ubik run --format jsonl`.
type envelope struct {
	Key      json.RawMessage `json:"key"`
	Value    json.RawMessage `json:"value"`
	Final    bool            `json:"final"`
	Revision uint64          `json:"revision"`
}

// records renders the changelog: the query's, and with views every
// view's, prefixed with its name.
func (r *cliRun) records() []string {
	files := map[string]string{r.primary: filepath.Join(r.dir, "out.jsonl")}
	if r.views {
		files = map[string]string{}
		for _, name := range r.graph {
			files[name] = filepath.Join(r.dir, "out", name+".jsonl")
		}
	}
	var out []string
	for name, f := range files {
		view := name
		if name == r.primary {
			view = ""
		}
		for _, l := range readLines(r, f) {
			var e envelope
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				r.t.Fatalf("%s: %q: %v", f, l, err)
			}
			out = append(out, scripttest.RecordLine(view, e.Final, e.Revision, string(e.Key), string(e.Value)))
		}
	}
	return out
}

// rejected renders the dead letters: "! event N: error", N the event's
// number in its input as the Go API counts them.
func (r *cliRun) rejected() []string {
	var out []string
	for _, l := range readLines(r, filepath.Join(r.dir, "dead.jsonl")) {
		var d struct {
			Input string `json:"input"`
			Line  int    `json:"line"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			r.t.Fatalf("dead letter %q: %v", l, err)
		}
		in := r.input
		for _, s := range r.seconds {
			if s.path == d.Input {
				in = s
			}
		}
		out = append(out, fmt.Sprintf("! event %d: %s", in.seq[d.Line], d.Error))
	}
	return out
}

// lates renders the late events of --late-output.
func (r *cliRun) lates() []string {
	var out []string
	for _, l := range readLines(r, filepath.Join(r.dir, "late.jsonl")) {
		var e struct {
			Query       string  `json:"query"`
			Reason      string  `json:"reason"`
			EventTime   string  `json:"event_time"`
			WindowStart *string `json:"window_start"`
			WindowEnd   *string `json:"window_end"`
			Watermark   string  `json:"watermark"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			r.t.Fatalf("late event %q: %v", l, err)
		}
		w := "-"
		if e.WindowStart != nil && e.WindowEnd != nil {
			w = fmt.Sprintf("[%s, %s)", *e.WindowStart, *e.WindowEnd)
		}
		view := e.Query
		if view == r.primary {
			view = ""
		}
		out = append(out, scripttest.LateLine(view, e.Reason, e.EventTime, w, e.Watermark))
	}
	return out
}

func readLines(r *cliRun, path string) []string {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}
