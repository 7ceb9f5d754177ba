package pgusage

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrInvalidOptions reports bad Options.
var ErrInvalidOptions = errors.New("pgusage: invalid options")
