package drive

import (
	"testing"
	"unsafe"
)

// TestHotFieldsApart holds the padding that keeps what one goroutine
// writes for every event off the cache lines another goroutine reads for
// every event: the workers (one per shard's goroutine, and the reader's,
// allocated one after another, each writing its key scratch per event),
// the par's read-mostly head against the reader's counters, the dedup
// node's state (the workers read its key) against its counters, and a
// shard's channels against the fields the shard writes.
func TestHotFieldsApart(t *testing.T) {
	if n := unsafe.Sizeof(worker{}); n < 64+unsafe.Sizeof(worker{}.key) {
		t.Errorf("worker is %d bytes: two workers' key scratch can share a cache line", n)
	}
	var p par
	if gap := unsafe.Offsetof(p.wg) - (unsafe.Offsetof(p.testTake) + unsafe.Sizeof(p.testTake)); gap < 64 {
		t.Errorf("par: %d bytes between the fields the shards read and the ones the reader writes", gap)
	}
	if gap := unsafe.Offsetof(p.op) - (unsafe.Offsetof(p.cols) + unsafe.Sizeof(p.cols)); gap < 64 {
		t.Errorf("par: %d bytes between cols and op", gap)
	}
	var n dedupNode
	if gap := unsafe.Offsetof(n.wm) - (unsafe.Offsetof(n.src) + unsafe.Sizeof(n.src)); gap < 64 {
		t.Errorf("dedupNode: %d bytes between the state the decoding goroutines read and the counters the reader writes", gap)
	}
	var s shard
	if gap := unsafe.Offsetof(s.b) - (unsafe.Offsetof(s.free) + unsafe.Sizeof(s.free)); gap < 64 {
		t.Errorf("shard: %d bytes between its channels and the fields it writes", gap)
	}
}

// TestOutRecLine holds a shard's record to one cache line: the shard
// writes one for every record it renders and the reader reads it on the
// other core.
func TestOutRecLine(t *testing.T) {
	if n := unsafe.Sizeof(outRec{}); n > 64 {
		t.Errorf("outRec is %d bytes: more than a cache line", n)
	}
}
