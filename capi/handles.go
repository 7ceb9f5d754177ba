package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ubiksql/ubik"
)

// registry maps handle numbers to live engines and queries. C never sees a
// Go pointer: it holds numbers, and a number is looked up on every call.
// Numbers come from one counter shared by both kinds and are never reused,
// so a stale or mistyped handle is always reported, never dereferenced.
type registry struct {
	mu      sync.Mutex
	last    uint64
	engines map[uint64]*engineObj
	queries map[uint64]*queryObj
}

// handles is the library's process-wide handle table. It is the one piece
// of package-level mutable state in ubik: a C host has nowhere else to keep
// Go objects, and a shared library has exactly one instance per process.
var handles = &registry{engines: map[uint64]*engineObj{}, queries: map[uint64]*queryObj{}}

type engineObj struct {
	eng *ubik.Engine
}

// queryObj is a started query plus the C memory its results are returned
// in. mu serializes every call on the handle (see THREAD SAFETY in ubik.h).
type queryObj struct {
	mu     sync.Mutex
	freed  bool
	q      *ubik.Query
	strict bool
	ended  bool  // the input was closed without error
	failed error // the query stopped; every later call but next/stats/free reports it

	in  []byte // the event being pushed, copied out of the caller's memory
	tin []byte // the same for the versioned table's row (ubik_push_input)

	rec     cbuf // key bytes then value bytes of the last record from next
	pos     cbuf // int32 window positions of that record
	group   cbuf // its group key (the key without the window cells)
	name    cbuf // the query name of that record
	stats   cbuf // NUL-terminated JSON from ubik_query_stats
	cols    cbuf // NUL-terminated JSON from ubik_query_columns, built once
	colsLen int
}

// cbuf is a growable buffer in C memory, so that pointers into it may be
// handed to C and kept there after the call returns (cgo forbids that for Go
// memory).
type cbuf struct {
	p unsafe.Pointer
	n int
}

// bytes returns the first n bytes of the buffer, grown to hold them, as a Go
// slice over the C memory; ok is false when C memory is exhausted.
func (b *cbuf) bytes(n int) (s []byte, ok bool) {
	if n > b.n {
		c := max(n, 2*b.n, 64)
		p := C.realloc(b.p, C.size_t(c))
		if p == nil {
			return nil, false
		}
		b.p, b.n = p, c
	}
	return unsafe.Slice((*byte)(b.p), b.n)[:n], true
}

func (b *cbuf) free() {
	C.free(b.p)
	b.p, b.n = nil, 0
}

func (r *registry) addEngine(e *engineObj) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last++
	r.engines[r.last] = e
	return r.last
}

func (r *registry) addQuery(q *queryObj) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last++
	r.queries[r.last] = q
	return r.last
}

func (r *registry) engine(h uint64) (*engineObj, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.engines[h]; ok {
		return e, nil
	}
	return nil, r.badHandle(h, "engine")
}

func (r *registry) query(h uint64) (*queryObj, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q, ok := r.queries[h]; ok {
		return q, nil
	}
	return nil, r.badHandle(h, "query")
}

func (r *registry) removeEngine(h uint64) (*engineObj, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.engines[h]
	if !ok {
		return nil, r.badHandle(h, "engine")
	}
	delete(r.engines, h)
	return e, nil
}

func (r *registry) removeQuery(h uint64) (*queryObj, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.queries[h]
	if !ok {
		return nil, r.badHandle(h, "query")
	}
	delete(r.queries, h)
	return q, nil
}

// badHandle says why h is not a live handle of the wanted kind. r.mu is held.
func (r *registry) badHandle(h uint64, want string) error {
	switch _, isEngine := r.engines[h]; {
	case h == 0:
		return fmt.Errorf("%w: 0 is not a %s handle", errInvalidHandle, want)
	case isEngine:
		return fmt.Errorf("%w: %d is an engine handle, not a %s handle", errInvalidHandle, h, want)
	case r.queries[h] != nil:
		return fmt.Errorf("%w: %d is a query handle, not an %s handle", errInvalidHandle, h, want)
	case h <= r.last:
		return fmt.Errorf("%w: handle %d was released", errInvalidHandle, h)
	}
	return fmt.Errorf("%w: %d was never issued as a handle", errInvalidHandle, h)
}
