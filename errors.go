package ubik

import (
	"errors"

	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/exec"
)

// The error vocabulary of the root package: every error a Query, a
// Program or an Engine returns is one of these, or wraps one (test with
// errors.Is), or is an *EventError (test with errors.As). The values are
// the engine's own, so errors.Is holds whichever layer returned them.
var (
	// ErrInvalidOptions: an Options or QueryOptions field is out of range.
	ErrInvalidOptions = errors.New("ubik: invalid options")
	// ErrClosed: the query was closed, or failed and is closed.
	ErrClosed = drive.ErrClosed
	// ErrBackpressure: the output buffer is full; take records with Next
	// and push the same event again (nothing was applied).
	ErrBackpressure = drive.ErrBackpressure
	// ErrNoQuery: the script has no query to start.
	ErrNoQuery = errors.New("ubik: the script has no query")
	// ErrConcurrentUse: a Query was used from two goroutines at once.
	ErrConcurrentUse = drive.ErrConcurrentUse
	// ErrInternal: the engine hit a bug (a recovered panic); the query is
	// closed. The error is one line; Options.Logger receives the stack.
	ErrInternal = drive.ErrInternal
	// ErrMalformed: an event could not be decoded into the source's row
	// (bad JSON or CSV, a wrong type, a missing event time). Every
	// malformed event's *EventError unwraps to it.
	ErrMalformed = drive.ErrMalformed
	// ErrJoinBuffer is returned by Push for an event a temporal join
	// cannot hold: QueryOptions.JoinBuffer events wait already for the
	// table's watermark to pass their time. Nothing was done; push table
	// rows (or end the table input) and push the event again.
	ErrJoinBuffer = drive.ErrJoinBuffer
	// ErrIntervalJoinFull: an interval join holds QueryOptions.JoinBuffer
	// rows already; the row is not taken and the query fails.
	ErrIntervalJoinFull = drive.ErrIntervalJoinFull
	// ErrUnknownInput is returned by PushInput for a name that is none of
	// the query's inputs; nothing was done.
	ErrUnknownInput = errors.New("ubik: unknown input")
	// ErrEvaluation classifies an event that failed to evaluate (a failed
	// cast, an overflow), as errors.Is sees an *EventError's cause; a
	// malformed event is ErrMalformed.
	ErrEvaluation = exec.ErrEval
	// ErrCSVHeader classifies a CSV header that does not fit its source
	// (a declared column missing, or one named twice): a wrong input, not
	// one bad event.
	ErrCSVHeader = exec.ErrHeader
)

// EventError reports one event that was not applied: malformed input (it
// unwraps to ErrMalformed) or a runtime evaluation error. The query goes
// on unless QueryOptions.Strict is set.
type EventError = drive.EventError

// recover, deferred, turns a panic into a one-line ErrInternal error and
// logs its stack to Options.Logger, so no panic crosses the API.
func (e *Engine) recover(err *error) {
	if r := recover(); r != nil {
		*err = drive.PanicOf(r)
		drive.LogPanic(e.opts.Logger, *err)
	}
}
