package cli

import (
	"path/filepath"
	"reflect"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// resolveScriptPaths makes each relative WITH (path = ...) of the script's
// sources, tables and sinks relative to the script's own directory, as a C
// #include is: `cd examples && ubik run merchant_totals.sql` and
// `ubik run examples/merchant_totals.sql` read the same file. Paths given
// by flags (--input, --output) stay relative to the working directory.
// Options maps are shared by the plan's copies of a source, so each map is
// changed once, in place.
func resolveScriptPaths(prog *plan.Program, sqlPath string) {
	dir := filepath.Dir(sqlPath)
	seen := map[uintptr]bool{}
	fix := func(opts map[string]string) {
		if opts == nil {
			return
		}
		id := reflect.ValueOf(opts).Pointer()
		if seen[id] {
			return
		}
		seen[id] = true
		p := opts["path"]
		if p == "" || p == "-" || filepath.IsAbs(p) || strings.EqualFold(opts["connector"], "kafka") {
			return
		}
		opts["path"] = filepath.Join(dir, p)
	}
	for _, s := range prog.Sources {
		fix(s.Options)
	}
	for _, s := range prog.Sinks {
		fix(s.Options)
	}
}
