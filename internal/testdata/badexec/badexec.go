// Package badexec is the positive control of the driver import rule: it
// imports exec directly, as a host of the operator must not (it goes
// through internal/drive), so the checker must report it. It lives under
// testdata, so ./... never builds it.
package badexec

import "github.com/ubiksql/ubik/internal/exec"

var _ = exec.MetaKey
