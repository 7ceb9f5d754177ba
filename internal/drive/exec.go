package drive

import (
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// What the hosts use of exec, under the driver's name: kafka/ and
// internal/cli reach the operator only through this package (the
// import-direction test holds them to it), so these are aliases, the
// same types and values.
type (
	// LateEvent is an event for a window already final (exec.LateEvent).
	LateEvent = exec.LateEvent
	// Decoder reads input records into rows (exec.Decoder).
	Decoder = exec.Decoder
	// MessageFormat is how a Kafka record value encodes an event.
	MessageFormat = exec.MessageFormat
	// DecodeError is one malformed event.
	DecodeError = exec.DecodeError
	// EvalError is a runtime evaluation error of one event or record.
	EvalError = exec.EvalError
	// HeaderError is a CSV header that does not fit the source.
	HeaderError = exec.HeaderError
	// Stats are an operator's counters.
	Stats = exec.Stats
	// AggCost is one aggregate's state cost (explain).
	AggCost = exec.AggCost
)

var (
	// ErrMalformed is what every malformed event's error unwraps to.
	ErrMalformed = exec.ErrMalformed
	// ErrBadState is a checkpoint that cannot be restored.
	ErrBadState = exec.ErrBadState
)

// MetaKey is the key of a checkpoint's meta entry, which carries the
// watermark, the counters and the host's position.
const MetaKey = exec.MetaKey

// DedupEntryBytes is the estimated cost of one remembered dedup key.
const DedupEntryBytes = exec.DedupEntryBytes

// NewDecoder returns a decoder of src's records, JSON lines or CSV per its
// format option.
func NewDecoder(src *plan.Source) *Decoder { return exec.NewDecoder(src) }

// NewMessageDecoder returns a decoder of one event per message, encoded as
// f says.
func NewMessageDecoder(src *plan.Source, f MessageFormat) *Decoder {
	return exec.NewMessageDecoder(src, f)
}

// NewMessageSourceDecoder is NewMessageDecoder for a temporal join's
// stream or table, converting only the columns used marks (StreamUsed,
// TableUsed), as a file run's decoders do.
func NewMessageSourceDecoder(src *plan.Source, used []bool, f MessageFormat) *Decoder {
	return exec.NewMessageSourceDecoder(src, used, f)
}

// ParseMessageFormat reads a message source's format options.
func ParseMessageFormat(opts map[string]string) (MessageFormat, error) {
	return exec.ParseMessageFormat(opts)
}

// StateCost estimates the state of one live (group, window) of q.
func StateCost(q *plan.Query) (overhead int, aggs []AggCost) { return exec.StateCost(q) }

// IntervalRowBytes estimates the memory of one held row of input side of
// interval join j, beyond its text (exec.IntervalRowBytes).
func IntervalRowBytes(j *plan.IntervalJoin, side int) int { return exec.IntervalRowBytes(j, side) }

// IntervalKeyBytes: see exec.IntervalKeyBytes.
const IntervalKeyBytes = exec.IntervalKeyBytes
