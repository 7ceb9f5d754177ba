package main

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrUsage reports bad command-line arguments.
var ErrUsage = errors.New("duckref: usage")
