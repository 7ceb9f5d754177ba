package kafka

import (
	"cmp"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
)

// exchangeFeed is one exchange topic a routing or dedup stage feeds: each
// record goes on unchanged, keyed by the bytes that place it where the
// exchange's reader needs it, tagged with the input it feeds, and the
// stage's watermark follows as markers to every partition.
type exchangeFeed struct {
	topic string
	// parts are the topic's partitions (0: the pipeline's, which
	// created it).
	parts int
	place drive.Placer // nil: a broadcast, to every partition (a versioned table)
	// second: the reader takes the records as its join's second input
	// (a versioned table, an interval join's right stream, a join of
	// two views' second source): records and markers carry that input's
	// headers.
	second bool
	// src: the reader is a dedup, which reports a bad event where it was
	// read (sourceHeader).
	src bool
}

// tableRowTag is the header of a second input's record.
var tableRowTag = kgo.RecordHeader{Key: tableRowHeader, Value: []byte{1}}

// headers are the headers of rec on o's topic, tagged with input tag.
func (o exchangeFeed) headers(rec *kgo.Record, tag kgo.RecordHeader) []kgo.RecordHeader {
	switch {
	case o.src:
		return sourceHeader(rec, tag) // where a bad event is reported from
	case o.second:
		return []kgo.RecordHeader{tableRowTag, tag}
	}
	return []kgo.RecordHeader{tag}
}

// marks produces the watermark marker enc of input in to every
// partition of o's topic.
func (o exchangeFeed) marks(p *Pipeline, tx *txn, in string, enc []byte) {
	key, header := markerKey, markerHeader
	if o.second {
		key, header = tableMarkerKey, tableMarkerHeader
	}
	p.sendMarks(tx, o.topic, cmp.Or(o.parts, p.nParts), key, header, in, enc)
}
