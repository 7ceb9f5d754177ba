// Package kafkasrc carries ubik changelog records over Kafka: the record
// header format (shared by the engine's Kafka sink, which encodes with
// Headers, and by the landers, which decode with Decode) and a consumer-group
// land.Source that commits offsets only after the store acknowledged.
//
// A changelog record maps to a Kafka record as: Kafka key = key bytes,
// Kafka value = value bytes, and these headers:
//
//	ubik.query             the query name
//	ubik.final             "true" or "false"
//	ubik.revision          decimal uint64, from 1
//	ubik.window_start      decimal µs since the epoch (windowed only)
//	ubik.window_end        decimal µs since the epoch (windowed only)
//	ubik.window_positions  comma-separated decimal indexes of the window
//	                       cells in the key, e.g. "1"; empty when continuous
//
// The header set is a contract: decoding refuses a record that lacks one,
// repeats one, or garbles one, and names the partition and offset.
package kafkasrc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
)

// Header names.
const (
	HeaderQuery           = "ubik.query"
	HeaderFinal           = "ubik.final"
	HeaderRevision        = "ubik.revision"
	HeaderWindowStart     = "ubik.window_start"
	HeaderWindowEnd       = "ubik.window_end"
	HeaderWindowPositions = "ubik.window_positions"
)

// ErrBadRecord is wrapped by every decoding error.
var ErrBadRecord = errors.New("kafkasrc: bad record")

// DecodeError is a Kafka record that is not a ubik changelog record.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("kafkasrc: topic %s partition %d offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns both the cause and ErrBadRecord.
func (e *DecodeError) Unwrap() []error { return []error{ErrBadRecord, e.Err} }

// Headers returns the Kafka headers that carry m. It is the one encoder of
// the header contract.
func Headers(m changelog.Meta) []kgo.RecordHeader {
	h := make([]kgo.RecordHeader, 0, 6)
	h = append(h,
		kgo.RecordHeader{Key: HeaderQuery, Value: []byte(m.Query)},
		kgo.RecordHeader{Key: HeaderFinal, Value: []byte(strconv.FormatBool(m.Final))},
		kgo.RecordHeader{Key: HeaderRevision, Value: strconv.AppendUint(nil, m.Revision, 10)},
	)
	var pos []byte
	if m.Windowed {
		h = append(h,
			kgo.RecordHeader{Key: HeaderWindowStart, Value: strconv.AppendInt(nil, m.WindowStart, 10)},
			kgo.RecordHeader{Key: HeaderWindowEnd, Value: strconv.AppendInt(nil, m.WindowEnd, 10)},
		)
		for i, p := range m.WindowPositions {
			if i > 0 {
				pos = append(pos, ',')
			}
			pos = strconv.AppendInt(pos, int64(p), 10)
		}
	}
	if pos == nil {
		pos = []byte{}
	}
	return append(h, kgo.RecordHeader{Key: HeaderWindowPositions, Value: pos})
}

// ToKafka returns the Kafka record for r on topic.
func ToKafka(topic string, r changelog.Record) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: Headers(r.Meta)}
}

// Decode returns the changelog record that kr carries. The returned slices
// alias kr's. Errors are *DecodeError.
func Decode(kr *kgo.Record) (changelog.Record, error) {
	r, err := decode(kr)
	if err != nil {
		return changelog.Record{}, &DecodeError{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Err: err}
	}
	return r, nil
}

func decode(kr *kgo.Record) (changelog.Record, error) {
	if kr.Value == nil {
		return changelog.Record{}, errors.New("null value (ubik never emits a tombstone)")
	}
	if len(kr.Key) == 0 {
		return changelog.Record{}, errors.New("no key")
	}
	var vals [6][]byte
	var seen [6]bool
	for _, h := range kr.Headers {
		i := headerIndex(h.Key)
		if i < 0 {
			continue // other headers (tracing, ...) are the producer's business
		}
		if seen[i] {
			return changelog.Record{}, fmt.Errorf("header %s appears twice", h.Key)
		}
		seen[i], vals[i] = true, h.Value
	}
	for i, name := range []string{HeaderQuery, HeaderFinal, HeaderRevision, HeaderWindowStart, HeaderWindowEnd, HeaderWindowPositions} {
		if !seen[i] && i != 3 && i != 4 {
			return changelog.Record{}, fmt.Errorf("header %s missing", name)
		}
	}
	r := changelog.Record{Key: kr.Key, Value: kr.Value}
	m := &r.Meta
	m.Query = string(vals[0])
	switch string(vals[1]) {
	case "true":
		m.Final = true
	case "false":
	default:
		return r, fmt.Errorf("header %s is %q, not true or false", HeaderFinal, vals[1])
	}
	rev, err := strconv.ParseUint(string(vals[2]), 10, 64)
	if err != nil || rev == 0 {
		return r, fmt.Errorf("header %s is %q, not a revision (decimal, from 1)", HeaderRevision, vals[2])
	}
	m.Revision = rev
	if seen[3] != seen[4] {
		return r, fmt.Errorf("headers %s and %s must come together", HeaderWindowStart, HeaderWindowEnd)
	}
	if !seen[3] {
		if len(vals[5]) != 0 {
			return r, fmt.Errorf("header %s is %q on an unwindowed record", HeaderWindowPositions, vals[5])
		}
		return r, nil
	}
	m.Windowed = true
	if m.WindowStart, err = strconv.ParseInt(string(vals[3]), 10, 64); err != nil {
		return r, fmt.Errorf("header %s is %q, not decimal µs", HeaderWindowStart, vals[3])
	}
	if m.WindowEnd, err = strconv.ParseInt(string(vals[4]), 10, 64); err != nil {
		return r, fmt.Errorf("header %s is %q, not decimal µs", HeaderWindowEnd, vals[4])
	}
	if len(vals[5]) == 0 {
		return r, fmt.Errorf("header %s is empty on a windowed record", HeaderWindowPositions)
	}
	for _, f := range strings.Split(string(vals[5]), ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 0 || p > 1<<16 {
			return r, fmt.Errorf("header %s is %q, not comma-separated indexes", HeaderWindowPositions, vals[5])
		}
		m.WindowPositions = append(m.WindowPositions, p)
	}
	return r, nil
}

func headerIndex(k string) int {
	switch k {
	case HeaderQuery:
		return 0
	case HeaderFinal:
		return 1
	case HeaderRevision:
		return 2
	case HeaderWindowStart:
		return 3
	case HeaderWindowEnd:
		return 4
	case HeaderWindowPositions:
		return 5
	}
	return -1
}
