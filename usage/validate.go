package usage

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Dim is one dimension of a prepared row.
type Dim struct {
	Name  string
	Value Value
}

// Row is a validated, normalized event, ready for a backend to store.
type Row struct {
	Key      string
	Millis   int64  // event time, epoch milliseconds
	Meter    string // validated
	Quantity string // FormatQuantity of the quantity
	Dims     []Dim  // sorted by name
}

// Batch is the result of preparing a Write: the rows to store (first copy of
// each key, in input order), how many events repeated a key already seen in
// the same batch, and the invalid events.
type Batch struct {
	Rows           []Row
	Index          []int // Index[i] is the input position of Rows[i]
	BatchDuplicate int
	Invalid        []*EventError
}

// Prepare validates events and removes in-batch repeats of a key, keeping
// the first occurrence: the same rule a store applies across batches, so a
// batch holding one key twice behaves like two writes in that order.
func Prepare(events []Event) Batch {
	var b Batch
	seen := make(map[string]struct{}, len(events))
	for i, ev := range events {
		row, err := prepareEvent(ev)
		if err != nil {
			b.Invalid = append(b.Invalid, &EventError{Index: i, Key: truncate(ev.Key, 64), Err: err})
			continue
		}
		if _, dup := seen[row.Key]; dup {
			b.BatchDuplicate++
			continue
		}
		seen[row.Key] = struct{}{}
		b.Rows = append(b.Rows, row)
		b.Index = append(b.Index, i)
	}
	return b
}

// Err returns the *BatchError for the invalid events, or nil.
func (b Batch) Err() error {
	if len(b.Invalid) == 0 {
		return nil
	}
	return &BatchError{Errors: b.Invalid}
}

// ValidateEvent checks one event without writing it.
func ValidateEvent(ev Event) error {
	_, err := prepareEvent(ev)
	return err
}

func prepareEvent(ev Event) (Row, error) {
	if ev.Key == "" {
		return Row{}, ErrMissingKey
	}
	if err := checkText(ev.Key, MaxKeyBytes); err != nil {
		return Row{}, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	ms, err := EventMillis(ev.Time)
	if err != nil {
		return Row{}, err
	}
	if ev.Meter == "" {
		return Row{}, fmt.Errorf("%w: meter is empty", ErrBadMeter)
	}
	if err := checkText(ev.Meter, MaxMeterBytes); err != nil {
		return Row{}, fmt.Errorf("%w: %v", ErrBadMeter, err)
	}
	q, err := ParseQuantity(string(ev.Quantity))
	if err != nil {
		return Row{}, err
	}
	if len(ev.Dims) > MaxDims {
		return Row{}, fmt.Errorf("%w: %d dimensions, at most %d", ErrBadDimension, len(ev.Dims), MaxDims)
	}
	dims := make([]Dim, 0, len(ev.Dims))
	for name, v := range ev.Dims {
		if err := checkDimName(name); err != nil {
			return Row{}, fmt.Errorf("%w: %v", ErrBadDimension, err)
		}
		if err := checkValue(v); err != nil {
			return Row{}, fmt.Errorf("%w: %q: %v", ErrBadDimension, name, err)
		}
		dims = append(dims, Dim{name, v})
	}
	sort.Slice(dims, func(i, j int) bool { return dims[i].Name < dims[j].Name })
	return Row{Key: ev.Key, Millis: ms, Meter: ev.Meter, Quantity: FormatQuantity(q), Dims: dims}, nil
}

// EventMillis validates an event time and returns it in epoch milliseconds,
// truncated towards the past.
func EventMillis(t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, fmt.Errorf("%w: time is missing (zero)", ErrBadTime)
	}
	if t.Before(time.Unix(0, 0)) || !t.Before(maxTime) {
		return 0, fmt.Errorf("%w: %s is outside [1970-01-01, 10000-01-01)", ErrBadTime, t.UTC().Format(time.RFC3339Nano))
	}
	return t.UnixMilli(), nil // non-negative, so UnixMilli truncates towards the past
}

// BoundMillis converts a query bound to epoch milliseconds, rounding up, so
// that "event < bound" at nanosecond precision and "ms < BoundMillis" agree
// for events stored at millisecond resolution. A zero time means epoch 0.
// Bounds are clamped to [0, MaxMillis].
func BoundMillis(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	if !t.Before(maxTime) {
		return MaxMillis
	}
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, at most %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}

func checkDimName(name string) error {
	if name == "" {
		return fmt.Errorf("empty dimension name")
	}
	if err := checkText(name, MaxDimNameBytes); err != nil {
		return fmt.Errorf("dimension name %q: %v", truncate(name, 64), err)
	}
	return nil
}

func checkValue(v Value) error {
	switch v.kind {
	case KindNull, KindBool:
		return nil
	case KindNumber:
		return checkNumber(v.s)
	case KindString:
		return checkText(v.s, MaxDimStringBytes)
	}
	return fmt.Errorf("value has no kind (use usage.String, Number, Bool or Null)")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// checkNumber accepts the canonical decimal text ParseNumber and Number
// build; a Number of NaN or an infinity carries other text and fails here.
func checkNumber(s string) error {
	d, err := ParseDecimal(s)
	if err != nil {
		return fmt.Errorf("number %s is not finite", s)
	}
	if string(d) != s || len(s) > MaxNumberBytes {
		return fmt.Errorf("number %.64s is not canonical (build it with usage.Number or usage.ParseNumber)", s)
	}
	return nil
}
