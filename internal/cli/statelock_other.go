//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package cli

import (
	"fmt"
	"os"
)

// lockStateDir refuses: --state-dir needs flock, which keeps a second run
// from corrupting a running one's outputs.
func lockStateDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("%w: --state-dir needs file locks (flock), which this system lacks", ErrUsage)
}

func lockOutput(f *os.File, p string) error { return nil }
