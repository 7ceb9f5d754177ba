package parser

// Walk calls fn on e and then, if fn returns true, on each child
// expression, depth first. It does not descend into nil children.
func Walk(e Expr, fn func(Expr) bool) {
	if e == nil || !fn(e) {
		return
	}
	switch n := e.(type) {
	case *BinaryExpr:
		Walk(n.L, fn)
		Walk(n.R, fn)
	case *UnaryExpr:
		Walk(n.X, fn)
	case *FuncCall:
		for _, a := range n.Args {
			Walk(a, fn)
		}
		Walk(n.Filter, fn)
	case *CaseExpr:
		Walk(n.Operand, fn)
		for _, w := range n.Whens {
			Walk(w.Cond, fn)
			Walk(w.Result, fn)
		}
		Walk(n.Else, fn)
	case *CastExpr:
		Walk(n.X, fn)
	case *InExpr:
		Walk(n.X, fn)
		for _, a := range n.List {
			Walk(a, fn)
		}
	case *IsNullExpr:
		Walk(n.X, fn)
	case *IsBoolExpr:
		Walk(n.X, fn)
	case *IsDistinctExpr:
		Walk(n.L, fn)
		Walk(n.R, fn)
	case *BetweenExpr:
		Walk(n.X, fn)
		Walk(n.Lo, fn)
		Walk(n.Hi, fn)
	case *LikeExpr:
		Walk(n.X, fn)
		Walk(n.Pattern, fn)
	case *ParenExpr:
		Walk(n.X, fn)
	}
}
