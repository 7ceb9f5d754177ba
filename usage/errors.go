package usage

import (
	"errors"
	"fmt"
	"strings"
)

// The error vocabulary. Specific event problems wrap ErrInvalidEvent, so
// errors.Is(err, ErrInvalidEvent) catches every one of them.
var (
	ErrInvalidEvent   = errors.New("usage: invalid event")
	ErrMissingKey     = fmt.Errorf("%w: missing deduplication key", ErrInvalidEvent)
	ErrBadKey         = fmt.Errorf("%w: bad deduplication key", ErrInvalidEvent)
	ErrBadTime        = fmt.Errorf("%w: bad event time", ErrInvalidEvent)
	ErrBadMeter       = fmt.Errorf("%w: bad meter", ErrInvalidEvent)
	ErrBadQuantity    = fmt.Errorf("%w: bad quantity", ErrInvalidEvent)
	ErrBadDimension   = fmt.Errorf("%w: bad dimension", ErrInvalidEvent)
	ErrInvalidValue   = errors.New("usage: invalid value")
	ErrInvalidQuery   = errors.New("usage: invalid query")
	ErrInvalidCursor  = errors.New("usage: invalid cursor")
	ErrCursorMismatch = fmt.Errorf("%w: cursor belongs to a different query, table or store", ErrInvalidCursor)
	ErrClosed         = errors.New("usage: log closed")
	ErrInvalidOptions = errors.New("usage: invalid options")
	// ErrSumOutOfRange: a sum needs more than the 29 integer digits of
	// DECIMAL(38,9), the type of a sum (as ubik run's sum of a DECIMAL(p,9)).
	ErrSumOutOfRange = errors.New("usage: sum out of range for DECIMAL(38,9)")
)

// EventError is one rejected event of a batch, with its index in the batch.
type EventError struct {
	Index int
	Key   string // the event's key, possibly empty or truncated
	Err   error
}

func (e *EventError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("event %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("event %d (key %q): %v", e.Index, e.Key, e.Err)
}

func (e *EventError) Unwrap() error { return e.Err }

// BatchError is returned by Write when some events were invalid. The valid
// events of the same batch were still written: the WriteResult returned with
// it counts them.
type BatchError struct {
	Errors []*EventError
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %d invalid event(s) rejected", len(e.Errors))
	for i, ee := range e.Errors {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errors)-5)
			break
		}
		b.WriteString("; ")
		b.WriteString(ee.Error())
	}
	return b.String()
}

// Unwrap exposes every event error to errors.Is and errors.As.
func (e *BatchError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, ee := range e.Errors {
		out[i] = ee
	}
	return out
}

// StoreError is a failure of the backing store, with the operation it hit.
type StoreError struct {
	Op  string // "write", "aggregate", "list", "get", "open"
	Err error
}

func (e *StoreError) Error() string { return "usage: " + e.Op + ": " + e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }
