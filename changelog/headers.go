package changelog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The Kafka header contract. A changelog record maps to a Kafka record as:
// Kafka key = key bytes, Kafka value = value bytes, and these headers:
//
//	ubik.query             the query name
//	ubik.final             "true" or "false"
//	ubik.revision          decimal uint64, from 1
//	ubik.window_start      decimal µs since the epoch (windowed only)
//	ubik.window_end        decimal µs since the epoch (windowed only)
//	ubik.window_positions  comma-separated decimal indexes of the window
//	                       cells in the key, e.g. "1"; empty when continuous
//
// The header set is a contract: DecodeHeaders refuses a record that lacks
// one, repeats one, or garbles one. AppendHeaders is its one encoder; the
// engine's Kafka sink and the Kafka lander source both use these two.
const (
	HeaderQuery           = "ubik.query"
	HeaderFinal           = "ubik.final"
	HeaderRevision        = "ubik.revision"
	HeaderWindowStart     = "ubik.window_start"
	HeaderWindowEnd       = "ubik.window_end"
	HeaderWindowPositions = "ubik.window_positions"
)

// Header is one record header. The codec is generic over any type with this
// layout (KV), so a Kafka client's own header type (franz-go's
// kgo.RecordHeader) is encoded and decoded in place, without a copy and
// without this package importing the client.
type Header struct {
	Key   string
	Value []byte
}

// KV is the constraint of the header codec: a struct laid out as Header.
type KV interface {
	~struct {
		Key   string
		Value []byte
	}
}

// AppendHeaders appends the headers that carry m to dst and returns it.
// The values share one new buffer, sized up front so that no append moves
// it (one allocation per record instead of one per header: this is on
// the path of every record a Kafka sink produces).
func AppendHeaders[H KV](dst []H, m Meta) []H {
	return AppendHeadersIn(dst, make([]byte, 0, HeadersSize(m)), m)
}

// HeadersSize is the most bytes the header values of m take: the room
// AppendHeadersIn needs.
func HeadersSize(m Meta) int {
	n := len(m.Query) + len("false") + 3*20 // a uint64 and two int64s in decimal: at most 20 bytes each
	if m.Windowed {
		n += 21 * len(m.WindowPositions)
	}
	return n
}

// AppendHeadersIn is AppendHeaders writing the values into buf, which
// must have room for HeadersSize(m) bytes past its length (the values
// alias it: an append that moved it would leave them behind).
func AppendHeadersIn[H KV](dst []H, buf []byte, m Meta) []H {
	if cap(buf)-len(buf) < HeadersSize(m) {
		buf = make([]byte, 0, HeadersSize(m))
	}
	start := len(buf)
	buf = append(buf, m.Query...)
	dst = append(dst, H(Header{Key: HeaderQuery, Value: buf[start:len(buf):len(buf)]}))
	start = len(buf)
	buf = strconv.AppendBool(buf, m.Final)
	dst = append(dst, H(Header{Key: HeaderFinal, Value: buf[start:len(buf):len(buf)]}))
	start = len(buf)
	buf = strconv.AppendUint(buf, m.Revision, 10)
	dst = append(dst, H(Header{Key: HeaderRevision, Value: buf[start:len(buf):len(buf)]}))
	start = len(buf)
	if m.Windowed {
		buf = strconv.AppendInt(buf, m.WindowStart, 10)
		dst = append(dst, H(Header{Key: HeaderWindowStart, Value: buf[start:len(buf):len(buf)]}))
		start = len(buf)
		buf = strconv.AppendInt(buf, m.WindowEnd, 10)
		dst = append(dst, H(Header{Key: HeaderWindowEnd, Value: buf[start:len(buf):len(buf)]}))
		start = len(buf)
		for i, p := range m.WindowPositions {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(p), 10)
		}
	}
	return append(dst, H(Header{Key: HeaderWindowPositions, Value: buf[start:len(buf):len(buf)]}))
}

// DecodeHeaders returns the changelog record carried by a message with this
// key, value and headers. Headers outside the ubik.* set are ignored. The
// returned slices alias key and value. The error names the offending header;
// the caller adds where the message came from.
func DecodeHeaders[H KV](key, value []byte, headers []H) (Record, error) {
	if value == nil {
		return Record{}, errors.New("null value (ubik never emits a tombstone)")
	}
	if len(key) == 0 {
		return Record{}, errors.New("no key")
	}
	var vals [6][]byte
	var seen [6]bool
	for _, hh := range headers {
		h := Header(hh)
		i := headerIndex(h.Key)
		if i < 0 {
			continue // other headers (tracing, ...) are the producer's business
		}
		if seen[i] {
			return Record{}, fmt.Errorf("header %s appears twice", h.Key)
		}
		seen[i], vals[i] = true, h.Value
	}
	for i, name := range []string{HeaderQuery, HeaderFinal, HeaderRevision, HeaderWindowStart, HeaderWindowEnd, HeaderWindowPositions} {
		if !seen[i] && i != 3 && i != 4 {
			return Record{}, fmt.Errorf("header %s missing", name)
		}
	}
	r := Record{Key: key, Value: value}
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
