package exec

import (
	"hash/maphash"
	"unsafe"
)

// group is the state of one (group, window). It is kept small (see
// StateCost): the GROUP BY cells are not stored, they are decoded from
// mapKey when a record is emitted (decodeKeyBytes); the aggregate state is
// a run of words (packed.go) that wp points to. It is 64 bytes, and
// TestGroupSize keeps it so: at 72 bytes (an 8-byte field more) the
// standard query took 1.08 times the CPU and a HOP query 1.23 times. A
// field read only at emission belongs in the word after the aggregate
// words (a session's end) or in the chunk's hash words (the hash of the
// last published value), not here.
type group struct {
	wp     *uint64 // first aggregate word (nil when the query has none)
	mapKey string  // binary group key
	start  int64   // window start (µs); sessions: session start
	// The window end is not stored: an aligned window's is start + size, a
	// continuous view has none, and a session keeps its end in the word
	// after its aggregate words (Operator.groupEnd).
	revision  uint64
	dirtyAt   int64 // nanotime of the first change since the last emission; 0 = clean
	seq       uint64
	heapIndex int32 // sessions: position in the close heap; aligned windows: slot in the dirty list (Operator.finalize)
	flags     groupFlags
	hashOff   uint16 // words from wp to the value hash word, when the query keeps one (bucket.add)
}

type groupFlags uint8

const (
	inDirty   groupFlags = 1 << iota // queued on the dirty list
	dead                             // finalized and dropped
	ckptDirty                        // changed since the last checkpoint
	written                          // a checkpoint entry exists for it
	published                        // a value was published: its hash is kept (Operator.lastValue)
)

func (g *group) has(f groupFlags) bool { return g.flags&f != 0 }
func (g *group) set(f groupFlags, on bool) {
	if on {
		g.flags |= f
	} else {
		g.flags &^= f
	}
}

// words returns g's aggregate words.
func (g *group) words(stride int) []uint64 {
	if g.wp == nil {
		return nil
	}
	return unsafe.Slice(g.wp, stride)
}

// hashWord returns g's value hash word (the query keeps one: keepsHashWord).
func (g *group) hashWord() *uint64 {
	return (*uint64)(unsafe.Add(unsafe.Pointer(g.wp), uintptr(g.hashOff)*8))
}

// bucket holds the groups of one aligned window (TUMBLE, HOP) or of the
// continuous view.
//
// Its groups die together (a window finalizes as a whole; a continuous
// view's groups never die), so they are stored by value in chunks, with
// their aggregate words and key bytes in chunk-sized slabs, and found
// through an open-addressing index of group ordinals with a hash byte per
// slot (so a probe rarely touches a group), twelve slots and their hash
// bytes to a 64-byte line: a probe for a key never seen, at millions of
// groups, costs one cache miss, not one for the slot and one for its byte. A Go map from key to *group
// costs about 40 bytes per group on top of a separate group allocation;
// the index costs 7 to 14. Chunks never move, so a *group stays
// valid for the bucket's life.
type bucket struct {
	start, end int64
	n          int       // groups, in creation order: ordinal = position
	chunks     [][]group // chunkSize groups each
	keys       []byte    // the current key slab (appended to, never moved)
	index      []idxLine // a power of two of lines; slot j of a line: ord[j]
	seed       maphash.Seed
	stride     int  // aggregate words per group
	hashWords  bool // each group has a value hash word (bucket.add)
}

const (
	// chunkSize groups fill an 8 KiB span exactly: a pointerful object
	// over 512 bytes carries an 8-byte allocation header, so 128 groups
	// (8 KiB + 8) would round up to the 9.5 KiB size class.
	chunkSize = (8192 - 8) / int(unsafe.Sizeof(group{}))
	keySlab   = 4096
)

func newBucket(start, end int64, seed maphash.Seed, stride int) *bucket {
	return &bucket{start: start, end: end, seed: seed, stride: stride}
}

// at returns the group of ordinal i.
func (b *bucket) at(i int) *group { return &b.chunks[i/chunkSize][i%chunkSize] }

// idxLine is one cache line of the index: up to lineSlots ordinals+1 (0 =
// empty), filled from slot 0, and the top hash byte of each. Keys are
// never removed, so a line's first empty slot ends a probe.
type idxLine struct {
	ord [lineSlots]uint32
	tag [lineSlots]uint8
	_   [64 - 5*lineSlots]byte
}

const lineSlots = 12

// slots returns the index's capacity in groups' slots.
func (b *bucket) slots() int { return len(b.index) * lineSlots }

