package testenv

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PGScript is one PostgreSQL session run through the psql binary: the
// root module's oracle tests use PostgreSQL as a reference without linking
// a Go driver, so an embedder of the engine never gets one in its module
// graph. Rows go in with COPY FROM STDIN and come back with COPY (query)
// TO STDOUT, both in COPY's text format, which escapes every byte that
// could be mistaken for a separator: any string round-trips exactly
// (TestPGScriptRoundTrip checks that against the server).
//
// The statements run in the order added, in one session (temporary tables
// and functions live until Run returns), and the first error stops the
// session and fails the test.
type PGScript struct {
	b       strings.Builder
	queries int
}

// pgResultEnd ends each query's rows in psql's output. A COPY text row
// never holds a raw newline, so the marker cannot be part of one unless a
// one-column row is this exact text.
const pgResultEnd = "--ubik testenv: end of result--"

// Exec adds SQL statements, run for their effect (output is discarded).
func (s *PGScript) Exec(sql string) {
	s.b.WriteString(strings.TrimRight(strings.TrimSpace(sql), ";"))
	s.b.WriteString(";\n")
}

// CopyIn adds rows to table (columns cols). A cell is nil (NULL), a
// string, an int64, int or bool, a float64 (written in the shortest form that
// parses back to the same double; NaN and infinities by name) or a
// time.Time (written as a UTC timestamp with microseconds).
func (s *PGScript) CopyIn(t testing.TB, table string, cols []string, rows [][]any) {
	t.Helper()
	fmt.Fprintf(&s.b, "COPY %s (%s) FROM STDIN;\n", table, strings.Join(cols, ", "))
	for i, row := range rows {
		if len(row) != len(cols) {
			t.Fatalf("testenv: CopyIn %s row %d has %d cells for %d columns", table, i, len(row), len(cols))
		}
		for j, c := range row {
			if j > 0 {
				s.b.WriteByte('\t')
			}
			text, err := pgCopyCell(c)
			if err != nil {
				t.Fatalf("testenv: CopyIn %s row %d column %s: %v", table, i, cols[j], err)
			}
			s.b.WriteString(text)
		}
		s.b.WriteByte('\n')
	}
	s.b.WriteString("\\.\n")
}

// Query adds a query whose rows Run returns, and returns its index in
// Run's result.
func (s *PGScript) Query(sql string) int {
	fmt.Fprintf(&s.b, "COPY (%s) TO STDOUT;\n\\echo '%s'\n", strings.TrimRight(strings.TrimSpace(sql), ";"), pgResultEnd)
	s.queries++
	return s.queries - 1
}

// Run runs the script in one psql session against dsn and returns each
// query's rows; a cell is nil for NULL. A failing statement fails the test
// with psql's message.
func (s *PGScript) Run(t testing.TB, dsn string) [][][]*string {
	t.Helper()
	psql := PSQLPath(t)
	cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-")
	// UTF8 whatever the locale: with C or POSIX psql would ask for
	// SQL_ASCII and the server would pass bytes through unchecked.
	cmd.Env = append(os.Environ(), "PGCLIENTENCODING=UTF8")
	cmd.Stdin = strings.NewReader("SET client_min_messages = warning;\n" + s.b.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: psql against PostgreSQL at %s failed after %v: %v\n%s", pgAddrOrURL(dsn), time.Since(start).Round(time.Millisecond), err, stderr.String())
	}
	res, err := parsePGResults(stdout.String(), s.queries)
	if err != nil {
		t.Fatalf("testenv: psql output: %v", err)
	}
	return res
}

func pgAddrOrURL(dsn string) string {
	if a, err := pgAddr(dsn); err == nil {
		return a
	}
	return EnvPGDSN
}

// PSQLPath returns the psql binary: the one on PATH, else the newest under
// /usr/lib/postgresql/*/bin (Debian's server packages put it there). No
// psql fails the test.
func PSQLPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	sort.Slice(found, func(i, j int) bool { return pgMajor(found[i]) < pgMajor(found[j]) })
	if len(found) > 0 {
		return found[len(found)-1]
	}
	t.Fatalf("testenv: no psql binary on PATH or in /usr/lib/postgresql/*/bin (install postgresql-client): the PostgreSQL oracle tests talk to the server through it")
	return ""
}

func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// pgCopyCell writes one cell in COPY's text format.
func pgCopyCell(c any) (string, error) {
	switch v := c.(type) {
	case nil:
		return `\N`, nil
	case string:
		return pgCopyEscape(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int:
		return strconv.Itoa(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		switch {
		case math.IsNaN(v):
			return "NaN", nil
		case math.IsInf(v, 1):
			return "Infinity", nil
		case math.IsInf(v, -1):
			return "-Infinity", nil
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05.999999"), nil
	}
	return "", fmt.Errorf("a %T cell (want nil, string, int64, int, bool, float64 or time.Time)", c)
}

// pgCopyEscape escapes the bytes COPY's text format gives a meaning to.
func pgCopyEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// parsePGResults splits psql's output into n results of COPY text rows.
func parsePGResults(out string, n int) ([][][]*string, error) {
	res := make([][][]*string, 0, n)
	var cur [][]*string
	lines := strings.Split(out, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		if line == pgResultEnd {
			res = append(res, cur)
			cur = nil
			continue
		}
		row, err := pgCopyRow(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		cur = append(cur, row)
	}
	if cur != nil || len(res) != n {
		return nil, fmt.Errorf("%d complete results and %d trailing rows, want %d results", len(res), len(cur), n)
	}
	return res, nil
}

// pgCopyRow decodes one line of COPY text output.
func pgCopyRow(line string) ([]*string, error) {
	var row []*string
	for _, f := range strings.Split(line, "\t") {
		if f == `\N` {
			row = append(row, nil)
			continue
		}
		var b strings.Builder
		for i := 0; i < len(f); i++ {
			if f[i] != '\\' {
				b.WriteByte(f[i])
				continue
			}
			i++
			if i == len(f) {
				return nil, fmt.Errorf("a field ends in a lone backslash: %q", f)
			}
			switch c := f[i]; c {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case 'N', 'x', '0', '1', '2', '3', '4', '5', '6', '7':
				// COPY TO writes no \N inside a field and no octal or hex
				// escapes: seeing one means the output is not what this
				// decoder reads.
				return nil, fmt.Errorf("an unexpected escape \\%c in %q", c, f)
			default:
				b.WriteByte(c) // "\\" and any other escaped byte stand for themselves
			}
		}
		s := b.String()
		row = append(row, &s)
	}
	return row, nil
}
