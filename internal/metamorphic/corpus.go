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
// they are (raw bytes, invalid UTF-8 included). It keeps a minimized
// failure replayable even after the generator changes.

// WriteCase writes c to path in the corpus format.
func WriteCase(path string, c *Case) error {
	h, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(h)
	b.WriteByte('\n')
	for _, l := range c.Lines {
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
	return c, nil
}

// Minimize shrinks c's input while fails holds (delta debugging over
// lines: drop chunks, halving the chunk size down to one line), within
// budget. Events and Query are dropped: the minimized case is a corpus
// case.
func Minimize(c *Case, fails func(*Case) bool, budget time.Duration) *Case {
	deadline := time.Now().Add(budget)
	cur := &Case{Seed: c.Seed, SQL: c.SQL, Windowed: c.Windowed, Monotone: c.Monotone, Note: c.Note, Lines: c.Lines}
	for chunk := len(cur.Lines) / 2; chunk >= 1 && time.Now().Before(deadline); {
		shrunk := false
		for i := 0; i+chunk <= len(cur.Lines) && time.Now().Before(deadline); {
			try := *cur
			try.Lines = append(append([][]byte(nil), cur.Lines[:i]...), cur.Lines[i+chunk:]...)
			if len(try.Lines) > 0 && fails(&try) {
				cur = &try
				shrunk = true
				continue // the same i now names the next chunk
			}
			i += chunk
		}
		if !shrunk {
			chunk /= 2
		}
	}
	return cur
}
