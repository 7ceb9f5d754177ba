package drive

import (
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// GroupKeys computes the canonical group key of a query's input rows
// (exec.GroupKeys): a host that routes typed rows (a view's final rows to
// its reader's partition) keys them by it.
type GroupKeys = exec.GroupKeys

// NewGroupKeys returns the group key computer of q's input rows.
func NewGroupKeys(q *plan.Query) *GroupKeys { return exec.NewGroupKeys(q) }

// AppendRow appends the lossless binary form of a typed row
// (exec.AppendRow); DecodeRow reads it back.
func AppendRow(dst []byte, row []types.Value) []byte { return exec.AppendRow(dst, row) }

// DecodeRow parses AppendRow's bytes (an ErrBadState error when they are
// cut or padded).
func DecodeRow(b []byte) ([]types.Value, error) { return exec.DecodeRow(b) }

// AppendGroupIdentity appends the group identity of cells (exec.AppendGroupIdentity:
// NaN, infinities and NULL one cell, -0.0 is 0.0), for a host that
// partitions rows by cells a GROUP BY of them would make one group.
func AppendGroupIdentity(dst []byte, cells []types.Value) []byte {
	return exec.AppendGroupIdentity(dst, cells)
}
