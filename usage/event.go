package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ubiksql/ubik/internal/types"
)

// Event is one usage event as a caller writes it.
type Event struct {
	// Key is the deduplication (idempotency) key. Required. Two events with
	// the same Key are the same logical event: only the first to land counts.
	Key string
	// Time is the event time. Stored at millisecond resolution (finer parts
	// are truncated towards the past); must lie in [1970-01-01, 10000-01-01).
	Time time.Time
	// Meter names what is being measured (e.g. "api_calls"). Required.
	Meter string
	// Quantity is the amount, an exact decimal (ParseDecimal's text, or
	// ParseQuantity's). It must fit DECIMAL(38,9): at most 29 integer digits
	// and 9 fractional digits. It is stored, summed and returned exactly,
	// never through a binary float.
	Quantity Decimal
	// Dims are typed dimensions (string, number, boolean or explicit null).
	Dims map[string]Value
}

// Stored is an event as the log holds it: the winning copy of its key.
type Stored struct {
	Key      string
	Time     time.Time // UTC, millisecond resolution
	Meter    string
	Quantity Decimal
	Dims     map[string]Value
	// RecordedAt is the ingestion time assigned by the store's own clock when
	// the winning copy landed (PostgreSQL: now() at microsecond resolution;
	// ClickHouse 18.16: now() at second resolution).
	RecordedAt time.Time
}

// Limits on one event. They bound the memory and SQL text an event can take.
const (
	MaxKeyBytes       = 512
	MaxMeterBytes     = 256
	MaxDimNameBytes   = 128
	MaxDimStringBytes = 1024
	MaxDims           = 64
	// MaxQuantityIntDigits is the integer digits a quantity may have:
	// DECIMAL(38,9) keeps 38-9 = 29.
	MaxQuantityIntDigits = 29
	// QuantityScale is the number of fractional digits a quantity keeps.
	QuantityScale = 9
)

// MaxTime is the first instant an event time may not have.
var maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxMillis is the exclusive upper bound of event times in epoch milliseconds.
var MaxMillis = maxTime.UnixMilli()

// Decimal is an exact decimal number in canonical text: no exponent, no
// trailing fractional zeros, no "+", "0" for zero (e.g. "12.5", "-0.001").
type Decimal string

// ParseDecimal reads a plain decimal ("-12.50", "3", "0.000000001") and
// returns it in canonical form.
func ParseDecimal(s string) (Decimal, error) {
	t := s
	neg := false
	if strings.HasPrefix(t, "-") {
		neg, t = true, t[1:]
	} else if strings.HasPrefix(t, "+") {
		t = t[1:]
	}
	intPart, frac, hasDot := strings.Cut(t, ".")
	if intPart == "" && (!hasDot || frac == "") {
		return "", fmt.Errorf("%w: %q is not a decimal", ErrInvalidValue, s)
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return "", fmt.Errorf("%w: %q is not a decimal", ErrInvalidValue, s)
			}
		}
	}
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if frac != "" {
		out += "." + frac
	}
	if out == "0" {
		return "0", nil
	}
	if neg {
		out = "-" + out
	}
	return Decimal(out), nil
}

func (d Decimal) String() string {
	if d == "" {
		return "0"
	}
	return string(d)
}

// MarshalJSON renders the decimal as a JSON string with QuantityScale
// fractional digits ("1.250000000"), the text ubik run prints for a
// DECIMAL(38,9), so no digit is lost by a reader that parses numbers as
// float64 and the two compare as strings.
func (d Decimal) MarshalJSON() ([]byte, error) { return json.Marshal(d.Fixed()) }

// Fixed is the decimal with exactly QuantityScale fractional digits (more
// are cut, which a canonical quantity or sum never has).
func (d Decimal) Fixed() string {
	ip, fp, _ := strings.Cut(d.String(), ".")
	if len(fp) > QuantityScale {
		fp = fp[:QuantityScale]
	}
	return ip + "." + fp + strings.Repeat("0", QuantityScale-len(fp))
}

// ParseQuantity reads a quantity as a JSON number spells it (sign, digits,
// fraction, exponent: "12.5", "-3", "1.5e3") exactly, and returns it
// canonical. It fails when the number does not fit DECIMAL(38,9): more than
// 9 fractional digits after removing trailing zeros, or more than 29
// integer digits.
func ParseQuantity(s string) (Decimal, error) {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return "", fmt.Errorf("%w: %q is not a decimal number", ErrBadQuantity, s)
		}
		mant, exp = s[:i], e
	}
	d, err := ParseDecimal(mant)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a decimal number", ErrBadQuantity, s)
	}
	d = shift(d, exp)
	ip, fp, _ := strings.Cut(strings.TrimPrefix(string(d), "-"), ".")
	if len(fp) > QuantityScale {
		return "", fmt.Errorf("%w: %s has %d fractional digits; a quantity keeps at most %d (DECIMAL(38,9))", ErrBadQuantity, s, len(fp), QuantityScale)
	}
	if len(ip) > MaxQuantityIntDigits {
		return "", fmt.Errorf("%w: %s has %d integer digits; a quantity keeps at most %d (DECIMAL(38,9))", ErrBadQuantity, s, len(ip), MaxQuantityIntDigits)
	}
	return d, nil
}

