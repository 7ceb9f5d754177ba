package kafka

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// inHeader tags every record and watermark marker a stage writes to an
// exchange topic (a repartition topic) with the graph input it feeds: a
// declared source's name for its events and rows, a view's for its rows,
// the joined row's for a join's joined rows. The reading stage routes
// each by it (inputs.of), so one topic can carry any number of inputs.
const inHeader = "ubik.in"

// inTag is the header naming input name; one value is shared by every
// record a stage writes (the client only reads it).
func inTag(name string) kgo.RecordHeader {
	return kgo.RecordHeader{Key: inHeader, Value: []byte(name)}
}

// inputs are the names of a reading stage's graph inputs in the graph's
// order (drive.Graph.Sources, found by drive.Graph.Input).
type inputs []string

// of is the input a record of an exchange topic feeds: the one its tag
// names. A record without the tag (an earlier version wrote it) or whose
// tag names several inputs (a join of a view with itself, whose side
// header tells them apart) goes by untagged, today's rule. A tag that
// names no input is an ErrUnknownInput: the record is malformed.
func (ins inputs) of(r *kgo.Record, untagged func(*kgo.Record) (int, error)) (int, error) {
	v, ok := headerValue(r, inHeader)
	if !ok {
		return untagged(r)
	}
	in, n := -1, 0
	for i, name := range ins {
		if name == string(v) {
			in, n = max(in, i), n+1
		}
	}
	switch n {
	case 0:
		return -1, fmt.Errorf("%w: header %s names %q; the stage reads %s", ErrUnknownInput, inHeader, v, strings.Join(ins, ", "))
	case 1:
		return in, nil
	}
	return untagged(r)
}

// onlyInput is the untagged rule of a stage of one input.
func onlyInput(*kgo.Record) (int, error) { return 0, nil }

// unknownInput counts a record whose tag names no input as malformed
// and reports it where it was read; it is not applied.
func (p *Pipeline) unknownInput(tx *txn, r *kgo.Record, err error) {
	tx.counts.Malformed++
	tx.badEvent(p, BadEvent{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err})
}
