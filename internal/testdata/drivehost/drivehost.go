// Package drivehost is the negative control of the driver import rule: it
// imports internal/drive, which imports exec, so exec is among its
// dependencies but not its imports, and the checker must not report it.
// It lives under testdata, so ./... never builds it.
package drivehost

import "github.com/ubiksql/ubik/internal/drive"

var _ = drive.MetaKey
