package main

/*
#define UBIK_NO_PROTOTYPES
#include "ubik.h"

void ubik__set_error(int code, const char *text, size_t len);
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ubiksql/ubik"
)

// code is one entry of the status-code table. The numbers are defined once,
// in ubik.h (so C sees them as constants); the names, the retryable flag and
// the descriptions live here, and capi_test.go checks the two agree.
type code struct {
	num         C.int
	name        string
	retryable   bool
	description string
}

// codes is the one status-code table of the C ABI, exposed through
// ubik_error_name, ubik_error_description and ubik_error_retryable (and
// mirrored by the Python binding, which reads it from the library).
var codes = [...]code{
	{C.UBIK_OK, "UBIK_OK", false, "success; from ubik_next_keyed: a record was returned"},
	{C.UBIK_NONE, "UBIK_NONE", false, "no record is pending yet"},
	{C.UBIK_END, "UBIK_END", false, "end of stream: the input is closed and every record was taken"},
	{C.UBIK_ERR_INVALID_ARGUMENT, "UBIK_ERR_INVALID_ARGUMENT", false, "a required pointer was NULL or an argument is out of range"},
	{C.UBIK_ERR_INVALID_HANDLE, "UBIK_ERR_INVALID_HANDLE", false, "the handle is 0, was released, or is of the other kind"},
	{C.UBIK_ERR_INVALID_OPTIONS, "UBIK_ERR_INVALID_OPTIONS", false, "the options JSON is not valid"},
	{C.UBIK_ERR_SQL, "UBIK_ERR_SQL", false, "the SQL does not parse or bind"},
	{C.UBIK_ERR_NO_QUERY, "UBIK_ERR_NO_QUERY", false, "the script has no query, or several and none was named"},
	{C.UBIK_ERR_MALFORMED_EVENT, "UBIK_ERR_MALFORMED_EVENT", false, "an event could not be decoded; it was counted and skipped"},
	{C.UBIK_ERR_EVAL, "UBIK_ERR_EVAL", false, "an event failed at run time; it was counted and skipped"},
	{C.UBIK_ERR_BACKPRESSURE, "UBIK_ERR_BACKPRESSURE", true, "the output buffer is full and nothing was applied; drain records and push again"},
	{C.UBIK_ERR_CLOSED, "UBIK_ERR_CLOSED", false, "the engine or the query's input is closed"},
	{C.UBIK_ERR_QUERY_FAILED, "UBIK_ERR_QUERY_FAILED", false, "the query stopped on an earlier fatal error"},
	{C.UBIK_ERR_INTERNAL, "UBIK_ERR_INTERNAL", false, "an internal error in ubik (a recovered panic)"},
	{C.UBIK_ERR_JOIN_BUFFER, "UBIK_ERR_JOIN_BUFFER", true, "the temporal join's buffer of events waiting for the table's watermark is full and nothing was applied; push table rows or end the table, then push again"},
}

// unknownCode describes a number that is not in the table.
var unknownCode = code{0, "UBIK_UNKNOWN", false, "not a ubik status code"}

func lookupCode(n C.int) *code {
	for i := range codes {
		if codes[i].num == n {
			return &codes[i]
		}
	}
	return &unknownCode
}

// Errors of the C ABI layer itself.
var (
	errInvalidArgument = errors.New("capi: invalid argument")
	errInvalidHandle   = errors.New("capi: invalid handle")
	errInvalidOptions  = errors.New("capi: invalid options")
	errQueryFailed     = errors.New("capi: the query has failed")
)

// statusError is an error with the status code it crosses the boundary as.
type statusError struct {
	code C.int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func withCode(c C.int, format string, args ...any) error {
	return &statusError{code: c, err: fmt.Errorf(format, args...)}
}

// codeOf classifies an error from the root API (or this layer) into a
// status code. Errors from compiling SQL that are none of the root package's
// sentinels are SQL errors: the binder's errors carry their position.
func codeOf(err error, compiling bool) C.int {
	var se *statusError
	var ee *ubik.EventError
	switch {
	case err == nil:
		return C.UBIK_OK
	case errors.As(err, &se):
		return se.code
	case errors.Is(err, ubik.ErrInternal):
		return C.UBIK_ERR_INTERNAL
	case errors.Is(err, ubik.ErrBackpressure):
		return C.UBIK_ERR_BACKPRESSURE
	case errors.Is(err, ubik.ErrJoinBuffer):
		return C.UBIK_ERR_JOIN_BUFFER
	case errors.Is(err, ubik.ErrUnknownInput):
		return C.UBIK_ERR_INVALID_ARGUMENT
	case errors.Is(err, ubik.ErrClosed):
		return C.UBIK_ERR_CLOSED
	case errors.Is(err, ubik.ErrNoQuery):
		return C.UBIK_ERR_NO_QUERY
	case errors.Is(err, ubik.ErrInvalidOptions):
		return C.UBIK_ERR_INVALID_OPTIONS
	case errors.As(err, &ee):
		if errors.Is(err, ubik.ErrMalformed) {
			return C.UBIK_ERR_MALFORMED_EVENT
		}
		return C.UBIK_ERR_EVAL
	case compiling:
		return C.UBIK_ERR_SQL
	}
	return C.UBIK_ERR_QUERY_FAILED
}

// fail records err as the calling thread's last error and returns its code.
func fail(c C.int, err error) C.int {
	msg := err.Error()
	if len(msg) == 0 {
		msg = lookupCode(c).description
	}
	// The message is passed as a Go pointer for the duration of the call
	// only; the C side copies it into the thread's slot.
	C.ubik__set_error(c, (*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
	return c
}
