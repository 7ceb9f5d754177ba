package cli

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"os"
	"syscall"
)

// ErrUsage marks a command-line usage error (exit status 2).
var ErrUsage = errors.New("usage")

// errHelp is returned by a command whose --help was asked for: the help is
// printed on stdout and the exit status is 0.
var errHelp = errors.New("help requested")

// ErrBadInput marks a run that crossed its bad-input limit (exit status 3).
var ErrBadInput = errors.New("bad input")

// errTooLong marks a record longer than maxLineBytes (consumed, not kept).
var errTooLong = errors.New("record too long")

// ErrStateMismatch is returned when a state dir belongs to another query.
var ErrStateMismatch = errors.New("ubik: the state dir belongs to a different query or input")

// ErrStateInUse is returned when another process runs over the state dir,
// or writes an output of the run (statelock.go).
var ErrStateInUse = errors.New("ubik: already in use")

// StopSignal is the cancellation cause cmd/ubik gives the context when a
// SIGINT or SIGTERM arrives; the command stops cleanly and ends as
// signalEnd says.
type StopSignal struct{ Signal os.Signal }

func (s StopSignal) Error() string {
	switch s.Signal {
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "terminated by SIGTERM"
	}
	return "stopped by " + s.Signal.String()
}

// Status is the exit status a shell reports for the signal: 128 + its number.
func (s StopSignal) Status() int {
	if n, ok := s.Signal.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}
