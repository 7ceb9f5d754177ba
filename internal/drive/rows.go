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

// PushRow applies one typed row, in the source's column order. A row of
// the wrong shape or kinds, or without an event time, is malformed. For a
// source with computed or TIMESTAMP(p) columns the row holds the physical
// columns (in declaration order, computed ones left out), or every column
// with each computed cell NULL; the computed cells are evaluated and the
// TIMESTAMP(p) cells rounded, as the decoders do.
func (d *Driver) PushRow(row []types.Value) error {
	if err := d.admit(0); err != nil {
		return err
	}
	row, err := d.in.typed(row)
	if err != nil {
		return d.eventErr(err)
	}
	return d.apply(row, nil, nil, false)
}

// ApplyRow applies a typed row the engine made, as it is: an interval
// join's joined row, made by another host's join (Config.OnJoined), for
// a query without the join over the joined row's columns. No decoding,
// no check of its shape, no computed column evaluated again.
func (d *Driver) ApplyRow(row []types.Value) error {
	if err := d.admit(0); err != nil {
		return err
	}
	d.n.Records++
	d.n.Events++
	return d.apply(row, nil, nil, false)
}

// ReportMalformed counts one event the host could not even hand over (a
// line too long to read), so the counters account for every input record.
func (d *Driver) ReportMalformed() {
	_ = d.settleFed() // an error is fatal: the next call returns it
	d.n.Records++
	d.n.Events++
	d.n.Malformed++
}
