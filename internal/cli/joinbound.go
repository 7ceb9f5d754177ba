package cli

import (
	"errors"
	"fmt"

	"github.com/ubiksql/ubik"
)

// The --join-buffer flag bounds the rows a join of a file run holds: an
// interval join's held rows of both inputs together, a temporal join's
// events waiting for the table's watermark. Without a bound an interval
// join whose inputs drift apart holds every row until memory runs out;
// with one the run stops with an error that says which bound it met.

// checkJoinBuffer refuses a --join-buffer below 1.
func checkJoinBuffer(f *runFlags) error {
	if f.joinBuffer < 1 {
		return fmt.Errorf("%w: --join-buffer must be at least 1 row, got %d", ErrUsage, f.joinBuffer)
	}
	return nil
}

// heldRowCost says what one held row of interval join j costs.
func heldRowCost(j *ubik.IntervalJoinCost) string {
	return fmt.Sprintf("about %d bytes per held row of %s and %d of %s, plus their text, plus %d per distinct join key",
		j.LeftRow, j.Left, j.RightRow, j.Right, j.KeyBytes)
}

// joinBoundError adds to an interval join's full-state error which flag
// sets the bound and what to do.
func joinBoundError(err error, f *runFlags, ijq *planQuery) error {
	if ijq == nil || !errors.Is(err, ubik.ErrIntervalJoinFull) {
		return err
	}
	return fmt.Errorf("%w. --join-buffer (now %d) bounds the rows the interval join of query %s holds, at %s (ubik explain shows it). "+
		"Raise --join-buffer if the memory is there, narrow the interval, or give the inputs closer event times; "+
		"with --state-dir the same command with a larger --join-buffer resumes from the last checkpoint",
		err, f.joinBuffer, ijq.Name(), heldRowCost(ijq.StateCost().IntervalJoin))
}
