package parser

import (
	"testing"

	"github.com/ubiksql/ubik/internal/golden"
)

// runGolden runs the golden-file cases of path through fn (internal/golden).
func runGolden(t *testing.T, path string, fn func(input string) string) { golden.Run(t, path, fn) }
