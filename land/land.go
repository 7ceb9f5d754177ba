// Package land is the host side of ubik's changelog: it upserts records into
// a key-value or analytical store so that a store read returns the latest
// value of each identity, whatever the delivery order, duplicates or replays.
//
// ubik owns no store. This package and its subpackages are a reference host:
// the identity and guard rules live here, once, and each store package
// (redislander, dynamolander, pglander, chlander) implements them with one
// atomic guarded write. Nothing in the engine imports this package; it
// depends only on changelog.
//
// # Identity
//
// Mode decides what a record upserts:
//
//   - Continuous: a continuous view (no window). Identity = (query, key).
//   - Latest: a windowed query, the latest window per group. Identity =
//     (query, group), where the group is the key without its window cells.
//   - History: a windowed query, one row per window. Identity = (query,
//     group, window start), which is the full message key in another shape.
//
// The query name is part of every identity so that several queries landing
// in one store never collide.
//
// # Guard
//
// Every store keeps, beside the value, the (window_start, revision) pair of
// the record that wrote it, and accepts a record only when its pair is at or
// past the stored one (window_start is 0 for a continuous view). A window
// start alone is not enough: a replayed early emission of a window would
// overwrite its correction. Because the guard takes a maximum, landing is
// commutative and idempotent: any order, any number of copies, and any
// number of concurrent writers end in the same state as exactly-once,
// in-order delivery. An equal pair is a no-op that succeeds (Duplicate); a
// lower one is Superseded, counted, never an error.
package land

import (
	"context"
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/changelog"
)

// Mode is the identity rule a lander applies.
type Mode int

// The modes.
const (
	Continuous Mode = iota + 1
	Latest
	History
)

var modeNames = [...]string{Continuous: "continuous", Latest: "latest", History: "history"}

func (m Mode) String() string {
	if m >= Continuous && m <= History {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m >= Continuous && m <= History }

// Windowed reports whether the mode expects windowed records.
func (m Mode) Windowed() bool { return m == Latest || m == History }

// ParseMode parses "continuous", "latest" or "history".
func ParseMode(s string) (Mode, error) {
	for m := Continuous; m <= History; m++ {
		if strings.EqualFold(s, modeNames[m]) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("land: unknown mode %q (continuous, latest, history)", s)
}

// Version is the guard pair. Versions compare lexicographically.
type Version struct {
	WindowStart int64 // µs since the epoch; 0 for a continuous view
	Revision    uint64
}

// Compare returns -1, 0 or +1 as v is before, equal to or after o.
func (v Version) Compare(o Version) int {
	switch {
	case v.WindowStart < o.WindowStart:
		return -1
	case v.WindowStart > o.WindowStart:
		return 1
	case v.Revision < o.Revision:
		return -1
	case v.Revision > o.Revision:
		return 1
	}
	return 0
}

// Ref names one stored identity: what Get looks up.
type Ref struct {
	Query string
	// Group is the message key for Continuous, the group (the key without
	// its window cells) for Latest and History.
	Group []byte
	// WindowStart (µs) selects the window in History mode; ignored otherwise.
	WindowStart int64
}

func (r Ref) String() string {
	return fmt.Sprintf("%s %s @%d", r.Query, r.Group, r.WindowStart)
}

// Item is a record prepared for a store: its identity, guard and payload.
type Item struct {
	Ref
	Key       []byte // the message key, unchanged
	Value     []byte // the value bytes, unchanged
	Version   Version
	WindowEnd int64
	Final     bool
}

// Stored is what a store holds for one identity.
type Stored struct {
	Key       []byte
	Value     []byte
	Version   Version
	WindowEnd int64
	Final     bool
}

// Result counts what a Land call did with its records. Every record is
// counted exactly once.
type Result struct {
	Landed     int // written: a new identity, or a higher version
	Duplicate  int // the stored version was equal: a no-op success
	Superseded int // the stored version was higher: rejected by the guard
}

// Add returns r + o.
func (r Result) Add(o Result) Result {
	return Result{r.Landed + o.Landed, r.Duplicate + o.Duplicate, r.Superseded + o.Superseded}
}

// Total is the number of records counted.
func (r Result) Total() int { return r.Landed + r.Duplicate + r.Superseded }

// Lander upserts changelog records into one store under one Mode.
//
// Land must be atomic per record (never a torn value/version pair) and
// idempotent per batch: a batch that failed part way may be landed again,
// and the guard makes the second attempt harmless. Implementations are safe
// for concurrent use.
type Lander interface {
	// Land writes recs. An error means the batch may be partly written and
	// must be retried; a stale or duplicate record is not an error. A
	// Permanent error is a record that can never land, named by its index
	// in recs (*RecordError, RecordErrors) when the lander knows which.
	Land(ctx context.Context, recs []changelog.Record) (Result, error)
	// Get reads one identity's stored state, or ErrNotFound.
	Get(ctx context.Context, ref Ref) (Stored, error)
	// Mode is the identity rule the lander applies.
	Mode() Mode
	// Close releases the lander's connections.
	Close() error
}

// Scanner is implemented by landers that can list everything they store
// (for hosts rebuilding a cache, and for tests that check no stray row
// exists). fn's slices are valid only during the call.
type Scanner interface {
	Scan(ctx context.Context, fn func(Ref, Stored) error) error
}
