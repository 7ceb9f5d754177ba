package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// csvMultiline is a CSV input whose second record has a quoted field
// spanning lines lines, followed by a one-line record.
func csvMultiline(lines int) string {
	var b strings.Builder
	b.WriteString("k,v\n")
	b.WriteString(`a,"`)
	for i := 0; i < lines; i++ {
		b.WriteString("some text of a long note\n")
	}
	b.WriteString("end\"\nb,2\n")
	return b.String()
}

func readAll(t testing.TB, in string) (recs []string, lines []int64, errs []error) {
	br := bufio.NewReaderSize(strings.NewReader(in), 64<<10)
	for {
		rec, n, _, err := readRecord(br, true)
		if errors.Is(err, io.EOF) && len(rec) == 0 {
			return
		}
		recs, lines, errs = append(recs, string(rec)), append(lines, n), append(errs, err)
		if err != nil && !errors.Is(err, errTooLong) {
			return
		}
	}
}

// TestReadRecordMultilineLinear: a quoted field over 160,000 lines reads in
// time linear in its size (it took 27 s when every line rescanned the
// record so far; linearly it is a few milliseconds).
func TestReadRecordMultilineLinear(t *testing.T) {
	in := csvMultiline(160_000)
	start := time.Now()
	recs, lines, _ := readAll(t, in)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("reading a 160,000-line quoted field took %v", d)
	}
	if len(recs) != 3 || lines[1] != 160_001 || recs[2] != "b,2" {
		t.Fatalf("got %d records, lines %v, last %q", len(recs), lines, recs[len(recs)-1])
	}
}

// TestReadRecordTooLongMultiline: a CSV record over maxLineBytes, made of
// many short lines inside a quoted field, is one oversized record: consumed
// to its closing quote and reported once, and the record after it reads
// normally (the rest of the field is not read as new records).
func TestReadRecordTooLongMultiline(t *testing.T) {
	line := strings.Repeat("x", 1023) + "\n"
	n := maxLineBytes/len(line) + 2 // just over the bound
	in := "k,v\n" + `a,"` + strings.Repeat(line, n) + "end\"\nb,2\n"
	recs, lines, errs := readAll(t, in)
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3 (header, the oversized one, b,2): lines %v errs %v", len(recs), lines, errs)
	}
	if !errors.Is(errs[1], errTooLong) || lines[1] != int64(n+1) {
		t.Errorf("oversized record: %d lines, %v; want %d lines, errTooLong", lines[1], errs[1], n+1)
	}
	if recs[2] != "b,2" || errs[2] != nil {
		t.Errorf("record after it = %q, %v", recs[2], errs[2])
	}
	// Just under the bound it is an ordinary record.
	m := (maxLineBytes - 16) / len(line)
	in = "k,v\n" + `a,"` + strings.Repeat(line, m) + "end\"\nb,2\n"
	recs, lines, errs = readAll(t, in)
	if len(recs) != 3 || errs[1] != nil || lines[1] != int64(m+1) || recs[2] != "b,2" {
		t.Errorf("under the bound: %d records, lines %v, errs %v", len(recs), lines, errs)
	}
}

// BenchmarkReadRecordMultiline reads one quoted field of N lines; the time
// per line stays flat as N grows.
func BenchmarkReadRecordMultiline(b *testing.B) {
	for _, lines := range []int{1_000, 10_000, 160_000} {
		in := csvMultiline(lines)
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				readAll(b, in)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
		})
	}
}

// TestReadRecordEdges: quotes split across lines, a record cut by the end
// of input, and a first line that is itself over the bound with an open
// quote (consumed to the closing quote on a later line).
func TestReadRecordEdges(t *testing.T) {
	recs, lines, errs := readAll(t, "a,\"x\n\"\"y\"\"\nz\",1\nb,2")
	if len(recs) != 2 || recs[0] != "a,\"x\n\"\"y\"\"\nz\",1" || lines[0] != 3 || errs[0] != nil || recs[1] != "b,2" || !errors.Is(errs[1], io.EOF) {
		t.Errorf("got %q lines %v errs %v", recs, lines, errs)
	}
	recs, lines, errs = readAll(t, "a,\"x\nunterminated")
	if len(recs) != 1 || recs[0] != "a,\"x\nunterminated" || lines[0] != 2 || !errors.Is(errs[0], io.EOF) {
		t.Errorf("cut record: got %q lines %v errs %v", recs, lines, errs)
	}
	long := "a,\"" + strings.Repeat("y", maxLineBytes) + "\n" + "still in the field\",1\nb,2\n"
	recs, lines, errs = readAll(t, long)
	if len(recs) != 2 || !errors.Is(errs[0], errTooLong) || lines[0] != 2 || recs[1] != "b,2" || errs[1] != nil {
		t.Errorf("long first line: %d records, lines %v errs %v", len(recs), lines, errs)
	}
}
