// Package internal_test enforces the import direction of DESIGN.md: the core
// never imports a lander, a store SDK or Kafka.
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

func TestImportDirection(t *testing.T) {
	core := []string{".", "./types", "./changelog", "./sql/...", "./exec"}
	forbidden := []string{
		"github.com/ubiksql/ubik/land", "github.com/ubiksql/ubik/usage", "github.com/ubiksql/ubik/kafka",
		"github.com/redis/", "github.com/jackc/", "github.com/aws/", "github.com/twmb/", "github.com/ClickHouse/",
		"github.com/ubiksql/ubik/internal/cli",
	}
	args := append([]string{"list", "-deps", "-test=false"}, core...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the core depends on %s", dep)
			}
		}
	}
}
