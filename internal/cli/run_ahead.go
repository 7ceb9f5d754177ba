package cli

import (
	"bytes"
	"errors"
)

// A run of two files interleaves them by their watermarks, which it reads
// after every record it pushes, so on several threads the query cannot
// decode a file's records in blocks after their push. It can decode them
// ahead (ubik.Query.Prefetch): the run reads each file up to aheadLines
// records ahead of the one it pushes and hands each record to Prefetch as
// it is read, then pushes the records in order as before. Only a regular
// file is read ahead: a pipe's next line may not come for a while, and
// the records before it must not wait for it.

// aheadLines is the most records read ahead of an input's push; a refill
// starts when fewer than half remain.
const aheadLines = 1024

// aheadRecord is one result of an input's record reader.
type aheadRecord struct {
	rec         []byte
	lines, size int64
	err         error
}

// readAhead reads an input's records ahead, handing each to prefetch in
// the form the run will push it (trimmed, without a leading byte order
// mark; a blank record is not pushed).
type readAhead struct {
	read     func() ([]byte, int64, int64, error)
	prefetch func(rec []byte) bool
	recs     []aheadRecord
	head     int
	offset   int64 // the input offset after the last record read ahead
	arena    int   // the bytes the last fill read
	ended    bool  // read returned an error that ends the input
	tried    bool  // a record was handed to prefetch
	off      bool  // the query took no record: read through
}

// newReadAhead reads ahead of the reader read of an input now at offset.
func newReadAhead(read func() ([]byte, int64, int64, error), offset int64, prefetch func([]byte) bool) *readAhead {
	return &readAhead{read: read, prefetch: prefetch, offset: offset}
}

// next returns the input's next record, as read would.
func (a *readAhead) next() ([]byte, int64, int64, error) {
	if a.off && a.head == len(a.recs) {
		return a.read()
	}
	if !a.ended && !a.off && len(a.recs)-a.head < aheadLines/2 {
		a.fill()
	}
	if a.head == len(a.recs) {
		return a.read() // ended: read says so again
	}
	r := a.recs[a.head]
	a.recs[a.head] = aheadRecord{}
	a.head++
	return r.rec, r.lines, r.size, r.err
}

// fill reads until aheadLines records wait, the input ends, or the query
// takes no record.
func (a *readAhead) fill() {
	a.recs = append(a.recs[:0], a.recs[a.head:]...)
	a.head = 0
	// The records of this fill, copied out of the reader's buffer (sized
	// by the last fill's).
	arena := make([]byte, 0, max(a.arena+a.arena/4, 16<<10))
	defer func() { a.arena = len(arena) }()
	for len(a.recs) < aheadLines && !a.ended && !a.off {
		rec, lines, size, err := a.read()
		atStart := a.offset == 0
		a.offset += size
		if rec != nil {
			start := len(arena)
			arena = append(arena, rec...)
			rec = arena[start:len(arena):len(arena)]
		}
		a.recs = append(a.recs, aheadRecord{rec: rec, lines: lines, size: size, err: err})
		if err != nil && !errors.Is(err, errTooLong) {
			a.ended = true
			break
		}
		if err == nil {
			a.hand(rec, atStart)
		}
	}
}

// hand prefetches rec as the run will push it.
func (a *readAhead) hand(rec []byte, atStart bool) {
	rec = trimCR(rec)
	if atStart {
		rec = bytes.TrimPrefix(rec, utf8BOM)
	}
	if blankLine(rec) {
		return
	}
	if !a.prefetch(rec) && !a.tried {
		a.off = true // the query decodes each record at its push
	}
	a.tried = true
}
