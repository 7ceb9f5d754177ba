package dataflow

import "errors"

// ErrPlan is what a script the planner cannot lower is refused with.
var ErrPlan = errors.New("dataflow: cannot plan")
