package land

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"fmt"
)

// Errors of the package.
var (
	ErrNotFound     = errors.New("land: not found")
	ErrBadRecord    = errors.New("land: bad record")
	ErrModeMismatch = errors.New("land: record does not fit the mode")
	// ErrRefused is a record the store can never hold (a limit of the
	// store, not of the changelog): no retry can land it.
	ErrRefused = errors.New("land: the store refuses the record")
	// ErrConfig is a store error that points at the configuration rather
	// than at a record or an outage: a missing table or column, a missing
	// grant, bad credentials, a read-only database. No retry can fix it,
	// so it stops land.Run at once; the lander's error names the store's
	// reason and what to check.
	ErrConfig = errors.New("land: the store's configuration stops landing")
	ErrClosed = errors.New("land: closed")
)

// RecordError is a record that cannot be landed, with where it came from.
type RecordError struct {
	Index int    // position in the batch
	Where string // e.g. "topic t partition 3 offset 17", when known
	Err   error
}

func (e *RecordError) Error() string {
	w := e.Where
	if w == "" {
		w = fmt.Sprintf("record %d of the batch", e.Index)
	}
	return fmt.Sprintf("%s: %v", w, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// RecordErrors are the bad records of one batch, every one of them, so
// that a host skipping bad records drops them all in one pass.
type RecordErrors []*RecordError

func (e RecordErrors) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	return fmt.Sprintf("%v (and %d more bad records)", e[0], len(e)-1)
}

// Unwrap returns the record errors, so errors.As finds the first.
func (e RecordErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, re := range e {
		out[i] = re
	}
	return out
}
