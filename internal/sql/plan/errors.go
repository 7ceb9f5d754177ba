package plan

// This file holds the package's sentinel error values and its error types.

import "errors"

// Runtime error vocabulary. Eval errors are *EvalError values whose Unwrap
// is one of these sentinels; their text follows DuckDB's wording so a user
// who knows DuckDB recognises them.
var (
	// ErrConversion is a failed cast (DuckDB "Conversion Error").
	ErrConversion = errors.New("plan: conversion error")
	// ErrOutOfRange is an arithmetic overflow (DuckDB "Out of Range Error").
	ErrOutOfRange = errors.New("plan: out of range")
)

// ErrInvalidSource reports a bad source registered through
// CompileOptions.Sources (script errors are *parser.Error instead).
var ErrInvalidSource = errors.New("plan: invalid registered source")

var errTimeFormat = errors.New("bad time text")

// EvalError is a runtime failure of an expression.
type EvalError struct {
	Kind error // ErrConversion or ErrOutOfRange
	Msg  string
}

func (e *EvalError) Error() string { return e.Msg }

func (e *EvalError) Unwrap() error { return e.Kind }
