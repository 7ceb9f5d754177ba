package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.0.0", "v1.2.3-rc.1", "v0.0.0-installtest"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"", "1.2.3", "v1.2", "v01.2.3", "v1.2.3+build", "v1.2.3-", "v2.0.0", "v10.0.0"} {
		if err := checkVersion(v); !errors.Is(err, ErrVersion) {
			t.Errorf("%q: %v, want %v", v, err, ErrVersion)
		}
	}
}

// TestPublished: the release publishes cmd/ubik and every repository
// module it requires, and each is where its path says.
func TestPublished(t *testing.T) {
	dirs, err := published("../..")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	if want := []string{".", "cmd/ubik", "internal/cli", "land", "land/landprom", "usage"}; !slices.Equal(dirs, want) {
		t.Fatalf("published: %q, want %q", dirs, want)
	}
}

// TestRewrite: requirements on repository modules move to the version;
// others and the replace directives stay.
func TestRewrite(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "land")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module github.com/ubiksql/ubik/land\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/ubiksql/ubik v0.0.0\n\tgithub.com/redis/go-redis/v9 v9.23.0\n)\n\nreplace github.com/ubiksql/ubik => ../\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(root, "land", "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"github.com/ubiksql/ubik v1.2.3", "github.com/redis/go-redis/v9 v9.23.0", "replace github.com/ubiksql/ubik => ../"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rewritten go.mod lacks %q:\n%s", want, got)
		}
	}
	if err := rewrite(root, ".", "v1.2.3"); !errors.Is(err, ErrLayout) {
		t.Errorf("a directory without go.mod: %v, want %v", err, ErrLayout)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(root, ".", "v1.2.3"); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "example.com/other") {
		t.Errorf("a module not where its path says: %v, want %v naming it", err, ErrLayout)
	}
}

// TestRewriteWork: go.work resolves the released requirements to the
// directories, and still the branch's v0.0.0 ones.
func TestRewriteWork(t *testing.T) {
	root := t.TempDir()
	work := "go 1.26.0\n\nuse ./land\n\nreplace github.com/ubiksql/ubik/land v0.0.0 => ./land\n\nreplace example.com/x v0.0.0 => ./x\n"
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte(work), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteWork(root, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"github.com/ubiksql/ubik/land v0.0.0 => ./land", "github.com/ubiksql/ubik/land v1.2.3 => ./land"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rewritten go.work lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "example.com/x v1.2.3") {
		t.Errorf("a module outside the repository was given the version:\n%s", got)
	}
}

// TestModuleFiles: a module's zip has its regular files, none of a nested
// module's, no symlink.
func TestModuleFiles(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"go.mod", "a.go", "sub/b.go", "nested/go.mod", "nested/c.go", "nested/deeper/d.go"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.go", filepath.Join(root, "link.go")); err != nil {
		t.Fatal(err)
	}
	got, err := moduleFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.go", "go.mod", "sub/b.go"}; !slices.Equal(got, want) {
		t.Fatalf("moduleFiles: %q, want %q", got, want)
	}
	if err := os.MkdirAll(filepath.Join(root, "vendor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := moduleFiles(root); !errors.Is(err, ErrLayout) {
		t.Fatalf("a vendor directory: %v, want %v", err, ErrLayout)
	}
}

func TestEscape(t *testing.T) {
	if got := escape("github.com/Azure/azure-sdk-for-go"); got != "github.com/!azure/azure-sdk-for-go" {
		t.Fatalf("escape: %q", got)
	}
}
