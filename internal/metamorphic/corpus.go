package metamorphic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// A corpus file (testdata/corpus/*.case) holds one case: a JSON header
// line (seed, sql, windowed, monotone, note), then the event lines as
// they are (raw bytes, invalid UTF-8 included); a join case's second
// input's rows follow, as many as its header's second_at has entries. It
// keeps a minimized failure replayable even after the generator changes.

// WriteCase writes c to path in the corpus format.
func WriteCase(path string, c *Case) error {
	h, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(h)
	b.WriteByte('\n')
	if len(c.SecondLines) != len(c.SecondAt) {
		return fmt.Errorf("metamorphic: %d rows of the second input, %d places", len(c.SecondLines), len(c.SecondAt))
	}
	for _, l := range append(append([][]byte(nil), c.Lines...), c.SecondLines...) {
		if bytes.IndexByte(l, '\n') >= 0 {
			return fmt.Errorf("metamorphic: event %q holds a newline", l)
		}
		b.Write(l)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ReadCase reads a corpus file.
func ReadCase(path string) (*Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	c := &Case{}
	if err := json.Unmarshal(lines[0], c); err != nil {
		return nil, fmt.Errorf("%s: header: %v", path, err)
	}
	if c.SQL == "" {
		return nil, fmt.Errorf("%s: header has no sql", path)
	}
	c.Lines = lines[1:]
	if n := len(c.SecondAt); n > 0 {
		if n > len(c.Lines) {
			return nil, fmt.Errorf("%s: second_at has %d entries, the file %d lines", path, n, len(c.Lines))
		}
		c.Lines, c.SecondLines = c.Lines[:len(c.Lines)-n], c.Lines[len(c.Lines)-n:]
		for j, at := range c.SecondAt {
			if at < 0 || at > len(c.Lines) || j > 0 && at < c.SecondAt[j-1] {
				return nil, fmt.Errorf("%s: second_at[%d] = %d: not an ascending place among %d events", path, j, at, len(c.Lines))
			}
		}
	}
	return c, nil
}

// item is one line of a case in push order: an event, or a row of the
// second input.
type item struct {
	line   []byte
	second bool
}

// items are c's lines in the order the in-process runs push them.
func (c *Case) items() []item {
	out := make([]item, 0, len(c.Lines)+len(c.SecondLines))
	j := 0
	for i := 0; i <= len(c.Lines); i++ {
		for ; j < len(c.SecondAt) && c.SecondAt[j] <= i; j++ {
			out = append(out, item{c.SecondLines[j], true})
		}
		if i < len(c.Lines) {
			out = append(out, item{c.Lines[i], false})
		}
	}
	return out
}

// withItems is c with its lines (and second input's) replaced by its.
func (c *Case) withItems(its []item) *Case {
	d := *c
	d.Lines, d.SecondLines, d.SecondAt = nil, nil, nil
	for _, it := range its {
		if it.second {
			d.SecondLines = append(d.SecondLines, it.line)
			d.SecondAt = append(d.SecondAt, len(d.Lines))
		} else {
			d.Lines = append(d.Lines, it.line)
		}
	}
	return &d
}

// Minimize shrinks c's input while fails holds (delta debugging over
// lines, events and a join's second input's rows alike: drop chunks,
// halving the chunk size down to one line), within budget. Events and
// Query are dropped: the minimized case is a corpus case.
func Minimize(c *Case, fails func(*Case) bool, budget time.Duration) *Case {
	deadline := time.Now().Add(budget)
	base := &Case{Seed: c.Seed, SQL: c.SQL, Windowed: c.Windowed, Monotone: c.Monotone, Note: c.Note, Views: c.Views, Second: c.Second}
	cur := c.items()
	for chunk := len(cur) / 2; chunk >= 1 && time.Now().Before(deadline); {
		shrunk := false
		for i := 0; i+chunk <= len(cur) && time.Now().Before(deadline); {
			try := append(append([]item(nil), cur[:i]...), cur[i+chunk:]...)
			if tc := base.withItems(try); len(tc.Lines) > 0 && fails(tc) {
				cur = try
				shrunk = true
				continue // the same i now names the next chunk
			}
			i += chunk
		}
		if !shrunk {
			chunk /= 2
		}
	}
	return base.withItems(cur)
}
