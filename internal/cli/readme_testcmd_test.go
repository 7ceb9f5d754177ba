package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSaysWhatTestsInstall: the README's paragraph on
// scripts/test.sh names every Debian package scripts/services.sh may
// install, and says that it needs root and how long it takes.
func TestReadmeSaysWhatTestsInstall(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "bash scripts/test.sh\n```\n")
	if !ok {
		t.Fatal("README.md has no bash scripts/test.sh block")
	}
	para, _, _ := strings.Cut(after, "\n\n\n")
	para, _, _ = strings.Cut(strings.TrimLeft(para, "\n"), "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	services, err := os.ReadFile(filepath.Join(root, "scripts", "services.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, m := range regexp.MustCompile(`(?m)ensure_pkgs ([a-z0-9 -]+)$`).FindAllStringSubmatch(string(services), -1) {
		pkgs = append(pkgs, strings.Fields(m[1])...)
	}
	if len(pkgs) < 5 {
		t.Fatalf("found only %q in services.sh", pkgs)
	}
	for _, want := range append(pkgs, "root", "npm ci", "minutes", "network") {
		if !strings.Contains(para, want) {
			t.Errorf("the paragraph after bash scripts/test.sh does not say %q:\n%s", want, para)
		}
	}
}
