package kafka

import (
	"cmp"
	"math"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// The inputs of an aggregating stage's graph, in the graph's order, one
// list whatever the stage's shape: what each input's records are (a
// source's events, a versioned table's or a right stream's rows from the
// routing stage, a view's rows or a join's joined rows from the stage
// before), and where its watermark markers come from. A stage's marker
// tables, drain markers and end checks are read off this list.

// inKind is what an input's records are.
type inKind int

const (
	inEvents inKind = iota // a source's events (the source topic, or routed by their key)
	inTable                // a join's second input, as the routing stage sends it (tableRow)
	inRows                 // a view's rows (drive.AppendRow), from the stage that computes it
	inJoined               // a join's joined rows, from the stage that joins (drive.HostInput.Joined)
)

// graphIn is one input of an aggregating stage's graph.
type graphIn struct {
	name string
	kind inKind
	side *side // inRows of a join of two views: the side whose view it is
	// parts, drain and end are set by bindInputs: how many partitions
	// its markers number, how many source positions its drain markers
	// carry, and the ends they must reach (UntilCaughtUp).
	parts, drain int
	end          map[int32]int64
}

// rows reports whether the input's records are rows another stage
// computed (a view's, or joined rows): not events of the input.
func (in graphIn) rows() bool { return in.kind == inRows || in.kind == inJoined }

// sourceInputs are the inputs of a stage that reads p's source: its
// events, then a join's second input.
func (p *Pipeline) sourceInputs() []graphIn {
	ins := []graphIn{{kind: inEvents}}
	if p.tj != nil {
		ins = append(ins, graphIn{kind: inTable})
	}
	return ins
}

// rowInputs is the input of a stage reading the rows of the one before
// it: a view's, or its root's join's joined rows.
func rowInputs(joined bool) []graphIn {
	if joined {
		return []graphIn{{kind: inJoined}}
	}
	return []graphIn{{kind: inRows}}
}

// readsRows reports whether p's stage reads rows only: it decodes no
// source.
func (p *Pipeline) readsRows() bool { return len(p.ins) > 0 && p.ins[0].rows() }

// bindInputs gives each input its producer's partition count and drain
// positions (Run, once the topics are known): a side's last stage's for
// a view's rows, the source's (or its dedup stage's) for its events, the
// table stage's for a second input. A segment after p, reading the rows
// of the one before it, is bound by bindAfter.
func (p *Pipeline) bindInputs() {
	for i := range p.ins {
		in := &p.ins[i]
		switch {
		case in.side != nil:
			in.parts = in.side.p.out().nParts
			in.drain, in.end = in.side.p.drained()
		case in.kind == inTable:
			in.parts, in.drain, in.end = p.tj.n, p.tj.n, p.tj.end
			if p.tj.dedup {
				in.parts = cmp.Or(p.tj.dedupParts, p.nParts) // its dedup stage's
			}
		case in.kind == inEvents:
			in.parts, in.drain, in.end = p.upParts(), p.nSource, p.sourceEnd
		}
	}
}

// bindRows binds c's row input to the stage before it, of n partitions,
// whose drain markers carry up's.
func (c *Pipeline) bindRows(n int, up *Pipeline) {
	c.ins[0].parts = n
	c.ins[0].drain, c.ins[0].end = up.drained()
}

// drained is what the drain markers of p's last stage carry (the
// positions a reader compares with the ends of its own run,
// UntilCaughtUp): how many source positions, and the ends they must
// reach. They cover every input behind p, in its graph's order (each
// segment after it passes them on): the source's partitions, then a temporal or interval join's
// second input's, or a side's of a join of two views. A reader that knew
// only some of them would take p as drained from a restored state while
// an input it did not track still had records to read (one whose source
// alone got new records).
func (p *Pipeline) drained() (int, map[int32]int64) {
	n, ends := 0, map[int32]int64{}
	for _, in := range p.ins {
		ends = appendEnds(ends, n, in.end)
		n += in.drain
	}
	return n, ends
}

// appendEnds are the ends a, then the ends b numbered from n on.
func appendEnds(a map[int32]int64, n int, b map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(a)+len(b))
	for part, end := range a {
		out[part] = end
	}
	for part, end := range b {
		out[int32(n)+part] = end
	}
	return out
}

// inputParts are the partition counts of the marker tables of the
// graph's inputs, in its order.
func (p *Pipeline) inputParts() []int {
	out := make([]int, len(p.ins))
	for i, in := range p.ins {
		out[i] = in.parts
	}
	return out
}

// reachedOf is how far a drained task consumed each source partition
// behind it, in the order drained numbers them: a direct stage's own
// source partition from its consumed position, any other input from its
// markers.
func (st *stage2) reachedOf(t *task) []int64 {
	var out []int64
	for i, in := range st.p.ins {
		if i > 0 || !st.p.direct {
			out = append(out, t.marks[i].reached(in.drain)...)
			continue
		}
		own := make([]int64, in.drain)
		for k := range own {
			own[k] = -1
		}
		if pos, ok := st.end.position(t.part); ok && int(t.part) < len(own) {
			own[t.part] = pos
		}
		out = append(out, own...)
	}
	return out
}

// advance moves each input of t's graph to its markers' minimum (a
// direct stage's source to the instance's partitions' watermark), a
// second input before the first, as the input it joins waits for it;
// a join of two views is then held to its bound on held rows.
func (st *stage2) advance(t *task) error {
	p := st.p
	for k := range t.marks {
		in := (k + 1) % len(t.marks) // 1, 2, ..., then 0
		if p.vj != nil {
			in = k // a join stage's inputs in their order
		}
		cur := t.g.InputWatermark(in)
		if in == 0 && p.tj != nil && p.tj.interval {
			cur, _ = t.g.InputWatermarks() // an interval join's left input is its own
		}
		wm := t.marks[in].watermark()
		if in == 0 && p.direct {
			wm = st.local.watermark()
		}
		if wm > cur && wm != math.MinInt64 {
			t.touched = true
			if err := t.g.AdvanceInputWatermark(in, wm); err != nil && !drive.Skipped(err) {
				return err
			}
		}
	}
	if p.vj != nil {
		return st.heldRows(t)
	}
	return nil
}

// graphOf is a task's graph: the segment's queries up to top, each
// source it decodes an input of events, each view another stage
// computes an input of rows; or the aggregate of joined rows another
// stage joined.
func (p *Pipeline) graphOf(top *plan.Query, cfg drive.Config, emit func(*changelog.Record) error, viewLate func(string, *drive.LateEvent)) (*drive.Graph, error) {
	var fed []*plan.Query
	switch {
	case p.ins[0].kind == inJoined:
		return drive.NewHostGraph(top, drive.HostInput{Joined: p.root}, cfg, emit, viewLate)
	case p.vj != nil:
		fed = p.vj.fedViews()
	case p.ins[0].kind == inRows:
		fed = p.root.Views() // computed by the stage before
	}
	return drive.NewSegmentGraph(top, fed, p.segmentDecoder, cfg, emit, viewLate)
}