// lookup returns the group of key, or nil; h is the key's hash under the
// bucket's seed (every bucket of an operator shares the seed, so a row that
// falls into several windows hashes its key once).
func (b *bucket) lookup(key []byte, h uint64) *group {
	if len(b.index) == 0 {
		return nil
	}
	tag := uint8(h >> 56)
	mask := uint64(len(b.index) - 1)
	for li := h & mask; ; li = (li + 1) & mask {
		ln := &b.index[li]
		for j := range ln.ord {
			e := ln.ord[j]
			if e == 0 {
				return nil
			}
			if ln.tag[j] == tag {
				if g := b.at(int(e) - 1); g.mapKey == string(key) {
					return g
				}
			}
		}
	}
}

// add appends a new group for key (which must not be present) and returns
// it with its words zeroed.
func (b *bucket) add(key []byte, h uint64) *group {
	if (b.n+1)*4 > b.slots()*3 {
		b.grow()
	}
	ci := b.n / chunkSize
	if ci == len(b.chunks) {
		b.chunks = append(b.chunks, make([]group, chunkSize))
		b.chunkWords(b.chunks[ci])
	}
	g := b.at(b.n)
	g.mapKey = b.storeKey(key)
	b.n++
	b.insertIndex(h, uint32(b.n))
	return g
}

// chunkWords gives a new chunk's groups their words: one slab, the
// aggregate words of every group, then (if the bucket keeps them) the
// value hash words of every group. The hashes are read only when a record
// that is not final is published, so a window's finals (a HOP query's
// bulk) walk the aggregate words alone, as densely as a query without
// hashes: a hash word after each group's aggregate words would double a
// one-count group's words.
func (b *bucket) chunkWords(c []group) {
	s, n := b.stride, chunkSize*b.stride
	if b.hashWords {
		n += chunkSize
	}
	if n == 0 {
		return
	}
	ws := make([]uint64, n)
	for j := range c {
		c[j].wp = &ws[j*s]
		if b.hashWords {
			c[j].hashOff = uint16(chunkSize*s + j - j*s)
		}
	}
}

// storeKey copies key into the key slab. The string aliases the slab,
// which is only ever appended to within its capacity, so its bytes never
// change (a string per key would cost a separate, rounded-up allocation).
func (b *bucket) storeKey(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	if len(b.keys)+len(key) > cap(b.keys) {
		b.keys = make([]byte, 0, max(keySlab, len(key)))
	}
	off := len(b.keys)
	b.keys = append(b.keys, key...)
	return unsafe.String(&b.keys[off], len(key))
}

func (b *bucket) insertIndex(h uint64, ord uint32) {
	mask := uint64(len(b.index) - 1)
	for li := h & mask; ; li = (li + 1) & mask {
		ln := &b.index[li]
		for j := range ln.ord {
			if ln.ord[j] == 0 {
				ln.ord[j], ln.tag[j] = ord, uint8(h>>56)
				return
			}
		}
	}
}

func (b *bucket) grow() {
	lines := 1
	if len(b.index) > 0 {
		lines = len(b.index) * 2
	}
	b.resize(lines)
}

// reserve sizes an empty bucket's index for n groups at most 3/4 full, as
// growing to n would, so filling it to n rehashes nothing: a window's
// groups are usually about as many as its predecessor's, and at millions
// of groups the doublings (every key hashed again, into a cold index) cost
// more than the groups' own creation.
func (b *bucket) reserve(n int) {
	if b.n > 0 || n <= 6 {
		return
	}
	lines := 1
	for n*4 > lines*lineSlots*3 {
		lines *= 2
	}
	b.resize(lines)
	b.chunks = make([][]group, 0, (n+chunkSize-1)/chunkSize)
}

func (b *bucket) resize(lines int) {
	b.index = make([]idxLine, lines)
	for i := 0; i < b.n; i++ {
		b.insertIndex(maphash.String(b.seed, b.at(i).mapKey), uint32(i+1))
	}
}

// each calls f for every group in creation order, stopping at an error.
func (b *bucket) each(f func(*group) error) error {
	for i := 0; i < b.n; i++ {
		if err := f(b.at(i)); err != nil {
			return err
		}
	}
	return nil
}

// bytesPerGroup estimates a bucket's memory per group beyond its words and
// key bytes: the group itself and its index slot (64/12 bytes) at the
// average load (between 3/8 and 3/4).
const bytesPerGroup = int(unsafe.Sizeof(group{})) + 64*16/(lineSlots*9)
