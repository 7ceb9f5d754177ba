// Package badimport is the positive control of the import-direction test:
// it imports a lander on purpose, so the checker must report it under both
// rules (the core's and kafka's). It lives under testdata, so ./... never
// builds it.
package badimport

import "github.com/ubiksql/ubik/land/kafkasrc"

var _ = kafkasrc.Decode
