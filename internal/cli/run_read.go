package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ubiksql/ubik"
)

// Reading a file run's input: records (a CSV record may span lines),
// lines too long to hold, and a live input (stdin, a pipe) that may stall.

// liveRecords reads records on a goroutine of its own and hands them over
// through a bounded channel, so that while the input is quiet the run loop
// still ticks the query's early emission and flushes its output every
// 100 ms (or the query's early interval, if shorter). The query itself is
// only ever touched by the run loop.
func liveRecords(ctx context.Context, br *bufio.Reader, csv bool, q *ubik.Query, flush func() error, stop <-chan struct{}) func() ([]byte, int64, int64, error) {
	type rec struct {
		line    []byte
		n, size int64
		err     error
	}
	ch := make(chan rec, 256)
	go func() {
		for {
			line, n, size, err := readRecord(br, csv)
			r := rec{append([]byte(nil), line...), n, size, err} // the reader reuses its buffer
			select {
			case ch <- r:
			case <-stop:
				return
			}
			if err != nil && !errors.Is(err, errTooLong) {
				return
			}
		}
	}()
	every := 100 * time.Millisecond
	if e := q.Plan().EarlyEvery(); e > 0 && e < every {
		every = e
	}
	ticker := time.NewTicker(every)
	return func() ([]byte, int64, int64, error) {
		for {
			select {
			case r := <-ch:
				return r.line, r.n, r.size, r.err
			case <-ticker.C:
				if err := q.Tick(); err != nil {
					return nil, 0, 0, err
				}
				if err := flush(); err != nil {
					return nil, 0, 0, err
				}
			case <-ctx.Done():
				ticker.Stop()
				return nil, 0, 0, ctx.Err()
			}
		}
	}
}

// tooLongError words an oversized record of n lines and size bytes, for
// the dead letter.
func tooLongError(n, size int64) error {
	if n == 1 {
		return fmt.Errorf("line longer than %d bytes", maxLineBytes)
	}
	return fmt.Errorf("record longer than %d bytes (%d bytes over %d lines)", maxLineBytes, size, n)
}

// readRecord returns the next event without its final newline, how many
// lines it spanned (one line, or for CSV as many lines as it takes to close
// every quoted field) and how many bytes of input it took, newlines
// included (the input offset a checkpoint resumes from). The error is
// io.EOF for a last line without a newline (or nothing left), errTooLong
// for an oversized record (consumed to its end, not kept: rec is nil).
// Each line is scanned once: a record is complete when its count of '"' is
// even, and that parity is kept line by line, so a quoted field over many
// lines costs time linear in its size.
func readRecord(br *bufio.Reader, csv bool) (rec []byte, lines, size int64, err error) {
	line, open, tooLong, size, err := readLine(br, csv)
	if !csv || !open || err != nil {
		if tooLong {
			return nil, 1, size, errTooLong
		}
		return line, 1, size, err
	}
	if !tooLong {
		rec = append([]byte(nil), line...)
	}
	lines = 1
	for open {
		next, odd, nextTooLong, n, rerr := readLine(br, true)
		size += n
		err = rerr
		if len(next) == 0 && err != nil && !nextTooLong {
			break
		}
		lines++
		open = open != odd
		if !tooLong && (nextTooLong || len(rec)+1+len(next) > maxLineBytes) {
			tooLong, rec = true, nil // keep reading to the record's end, keeping nothing
		}
		if !tooLong {
			rec = append(append(rec, '\n'), next...)
		}
		if err != nil {
			break
		}
	}
	if tooLong {
		return nil, lines, size, errTooLong
	}
	return rec, lines, size, err
}

// quoteParity reports whether b holds an odd number of '"'.
func quoteParity(b []byte) bool {
	return bytes.Count(b, []byte{'"'})%2 == 1
}

// readLine returns the next line without its newline, how many bytes it
// took (its newline included) and, when quotes is set (CSV), whether it
// holds an odd number of '"' (counted as it is read, over the whole line; a
// JSON line skips the count, a pass over every byte). A line longer than
// maxLineBytes is consumed and reported with tooLong set (and line nil).
func readLine(br *bufio.Reader, quotes bool) (line []byte, odd, tooLong bool, size int64, err error) {
	line, err = br.ReadSlice('\n')
	odd = quotes && quoteParity(line)
	size = int64(len(line))
	if err == nil {
		return line[:len(line)-1], odd, false, size, nil
	}
	if err != bufio.ErrBufferFull {
		return line, odd, false, size, err
	}
	buf := append([]byte(nil), line...)
	for {
		line, err = br.ReadSlice('\n')
		odd = odd != (quotes && quoteParity(line))
		size += int64(len(line))
		if len(buf)+len(line) > maxLineBytes {
			tooLong, buf = true, nil
		} else if !tooLong {
			buf = append(buf, line...)
		}
		if err == nil {
			if tooLong {
				return nil, odd, true, size, nil
			}
			return buf[:len(buf)-1], odd, false, size, nil
		}
		if err != bufio.ErrBufferFull {
			if tooLong {
				return nil, odd, true, size, nil
			}
			return buf, odd, false, size, err
		}
	}
}

// blankLine reports whether line is empty or all white space (Unicode's,
// as bytes.TrimSpace). An event line starts with '{' or a CSV field: a
// first byte that is printable ASCII decides, and only a line that starts
// with ASCII white space or a non-ASCII byte is trimmed.
func blankLine(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' && line[0] < 0x80 {
		return false
	}
	return len(bytes.TrimSpace(line)) == 0
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}
