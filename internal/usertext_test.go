package internal_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// internalRef matches a reference to a document a user cannot read: a
// design note by number, the project's brief, an issue by number. User
// text (messages, help, READMEs, expected outputs) states the rule itself.
var internalRefRE = regexp.MustCompile(`(?i)\bseed 0\d\d\b|\b(the|lead's) brief\b|\bthe lead's\b|\bissue #?\d+\b`)

// TestUserTextNamesNoInternalDocuments scans every Markdown file, every
// behaviour script, and every string literal and comment of Go code
// (tests included: their comments are read as the rule's documentation).
func TestUserTextNamesNoInternalDocuments(t *testing.T) {
	fset := token.NewFileSet()
	check := func(path string, line int, text string) {
		if m := internalRefRE.FindString(text); m != "" {
			t.Errorf("%s:%d: %q names an internal document; state the rule instead", path, line, m)
		}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || n == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		isScript := strings.Contains(filepath.ToSlash(path), "testdata/script/")
		isGo := strings.HasSuffix(path, ".go")
		if !strings.HasSuffix(path, ".md") && !isScript && !isGo {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !isGo {
			for i, l := range strings.Split(string(b), "\n") {
				check(path, i+1, l)
			}
			return nil
		}
		var s scanner.Scanner
		f := fset.AddFile(path, -1, len(b))
		s.Init(f, b, nil, scanner.ScanComments)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.STRING || tok == token.COMMENT {
				check(path, fset.Position(pos).Line, lit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