// shift multiplies the canonical decimal d by 10^exp.
func shift(d Decimal, exp int) Decimal {
	if exp == 0 || d == "0" {
		return d
	}
	s := string(d)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(s, ".")
	digits, point := ip+fp, len(ip)+exp
	switch {
	case point <= 0:
		digits, point = strings.Repeat("0", 1-point)+digits, 1
	case point > len(digits):
		digits += strings.Repeat("0", point-len(digits))
	}
	out := digits[:point] + "." + digits[point:]
	if neg {
		out = "-" + out
	}
	r, _ := ParseDecimal(out)
	return r
}

// FormatQuantity is the fixed-point text of a canonical quantity with
// QuantityScale fractional digits, as both backends store it.
func FormatQuantity(q Decimal) string { return q.Fixed() }

// eventJSON is the JSON lines shape the CLI reads and writes.
type eventJSON struct {
	Key      string           `json:"key"`
	Time     json.RawMessage  `json:"time"`
	Meter    string           `json:"meter"`
	Quantity json.RawMessage  `json:"quantity"`
	Dims     map[string]Value `json:"dims,omitempty"`
}

// ParseEventJSON reads one event from a JSON object:
//
//	{"key":"k1","time":"2026-07-18T10:00:00.123Z","meter":"api_calls","quantity":3,"dims":{"region":"eu","tier":2,"beta":true}}
//
// time is an RFC 3339 string or a number of epoch milliseconds. Unknown
// fields are an error, so a typo never silently drops data, and so is text
// that is not UTF-8 (or a \u escape of an unpaired surrogate), which JSON
// decoding would otherwise replace with U+FFFD.
func ParseEventJSON(b []byte) (Event, error) {
	if err := checkJSONText(b); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	var ej eventJSON
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&ej); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if d.More() {
		return Event{}, fmt.Errorf("%w: trailing data after the event object", ErrInvalidEvent)
	}
	ev := Event{Key: ej.Key, Meter: ej.Meter, Dims: ej.Dims}
	if len(ej.Time) > 0 && string(ej.Time) != "null" {
		t, err := ParseTimeJSON(ej.Time)
		if err != nil {
			return Event{}, err
		}
		ev.Time = t
	}
	if len(ej.Quantity) == 0 || string(ej.Quantity) == "null" {
		return Event{}, fmt.Errorf("%w: quantity is missing", ErrBadQuantity)
	}
	if ej.Quantity[0] == '"' {
		return Event{}, fmt.Errorf("%w: quantity must be a JSON number, not a string", ErrBadQuantity)
	}
	var qn json.Number
	if err := json.Unmarshal(ej.Quantity, &qn); err != nil {
		return Event{}, fmt.Errorf("%w: quantity must be a JSON number: %v", ErrBadQuantity, err)
	}
	q, err := ParseQuantity(string(qn))
	if err != nil {
		return Event{}, err
	}
	ev.Quantity = q
	return ev, nil
}

// ParseTimeJSON reads an event time: a JSON string in the timestamp text
// ubik run accepts for a TIMESTAMP column (types.ParseTimestamp: DuckDB text
// such as "2026-07-18 10:00:00.123", taken as UTC; RFC 3339 with a Z or an
// offset; a bare date), or a JSON number of epoch milliseconds.
func ParseTimeJSON(raw json.RawMessage) (time.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseTimeText(s)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return time.Time{}, fmt.Errorf("%w: time must be a timestamp string or epoch milliseconds", ErrBadTime)
	}
	ms, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: epoch milliseconds %s: not an integer", ErrBadTime, n)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// ParseTimeText parses timestamp text as ubik run parses a TIMESTAMP column
// (types.ParseTimestamp), returning the instant in UTC.
func ParseTimeText(s string) (time.Time, error) {
	us, err := types.ParseTimestamp([]byte(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrBadTime, err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// ParseBoundText parses a query bound as ParseTimeText does, but keeps a
// fraction's 7th to 9th digits, which ParseTimeText truncates: a bound is
// rounded up to the millisecond (BoundMillis), and "10:00:00.0000001" must
// round up to 10:00:00.001, not down to 10:00:00.
func ParseBoundText(s string) (time.Time, error) {
	t, err := ParseTimeText(s)
	if err != nil {
		return t, err
	}
	return t.Add(time.Duration(subMicroNanos(s))), nil
}

// subMicroNanos is the nanoseconds below the microsecond in the fraction of
// timestamp text (its digits 7 to 9; the parser takes at most 9).
func subMicroNanos(s string) int {
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return 0
	}
	j := i + 1
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	frac := s[i+1 : j]
	if len(frac) <= 6 {
		return 0
	}
	n := 0
	for _, c := range (frac + "000")[6:9] {
		n = n*10 + int(c-'0')
	}
	return n
}

// MarshalJSON renders a stored event in the CLI's JSON shape.
func (s Stored) MarshalJSON() ([]byte, error) {
	type out struct {
		Key        string           `json:"key"`
		Time       string           `json:"time"`
		Meter      string           `json:"meter"`
		Quantity   Decimal          `json:"quantity"`
		Dims       map[string]Value `json:"dims"`
		RecordedAt string           `json:"recorded_at"`
	}
	dims := s.Dims
	if dims == nil {
		dims = map[string]Value{}
	}
	return json.Marshal(out{s.Key, FormatTime(s.Time), s.Meter, s.Quantity, dims, FormatTime(s.RecordedAt)})
}

// FormatTime renders t in UTC RFC 3339 with milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
