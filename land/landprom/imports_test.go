package landprom

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports: landprom imports nothing of ubik but changelog, types and
// land's packages (as land's own TestImports checks for the landers).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var land bool
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/ubiksql/ubik/land":
			land = true
		case dep == "github.com/ubiksql/ubik/changelog", dep == "github.com/ubiksql/ubik/internal/types",
			strings.HasPrefix(dep, "github.com/ubiksql/ubik/land/"):
		case strings.HasPrefix(dep, "github.com/ubiksql/ubik/"):
			t.Errorf("landprom imports %s", dep)
		}
	}
	if !land {
		t.Errorf("go list -deps lists no github.com/ubiksql/ubik/land: %s", out)
	}
}
