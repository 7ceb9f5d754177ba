// Package leakyapi is the positive control of the public API check: some
// of its exported declarations name internal types, as the root package's
// must not, so the checker must report exactly those. It lives under
// testdata, so ./... never builds it.
package leakyapi

import (
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Program leaks through a method and a field.
type Program struct {
	Cells []types.Value
	Name  string
	p     *plan.Program
}

// Plan leaks.
func (p *Program) Plan() *plan.Program { return p.p }

// Title does not.
func (p *Program) Title() string { return p.Name }

// Compile leaks.
func Compile(script string) (*plan.Program, error) {
	return plan.Compile(script, plan.CompileOptions{})
}

// Default leaks.
var Default = types.Str("")

// Count does not.
var Count = 3

func hidden() *plan.Program { return nil }

var _ = hidden
