package infer

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrNoRecords is returned when the input holds no record to infer from.
var ErrNoRecords = errors.New("no records to infer a schema from")
