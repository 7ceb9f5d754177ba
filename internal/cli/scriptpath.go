package cli

import (
	"path/filepath"

	"github.com/ubiksql/ubik"
)

// resolveScriptPaths makes each relative WITH (path = ...) of the script's
// sources, tables and sinks relative to the script's own directory, as a C
// #include is: `cd examples && ubik run merchant_totals.sql` and
// `ubik run examples/merchant_totals.sql` read the same file. Paths given
// by flags (--input, --output) stay relative to the working directory.
func resolveScriptPaths(prog *ubik.Program, sqlPath string) {
	prog.ResolvePaths(filepath.Dir(sqlPath))
}
