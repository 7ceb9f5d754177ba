package plan

import "testing"

// TestJoinGolden runs testdata/join.txt (temporal join programs,
// explained) and testdata/join_errors.txt (their errors with positions).
// -update rewrites them.
func TestJoinGolden(t *testing.T) {
	runGolden(t, "testdata/join.txt", compileOutput)
	runGolden(t, "testdata/join_errors.txt", compileOutput)
}
