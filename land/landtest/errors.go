package landtest

// This file holds the package's sentinel error values and its error types.

import "errors"

var errCrash = errors.New("landtest: crash between the store write and the offset commit")
