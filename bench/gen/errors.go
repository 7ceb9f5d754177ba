package main

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrConfig reports an invalid generator configuration.
var ErrConfig = errors.New("gen: invalid config")
