package exec

import (
	"hash/maphash"
	"sort"
	"unsafe"
)

// keySet is a set of byte strings (a DISTINCT aggregate's values, in their
// binary key form). It is written for memory, which a DISTINCT set spends
// per value in every live (group, window): the keys sit back to back in one
// slab, found through an open-addressing index of 4-byte positions with a
// hash byte per slot. That costs about 22 bytes per value where a Go map of
// strings costs 40 to 70, and its size is exactly known (bytes), which the
// state gauge needs.
type keySet struct {
	seed  maphash.Seed
	keys  []byte   // every member, back to back
	ends  []uint32 // ends[i]: end of member i in keys
	index []uint32 // 0 = empty; else member number + 1
	tags  []uint8  // the top hash byte of each index slot
}

func (s *keySet) len() int { return len(s.ends) }

func (s *keySet) member(i int) string {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return unsafe.String(unsafe.SliceData(s.keys[start:]), int(s.ends[i]-start))
}

// find returns k's index slot and whether k is there (else the slot is
// the empty one where it would go).
func (s *keySet) find(k []byte) (uint64, bool) {
	h := maphash.Bytes(s.seed, k)
	tag := uint8(h >> 56)
	mask := uint64(len(s.index) - 1)
	i := h & mask
	for ; s.index[i] != 0; i = (i + 1) & mask {
		if s.tags[i] == tag && s.member(int(s.index[i]-1)) == string(k) {
			return i, true
		}
	}
	return i, false
}

func (s *keySet) has(k []byte) bool {
	if s.index == nil {
		return false
	}
	_, ok := s.find(k)
	return ok
}

// add inserts k and reports whether it was new.
func (s *keySet) add(k []byte) bool {
	if s.index == nil {
		s.seed = maphash.MakeSeed()
		s.grow()
	}
	i, ok := s.find(k)
	if ok {
		return false
	}
	tag := uint8(maphash.Bytes(s.seed, k) >> 56)
	// The slab may move when it grows: member strings are built on demand
	// and never kept.
	s.keys = append(s.keys, k...)
	s.ends = append(s.ends, uint32(len(s.keys)))
	s.index[i], s.tags[i] = uint32(len(s.ends)), tag
	if len(s.ends)*4 > len(s.index)*3 {
		s.grow()
	}
	return true
}

func (s *keySet) grow() {
	size := 8
	if len(s.index) > 0 {
		size = 2 * len(s.index)
	}
	s.index = make([]uint32, size)
	s.tags = make([]uint8, size)
	mask := uint64(size - 1)
	for m := range s.ends {
		k := s.member(m)
		h := maphash.String(s.seed, k)
		i := h & mask
		for s.index[i] != 0 {
			i = (i + 1) & mask
		}
		s.index[i], s.tags[i] = uint32(m+1), uint8(h>>56)
	}
}

// bytes is the set's memory: its slices' capacities (the header is the
// embedding state's).
func (s *keySet) bytes() int {
	return cap(s.keys) + 4*cap(s.ends) + 5*len(s.index)
}

// sorted returns the members in byte order (the strings alias the slab:
// valid until the next add).
func (s *keySet) sorted() []string {
	out := make([]string, s.len())
	for i := range out {
		out[i] = s.member(i)
	}
	sort.Strings(out)
	return out
}
