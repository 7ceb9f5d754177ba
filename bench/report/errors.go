package main

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrMismatch reports that two changelogs end in different final values.
var ErrMismatch = errors.New("report: results differ")

// ErrUsage reports bad command-line arguments.
var ErrUsage = errors.New("report: usage")

// ErrRuns reports a malformed runs file.
var ErrRuns = errors.New("report: bad runs file")
