package drive

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/ubiksql/ubik/internal/exec"
)

// The errors a driver returns; the root package re-exports them under the
// same names, so errors.Is holds across both.
var (
	ErrClosed        = errors.New("ubik: closed")
	ErrBackpressure  = errors.New("ubik: output buffer full; drain records with Next before pushing more")
	ErrConcurrentUse = errors.New("ubik: a Query was used from two goroutines at once")
	ErrInternal      = errors.New("ubik: internal error")
)

// EventError reports one event that was not applied: malformed input (it
// unwraps to exec.ErrMalformed) or a runtime evaluation error. The driver
// goes on unless Config.Strict is set.
type EventError struct {
	Seq int64 // 1-based sequence number of the event in this driver's input
	Err error
}

func (e *EventError) Error() string { return fmt.Sprintf("event %d: %v", e.Seq, e.Err) }

func (e *EventError) Unwrap() error { return e.Err }

// Recover, deferred, turns a panic into an ErrInternal error with the
// stack, so none crosses an API or a stage boundary.
func Recover(err *error) {
	if r := recover(); r != nil {
		*err = internal(r)
	}
}

// PanicError is a recovered panic. Its message is one line (it ends up in
// a host's error output and in a C caller's error string); Stack is for a
// log.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrInternal, e.Value) }

func (e *PanicError) Unwrap() error { return ErrInternal }

func internal(r any) error { return &PanicError{Value: r, Stack: debug.Stack()} }

// PanicOf is the error of a panic value r recovered by a host.
func PanicOf(r any) error { return internal(r) }

// LogPanic writes the stack of a recovered panic in err, if it holds one,
// to log (which may be nil).
func LogPanic(log *slog.Logger, err error) {
	var pe *PanicError
	if log != nil && errors.As(err, &pe) {
		log.Error("ubik: recovered from an internal error", "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
}

// Skipped reports whether err is an evaluation error of one event or one
// record, which was counted and skipped: the work goes on.
func Skipped(err error) bool {
	var ee *exec.EvalError
	return errors.As(err, &ee)
}

// ErrGraphTable is returned by a graph's second-input calls when the graph
// has none: its second input is the versioned table of a view with a
// temporal join, or the other source of a join of two views over two
// different sources.
var ErrGraphTable = errors.New("a query over views has no second input: its views read one source and join no versioned table (a second input is the table of a view's temporal join, or the other source of a join of two views over two sources)")

// ErrIntervalJoinFull: see exec.ErrIntervalJoinFull.
var ErrIntervalJoinFull = exec.ErrIntervalJoinFull

// ErrJoinBuffer: see exec.ErrJoinBuffer.
var ErrJoinBuffer = exec.ErrJoinBuffer
