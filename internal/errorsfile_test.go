package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// errorsFile is the one file of a package that declares its error values
// and error types, so a reader finds a package's error vocabulary in one
// place and two packages' spellings of the same error are easy to compare.
const errorsFile = "errors.go"

// TestErrorsLiveInErrorsFile: in every package of the repository (tests,
// testdata and third_party aside), each package-level variable set to
// errors.New(...) or fmt.Errorf(...), and each type that has an Error()
// string method (that method included), is declared in the package's
// errors.go.
func TestErrorsLiveInErrorsFile(t *testing.T) {
	bad, found, err := misplacedErrors("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: declare it in its package's %s", b, errorsFile)
	}
	// The repository declares well over a hundred; a check that finds
	// a handful has stopped parsing what it should.
	if found < 100 {
		t.Fatalf("found only %d error declarations in the repository", found)
	}
}

// TestErrorsLiveInErrorsFileControl: over a generated tree, the check
// names two sentinels, two error types and their Error methods declared
// outside errors.go, and passes a package that keeps them in errors.go, a
// local errors.New, a type with no Error method, a test file and a
// testdata package.
func TestErrorsLiveInErrorsFileControl(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	decls := `import (
	"errors"
	"fmt"
)

var ErrX = errors.New("x")

var (
	size = 1
	ErrY = fmt.Errorf("y: %w", ErrX)
)

type FooError struct{}

type stop int

func (*FooError) Error() string { return "foo" }

func (stop) Error() string { return "stop" }
`
	write("bad/errors.go", "package bad\n")
	write("bad/a.go", "package bad\n\n"+decls)
	write("good/errors.go", "package good\n\n"+decls)
	write("good/a.go", "package good\n\nimport \"errors\"\n\ntype Other struct{}\n\nfunc f() error {\n\tvar e = errors.New(\"local\")\n\treturn e\n}\n")
	write("good/a_test.go", "package good\n\n"+strings.ReplaceAll(decls, "Foo", "Test"))
	write("good/testdata/fix/a.go", "package fix\n\n"+decls)
	bad, found, err := misplacedErrors(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"bad/a.go:8: var ErrX = errors.New(...)",
		"bad/a.go:12: var ErrY = fmt.Errorf(...)",
		"bad/a.go:15: type FooError",
		"bad/a.go:17: type stop",
		"bad/a.go:19: method (FooError).Error",
		"bad/a.go:21: method (stop).Error",
	}
	if !slices.Equal(bad, want) || found != 12 {
		t.Errorf("over the fixture: %d found, misplaced\n %q\nwant 12 found, misplaced\n %q", found, bad, want)
	}
}

// errDecl is one error declaration: where, and what it declares.
type errDecl struct {
	pos  token.Position
	what string
}

// errPkg holds one package's error declarations until its files are all
// read: a type and its Error method may be in different files.
type errPkg struct {
	sentinels []errDecl
	types     map[string]errDecl // every type, by name
	methods   map[string]errDecl // Error() string, by receiver type
}

// misplacedErrors parses the non-test Go files under root (skipping
// testdata, third_party and hidden folders) and returns "file:line: what"
// for each error declaration outside its package's errors.go, file paths
// relative to root, and how many error declarations it found in all.
func misplacedErrors(root string) ([]string, int, error) {
	fset := token.NewFileSet()
	pkgs := map[string]*errPkg{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (n == "testdata" || n == "third_party" || n == "node_modules" || n == "vendor" ||
				strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		key := filepath.Dir(path) + "\x00" + f.Name.Name
		if pkgs[key] == nil {
			pkgs[key] = &errPkg{types: map[string]errDecl{}, methods: map[string]errDecl{}}
		}
		collectErrors(fset, f, pkgs[key])
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var all []errDecl
	for _, p := range pkgs {
		all = append(all, p.sentinels...)
		for name, m := range p.methods {
			if d, ok := p.types[name]; ok {
				all = append(all, d, m)
			}
		}
	}
	slices.SortFunc(all, func(a, b errDecl) int {
		if c := strings.Compare(a.pos.Filename, b.pos.Filename); c != 0 {
			return c
		}
		return a.pos.Line - b.pos.Line
	})
	var bad []string
	for _, d := range all {
		if filepath.Base(d.pos.Filename) == errorsFile {
			continue
		}
		rel, err := filepath.Rel(root, d.pos.Filename)
		if err != nil {
			rel = d.pos.Filename
		}
		bad = append(bad, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), d.pos.Line, d.what))
	}
	return bad, len(all), nil
}

// collectErrors adds f's package-level errors.New and fmt.Errorf
// variables, its types and its Error() string methods to p.
func collectErrors(fset *token.FileSet, f *ast.File, p *errPkg) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for i, v := range s.Values {
						if fn := errorCall(v); fn != "" && i < len(s.Names) {
							p.sentinels = append(p.sentinels, errDecl{fset.Position(s.Names[i].Pos()),
								"var " + s.Names[i].Name + " = " + fn + "(...)"})
						}
					}
				case *ast.TypeSpec:
					p.types[s.Name.Name] = errDecl{fset.Position(s.Name.Pos()), "type " + s.Name.Name}
				}
			}
		case *ast.FuncDecl:
			if recv := errorMethodRecv(d); recv != "" {
				p.methods[recv] = errDecl{fset.Position(d.Pos()), "method (" + recv + ").Error"}
			}
		}
	}
}

// errorCall returns "errors.New" or "fmt.Errorf" if e calls it, and ""
// otherwise.
func errorCall(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	if fn := x.Name + "." + sel.Sel.Name; fn == "errors.New" || fn == "fmt.Errorf" {
		return fn
	}
	return ""
}

// errorMethodRecv returns the receiver type name of d if d is a method
// Error() string, and "" otherwise.
func errorMethodRecv(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) != 1 || d.Name.Name != "Error" ||
		d.Type.Params.NumFields() != 0 || d.Type.Results.NumFields() != 1 {
		return ""
	}
	if res, ok := d.Type.Results.List[0].Type.(*ast.Ident); !ok || res.Name != "string" {
		return ""
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
