package land

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports: land stays free of store and Kafka SDKs, and a lander
// imports nothing of ubik but changelog and land (and what they import).
// land/landprom, its own module, has the same test.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"github.com/ubiksql/ubik/changelog":      true,
		"github.com/ubiksql/ubik/internal/types": true,
		"github.com/ubiksql/ubik/land":           true,
	}
	for _, pkg := range []string{".", "./redislander", "./dynamolander", "./pglander", "./chlander", "./kafkasrc", "./chhttp", "./internal/pool"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/ubiksql/ubik/") && !allowed[dep] && !strings.HasPrefix(dep, "github.com/ubiksql/ubik/land/") {
				t.Errorf("%s imports %s", pkg, dep)
			}
			if pkg == "." && strings.Contains(dep, ".") && !strings.HasPrefix(dep, "github.com/ubiksql/ubik/") && strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
				t.Errorf("land imports the third-party %s", dep)
			}
		}
	}
}
