package main

import "errors"

// Errors of the release tool; each is wrapped with the module, file or
// argument it is about.
var (
	// ErrVersion: the release version is not one a Go module can carry.
	ErrVersion = errors.New("bad release version")
	// ErrLayout: a module is not where its path says, or cannot be zipped.
	ErrLayout = errors.New("bad module layout")
)
