package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// outArena hands out the records a stage produces, their headers and
// their bytes from chunks: an allocation per chunk instead of two or
// three per record (a sink record, a state entry). A chunk is never
// reused: it is garbage once the client let go of its last record
// (acknowledged, or failed by an abort), so nothing handed out is ever
// written again. What a chunk holds beyond the records still buffered
// is at most one chunk of each kind.
type outArena struct {
	recs    []kgo.Record
	headers []kgo.RecordHeader
	buf     []byte
}

// The chunks stay below 32 KiB, the runtime's largest small object: a
// larger one is allocated (and cleared) as a span of its own.
const (
	arenaRecords = 128      // records per chunk (about 20 KiB), and headers for 5 each
	arenaBytes   = 16 << 10 // bytes per chunk; a request over an eighth has its own
)

// record returns a zero record.
func (a *outArena) record() *kgo.Record {
	if len(a.recs) == 0 {
		a.recs = make([]kgo.Record, arenaRecords)
	}
	r := &a.recs[0]
	a.recs = a.recs[1:]
	return r
}

// bytes returns an empty slice with room for n bytes that no other slice
// shares: appending up to n bytes never moves it.
func (a *outArena) bytes(n int) []byte {
	if n > arenaBytes/8 {
		return make([]byte, 0, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, arenaBytes)
	}
	b := a.buf[len(a.buf) : len(a.buf) : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	return b
}

// header returns an empty header slice with room for n headers, as bytes
// does.
func (a *outArena) header(n int) []kgo.RecordHeader {
	if cap(a.headers)-len(a.headers) < n {
		a.headers = make([]kgo.RecordHeader, 0, max(n, 5*arenaRecords))
	}
	h := a.headers[len(a.headers) : len(a.headers) : len(a.headers)+n]
	a.headers = a.headers[:len(a.headers)+n]
	return h
}

// stamp sets the clock the records produced next carry as their
// timestamp: one clock read per polled batch and per precommit instead
// of one per record (the client reads the clock for a record without
// one).
func (t *txn) stamp() { t.clock = time.Now() }
