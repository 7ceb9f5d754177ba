package changelog

import (
	"errors"
	"fmt"
)

// The package's error vocabulary.
var (
	// ErrMalformedKey is wrapped by every *KeyError: key bytes that are not a
	// JSON array of scalar cells.
	ErrMalformedKey = errors.New("changelog: malformed key")
	// ErrWindowPosition reports a window position outside the key array.
	ErrWindowPosition = errors.New("changelog: window position out of range")
	// ErrCellCount reports a row whose cell count differs from the
	// encoder's column count.
	ErrCellCount = errors.New("changelog: cell count does not match columns")
)

// KeyError is a syntax error in key bytes, at a byte offset.
type KeyError struct {
	Offset int    // byte offset of the problem in the key
	Msg    string // what is wrong there
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("changelog: malformed key at byte %d: %s", e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrMalformedKey) hold.
func (e *KeyError) Unwrap() error { return ErrMalformedKey }
