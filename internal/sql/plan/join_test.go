package plan

import "testing"

// TestJoinGolden runs testdata/join.txt (temporal join programs,
// explained) and testdata/join_errors.txt (their errors with positions).
// -update rewrites them.
func TestJoinGolden(t *testing.T) {
	runGolden(t, "testdata/join.txt", compileOutput)
	runGolden(t, "testdata/join_errors.txt", compileOutput)
}

// TestIntervalJoinGolden runs testdata/ijoin.txt (interval joins of two
// streams, explained) and testdata/ijoin_errors.txt (the shapes refused,
// with positions). -update rewrites them.
func TestIntervalJoinGolden(t *testing.T) {
	runGolden(t, "testdata/ijoin.txt", compileOutput)
	runGolden(t, "testdata/ijoin_errors.txt", compileOutput)
}
