package internal_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// TestRootAPINamesNoInternalType: no exported function, method, field,
// variable or constant of the root package has a type that names an
// internal package, so an embedder never meets a type it cannot import:
// the root package owns what it exports. An exported alias counts as the
// root's name, but its target's exported fields and methods are checked
// as the root's own.
func TestRootAPINamesNoInternalType(t *testing.T) {
	pkg := typeCheck(t, "..", rootModule)
	got := internalMentions(pkg)
	for _, m := range got {
		t.Errorf("the root package exports an internal type: %s", m)
	}
	if len(pkg.Scope().Names()) < 20 {
		t.Fatalf("the root package's scope has only %d names", len(pkg.Scope().Names()))
	}
}

// TestRootAPINamesNoInternalTypeControl: the check reports a fixture's
// exported function, method, field and variable that name an internal
// type, and passes its unexported and clean ones.
func TestRootAPINamesNoInternalTypeControl(t *testing.T) {
	pkg := typeCheck(t, ".", rootModule+"/internal/testdata/leakyapi")
	want := []string{
		"func Compile: func(script string) (*github.com/ubiksql/ubik/internal/sql/plan.Program, error)",
		"var Default: github.com/ubiksql/ubik/internal/types.Value",
		"field Program.Cells: []github.com/ubiksql/ubik/internal/types.Value",
		"method (*Program).Plan: func() *github.com/ubiksql/ubik/internal/sql/plan.Program",
	}
	if got := internalMentions(pkg); !slices.Equal(got, want) {
		t.Errorf("over the fixture:\n got %q\nwant %q", got, want)
	}
}

// typeCheck type-checks the package at import path path (its non-test
// files), importing its dependencies from the export data go list builds.
func typeCheck(t *testing.T, dir, path string) *types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+testenv.GoWork(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", path, err)
	}
	exports := map[string]string{}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		exports[f[0]] = f[1]
		if f[0] == path {
			for _, g := range strings.Fields(f[3]) {
				files = append(files, filepath.Join(f[2], g))
			}
		}
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) { return os.Open(exports[p]) })
	pkg, err := (&types.Config{Importer: imp}).Check(path, fset, parsed, nil)
	if err != nil {
		t.Fatalf("type-checking %s: %v", path, err)
	}
	return pkg
}

// internalMentions lists the exported declarations of pkg whose types name
// an internal package, "kind name: type", by name (a type's fields, then
// its methods).
func internalMentions(pkg *types.Package) []string {
	var out []string
	check := func(what string, typ types.Type) {
		if s := types.TypeString(typ, nil); strings.Contains(s, "/internal/") {
			out = append(out, what+": "+s)
		}
	}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Func:
			check("func "+name, o.Type())
		case *types.Var:
			check("var "+name, o.Type())
		case *types.Const:
			check("const "+name, o.Type())
		case *types.TypeName:
			checkType(name, types.Unalias(o.Type()), check)
		}
	}
	return out
}

// checkType checks a named type's exported methods and, for a struct, its
// exported fields.
func checkType(name string, typ types.Type, check func(string, types.Type)) {
	named, ok := typ.(*types.Named)
	if !ok {
		return
	}
	if st, ok := named.Underlying().(*types.Struct); ok {
		for i := range st.NumFields() {
			if f := st.Field(i); f.Exported() {
				check("field "+name+"."+f.Name(), f.Type())
			}
		}
	}
	ms := types.NewMethodSet(types.NewPointer(named))
	for i := range ms.Len() {
		if m := ms.At(i).Obj(); m.Exported() {
			check("method (*"+name+")."+m.Name(), m.Type())
		}
	}
}
