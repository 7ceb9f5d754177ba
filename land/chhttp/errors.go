package chhttp

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrReply is wrapped by every reply the client cannot read.
var ErrReply = errors.New("clickhouse: unexpected reply")

// ServerError is an error answer from ClickHouse, with its HTTP status and
// the server's own error text.
type ServerError struct {
	Status int
	Text   string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("clickhouse: HTTP %d: %s", e.Status, e.Text)
}

// Code returns ClickHouse's numeric error code ("Code: 60, ...") or 0.
func (e *ServerError) Code() int {
	rest, ok := strings.CutPrefix(e.Text, "Code: ")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
	return n
}
