// Package embedder is the negative control of the public-API import
// rules: it imports the root package and changelog only, as an embedder
// (the C ABI, the command line) may, so the checkers must report nothing.
// It lives under testdata, so ./... never builds it.
package embedder

import (
	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

var (
	_ = ubik.Open
	_ = changelog.AppendString
)
