package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// repoModule is the root module's path; every module of the repository is
// it or below it, in the directory its path names.
const repoModule = "github.com/ubiksql/ubik"

// command is the module the release is for: the command and the repository
// modules it requires are published.
const command = "cmd/ubik"

// goMod is the part of `go mod edit -json` the tool reads.
type goMod struct {
	Module  struct{ Path string }
	Require []struct{ Path string }
}

func readGoMod(root, dir string) (goMod, error) {
	var m goMod
	file := filepath.Join(root, dir, "go.mod")
	out, err := exec.Command("go", "mod", "edit", "-json", file).Output()
	if err != nil {
		return m, fmt.Errorf("%w: go mod edit -json %s: %v", ErrLayout, file, err)
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("%w: %s: %v", ErrLayout, file, err)
	}
	if want := modulePath(dir); m.Module.Path != want {
		return m, fmt.Errorf("%w: %s declares module %s, want %s (a repository module lives in the directory its path names)", ErrLayout, file, m.Module.Path, want)
	}
	return m, nil
}

// modulePath is the path of the repository module in dir ("." is the root).
func modulePath(dir string) string {
	if dir = filepath.ToSlash(filepath.Clean(dir)); dir == "." {
		return repoModule
	}
	return repoModule + "/" + dir
}

// moduleDir is the inverse of modulePath, or "" for a module outside the
// repository.
func moduleDir(path string) string {
	if path == repoModule {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, repoModule+"/"); ok {
		return rest
	}
	return ""
}

// published lists the directories of the modules a release publishes: the
// command's and those of the repository modules it requires (its go.mod
// lists every module of its build, direct or indirect).
func published(root string) ([]string, error) {
	m, err := readGoMod(root, command)
	if err != nil {
		return nil, err
	}
	dirs := []string{command}
	for _, r := range m.Require {
		if d := moduleDir(r.Path); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// rewrite sets every requirement of the module in dir on a repository
// module to version, as the released go.mod must say. Its replace
// directives stay: a module's replaces apply only when it is the main
// module, so inside the repository, never to its users.
func rewrite(root, dir, version string) error {
	m, err := readGoMod(root, dir)
	if err != nil {
		return err
	}
	args := []string{"mod", "edit"}
	for _, r := range m.Require {
		if moduleDir(r.Path) != "" {
			args = append(args, "-require="+r.Path+"@"+version)
		}
	}
	if len(args) == 2 {
		return nil
	}
	file := filepath.Join(root, dir, "go.mod")
	if out, err := exec.Command("go", append(args, file)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go mod edit %s: %v: %s", ErrLayout, file, err, out)
	}
	return nil
}

// rewriteWork adds to root's go.work, for each replace of a repository
// module at v0.0.0, the same replace at version: in the tagged tree the
// published modules require each other at version, and go.work must resolve
// those requirements to the directories as it does v0.0.0 on the branch
// (whose other modules still require v0.0.0).
func rewriteWork(root, version string) error {
	file := filepath.Join(root, "go.work")
	out, err := exec.Command("go", "work", "edit", "-json", file).Output()
	if err != nil {
		return fmt.Errorf("%w: go work edit -json %s: %v", ErrLayout, file, err)
	}
	var w struct {
		Replace []struct {
			Old struct{ Path, Version string }
			New struct{ Path string }
		}
	}
	if err := json.Unmarshal(out, &w); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLayout, file, err)
	}
	args := []string{"work", "edit"}
	for _, r := range w.Replace {
		if moduleDir(r.Old.Path) != "" && r.Old.Version == "v0.0.0" {
			args = append(args, "-replace="+r.Old.Path+"@"+version+"="+r.New.Path)
		}
	}
	if len(args) == 2 {
		return nil
	}
	if out, err := exec.Command("go", append(args, file)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go work edit %s: %v: %s", ErrLayout, file, err, out)
	}
	return nil
}

// semver is a version a module of major version 0 or 1 can be tagged with
// (build metadata is not allowed).
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func checkVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("%w: %q is not vMAJOR.MINOR.PATCH with an optional -PRERELEASE", ErrVersion, v)
	}
	if !strings.HasPrefix(v, "v0.") && !strings.HasPrefix(v, "v1.") {
		return fmt.Errorf("%w: %s: from v2 on a module's path must end in /vN, which these modules' paths do not", ErrVersion, v)
	}
	return nil
}
