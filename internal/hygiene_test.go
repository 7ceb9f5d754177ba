package internal_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoBinariesInTree: no tracked file outside a testdata folder is a
// binary (an executable, an object, an archive): build outputs belong in
// build/ or GOPATH, never in the repository. A file counts as binary the
// way git counts it: a NUL byte in its first 8000 bytes.
func TestNoBinariesInTree(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		if bin, err := looksBinary(filepath.Join("..", f)); err != nil {
			t.Fatal(err)
		} else if bin {
			t.Errorf("%s is a binary file; binaries are built, not committed (testdata/ may hold binary fixtures)", f)
		}
	}
}

// TestNoBinariesInTreeControl: the check's own rule catches an ELF header
// and passes text.
func TestNoBinariesInTreeControl(t *testing.T) {
	dir := t.TempDir()
	elf := filepath.Join(dir, "gen")
	if err := os.WriteFile(elf, []byte("\x7fELF\x02\x01\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(dir, "a.go")
	if err := os.WriteFile(txt, []byte("package a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if bin, _ := looksBinary(elf); !bin {
		t.Error("an ELF file is not seen as binary")
	}
	if bin, _ := looksBinary(txt); bin {
		t.Error("a Go file is seen as binary")
	}
}

func looksBinary(path string) (bool, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return false, nil // deleted in the work tree, not yet committed
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 8000)
	n, _ := f.Read(buf)
	return bytes.IndexByte(buf[:n], 0) >= 0, nil
}
