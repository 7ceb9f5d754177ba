package landtest

import "io"

var errEOF = io.EOF
