package exec

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"fmt"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// ErrOverflow is returned when an exact aggregate leaves its type's range
// (DuckDB raises the same "Out of Range" error).
var ErrOverflow = errors.New("exec: out of range: overflow in sum")

// ErrHeader classifies a HeaderError for errors.Is.
var ErrHeader = errors.New("exec: the CSV header does not fit the source")

// ErrMalformed classifies an event that cannot be decoded into the source's
// row: bad JSON, a wrong type, a missing event time.
var ErrMalformed = errors.New("exec: malformed event")

// ErrQueued is returned by Process and Checkpoint while records wait in the
// emission queue: the host drains them first (SetRoom, Drain).
var ErrQueued = errors.New("exec: records of finalized windows are queued; drain them before pushing rows or checkpointing")

// ErrIntervalJoinFull is returned for a row an interval join cannot hold:
// it holds its bound (SetMaxHeld) of rows already. The row is not taken.
var ErrIntervalJoinFull = errors.New("exec: interval join state full")

// errFallback sends a line to the reference (fastjson) decoder.
var errFallback = errors.New("exec: fall back to the reference decoder")

// ErrFinished is returned when rows are pushed after Finish.
var ErrFinished = errors.New("exec: operator finished")

// ErrEval classifies an EvalError for errors.Is.
var ErrEval = errors.New("exec: evaluation error")

// errWindowTimeNull is the error processAligned and processSession give
// an event without a window time.
var errWindowTimeNull = errors.New("window time column is NULL")

// ErrBadState is returned (wrapped) when checkpoint bytes cannot be decoded
// or do not belong to this query.
var ErrBadState = errors.New("exec: bad checkpoint state")

// ErrJoinBuffer is returned for an event a temporal join cannot hold: as
// many events as its bound wait already for the table's watermark to pass
// their time. The event is not applied (nor counted); the host pushes
// table rows, or advances the table's watermark, and pushes it again.
var ErrJoinBuffer = errors.New("exec: temporal join buffer full")

// HeaderError says a CSV header does not fit the source: it lacks a
// declared column or names one twice. It is not one bad event but a wrong
// input, so the host stops rather than reading every row with a NULL column.
type HeaderError struct{ Msg string }

func (e *HeaderError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrHeader) hold.
func (e *HeaderError) Is(target error) bool { return target == ErrHeader }

// DecodeError says what is wrong with one event and in which column.
type DecodeError struct {
	Column string // "" when the whole event is bad (not JSON, not an object)
	Msg    string
}

func (e *DecodeError) Error() string {
	if e.Column == "" {
		return clipMessage(e.Msg)
	}
	return fmt.Sprintf("column %q: %s", clipMessage(e.Column), clipMessage(e.Msg))
}

// Unwrap classifies every DecodeError as ErrMalformed.
func (e *DecodeError) Unwrap() error { return ErrMalformed }

// EvalError is a runtime failure evaluating an expression for one event
// (a failed cast, an integer overflow). The event is not applied.
type EvalError struct {
	Where string // "WHERE", "GROUP BY", "aggregate", "HAVING", "SELECT"
	Err   error
}

func (e *EvalError) Error() string { return fmt.Sprintf("%s: %v", e.Where, e.Err) }

func (e *EvalError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrEval) hold.
func (e *EvalError) Is(target error) bool { return target == ErrEval }

// errWindowRange reports an event whose window cannot be represented.
type errWindowRange struct {
	ts int64
}

func (e errWindowRange) Error() string {
	return fmt.Sprintf("a window of event time %s lies outside the TIMESTAMP range (%s to %s)",
		changelog.AppendText(nil, types.TS(e.ts)), types.MinTimestampText, types.MaxTimestampText)
}
