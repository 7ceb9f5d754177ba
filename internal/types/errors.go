package types

// This file holds the package's sentinel error values and its error types.

import "errors"

// ErrBadDecimal is returned (wrapped) for text that is not a decimal in range.
var ErrBadDecimal = errors.New("types: bad decimal")

// ErrBadTimestamp is returned (wrapped) for text that is not a timestamp.
var ErrBadTimestamp = errors.New("types: bad timestamp")
