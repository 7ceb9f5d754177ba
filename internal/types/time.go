package types

import (
	"fmt"
)

// DaysFromCivil converts a proleptic Gregorian date to days since 1970-01-01.
// (Howard Hinnant's algorithm; valid for every int32 year.)
func DaysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	var era int64
	if y >= 0 {
		era = y / 400
	} else {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := int64((153*mp+2)/5 + d - 1)
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// CivilFromDays converts days since 1970-01-01 to a proleptic Gregorian date.
func CivilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	var era int64
	if z >= 0 {
		era = z / 146097
	} else {
		era = (z - 146096) / 146097
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

const (
	// MicrosPerSecond and friends are exact unit sizes in microseconds.
	MicrosPerSecond = int64(1_000_000)
	MicrosPerMinute = 60 * MicrosPerSecond
	MicrosPerHour   = 60 * MicrosPerMinute
	MicrosPerDay    = 24 * MicrosPerHour
)

var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// ParseTimestamp parses the timestamp text ubik accepts for event times and
// casts: DuckDB text (`2026-07-18 10:00:00`, with an optional fraction of up
// to 9 digits, truncated to microseconds), RFC 3339 (`T` separator, `Z` or a
// `±HH:MM` offset, converted to UTC), and a bare date (midnight). Years
// before 1 are written with a sign (astronomical: -0001 is 2 BC) or as
// DuckDB prints them (`0002-01-01 (BC)`). It returns
// microseconds since the epoch. It is written by hand because it sits on the
// per-event path and time.Parse costs several times more.
func ParseTimestamp(b []byte) (int64, error) {
	us, st := parseTimestamp(trimSpace(b))
	switch st {
	case tsBad:
		return 0, fmt.Errorf("%w: %q (want YYYY-MM-DD HH:MM:SS[.ffffff] or RFC 3339)", ErrBadTimestamp, clip(b))
	case tsOutOfRange:
		return 0, fmt.Errorf("%w: %q is out of the TIMESTAMP range (%s to %s)", ErrBadTimestamp, clip(b), MinTimestampText, MaxTimestampText)
	}
	return us, nil
}

// The supported TIMESTAMP range, DuckDB's: microseconds since the epoch
// from 290309-12-22 (BC) 00:00:00 to 294247-01-10 04:00:54.775806. Every
// event time and every timestamp a cast or function makes lies in it, so
// arithmetic near its ends (window bounds, watermark delays) is checked
// against it rather than wrapping around int64.
const (
	MinTimestamp     = int64(-9_223_372_022_400_000_000)
	MaxTimestamp     = int64(9_223_372_036_854_775_806)
	MinTimestampText = "290309-12-22 (BC) 00:00:00"
	MaxTimestampText = "294247-01-10 04:00:54.775806"

	minTimestampDay = MinTimestamp / MicrosPerDay // exact: the range starts at midnight
	maxTimestampDay = MaxTimestamp / MicrosPerDay
)

// InTimestampRange reports whether us is in the supported TIMESTAMP range.
func InTimestampRange(us int64) bool { return us >= MinTimestamp && us <= MaxTimestamp }

// fromDayAndMicros returns days*MicrosPerDay + tod when it is in the
// supported range, without overflowing int64 on the way (tod is at most a
// few days either way: a time of day and a zone offset).
func fromDayAndMicros(days, tod int64) (int64, tsStatus) {
	if days < minTimestampDay-2 || days > maxTimestampDay+2 {
		return 0, tsOutOfRange
	}
	if days >= 0 {
		rel := (days-maxTimestampDay)*MicrosPerDay + tod // <= 0 when in range
		if rel > MaxTimestamp-maxTimestampDay*MicrosPerDay {
			return 0, tsOutOfRange
		}
		return maxTimestampDay*MicrosPerDay + rel, tsOK
	}
	rel := (days-minTimestampDay)*MicrosPerDay + tod // >= 0 when in range
	if rel < 0 {
		return 0, tsOutOfRange
	}
	return MinTimestamp + rel, tsOK
}

type tsStatus uint8

const (
	tsOK tsStatus = iota
	tsBad
	tsOutOfRange
)

// ParseDate parses `YYYY-MM-DD` into days since the epoch.
func ParseDate(b []byte) (int64, error) {
	b = trimSpace(b)
	days, n, ok := parseDatePart(b)
	if !ok || n != len(b) {
		return 0, fmt.Errorf("%w: %q (want YYYY-MM-DD)", ErrBadTimestamp, clip(b))
	}
	return days, nil
}

// trimSpace drops surrounding ASCII spaces, as DuckDB's casts do.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func digits(b []byte, n int) (int, bool) {
	if len(b) < n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		c := b[i] - '0'
		if c > 9 {
			return 0, false
		}
		v = v*10 + int(c)
	}
	return v, true
}

// parseDatePart parses YYYY-MM-DD (4+ digit year, optional leading '-') and
// returns days and bytes consumed.
func parseDatePart(b []byte) (int64, int, bool) {
	i := 0
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		i++
	}
	start := i
	var y int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		y = y*10 + int64(b[i]-'0')
		i++
		if i-start > 9 {
			return 0, 0, false
		}
	}
	if i-start < 4 || i >= len(b) || b[i] != '-' {
		return 0, 0, false
	}
	if neg {
		y = -y
	}
	i++
	m, ok := digits(b[i:], 2)
	if !ok || i+2 >= len(b) || b[i+2] != '-' {
		return 0, 0, false
	}
	i += 3
	d, ok := digits(b[i:], 2)
	if !ok {
		return 0, 0, false
	}
	i += 2
	// " (BC)", as DuckDB (and ubik's output) writes years before 1: year
	// N BC is the astronomical year 1-N.
	if rest := b[i:]; !neg && len(rest) >= 5 && string(rest[:5]) == " (BC)" {
		if y == 0 {
			return 0, 0, false
		}
		y = 1 - y
		i += 5
	}
	if m < 1 || m > 12 || d < 1 || d > daysIn[m] || (m == 2 && d == 29 && !isLeap(y)) {
		return 0, 0, false
	}
	return DaysFromCivil(y, m, d), i, true
}

// TimestampParser parses as ParseTimestamp does, remembering the last
// date part: a stream's timestamps mostly share their day, and the
// calendar arithmetic is a good part of the parse. The zero value is ready;
// it is not safe for concurrent use.
type TimestampParser struct {
	date [10]byte
	days int64
	ok   bool
	// inner: days is far enough from the range's ends that any time of
	// that day is in range, so days*MicrosPerDay + time is the value.
	inner bool
}

// Parse parses b as ParseTimestamp does.
func (p *TimestampParser) Parse(b []byte) (int64, error) {
	t := trimSpace(b)
	if p.ok && len(t) > 10 && [10]byte(t[:10]) == p.date {
		if p.inner {
			if tod, ok := clockTime(t[10:]); ok {
				return p.days*MicrosPerDay + tod, nil
			}
		}
		if us, st := parseTimeRest(t, 10, p.days); st == tsOK {
			return us, nil
		}
		return ParseTimestamp(b) // the error
	}
	days, i, ok := parseDatePart(t)
	if ok && i == 10 {
		p.date, p.days, p.ok = [10]byte(t[:10]), days, true
		p.inner = days >= minTimestampDay && days < maxTimestampDay
	}
	if ok {
		if us, st := parseTimeRest(t, i, days); st == tsOK {
			return us, nil
		}
	}
	return ParseTimestamp(b)
}

// clockTime reads the common time part of an event time, " HH:MM:SS"
// with an optional fraction of 1 to 6 digits (separator ' ', 'T' or 't',
// no zone), as microseconds into the day; anything else (a zone, 24:00:00,
// more digits, a bad field) reports false and goes to parseTimeRest, which
// reads the same text to the same value.
func clockTime(r []byte) (int64, bool) {
	if len(r) < 9 || len(r) > 16 || (r[0] != ' ' && r[0] != 'T' && r[0] != 't') || r[3] != ':' || r[6] != ':' {
		return 0, false
	}
	h1, h2, m1, m2, s1, s2 := r[1]-'0', r[2]-'0', r[4]-'0', r[5]-'0', r[7]-'0', r[8]-'0'
	if h1 > 2 || h2 > 9 || m1 > 5 || m2 > 9 || s1 > 5 || s2 > 9 {
		return 0, false
	}
	hh := int64(h1)*10 + int64(h2)
	if hh > 23 {
		return 0, false
	}
	tod := ((hh*60+int64(m1)*10+int64(m2))*60 + int64(s1)*10 + int64(s2)) * MicrosPerSecond
	if len(r) == 9 {
		return tod, true
	}
	if r[9] != '.' || len(r) == 10 {
		return 0, false
	}
	frac := int64(0)
	for _, c := range r[10:] {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		frac = frac*10 + int64(d)
	}
	for k := len(r) - 10; k < 6; k++ {
		frac *= 10
	}
	return tod + frac, true
}

func parseTimestamp(b []byte) (int64, tsStatus) {
	days, i, ok := parseDatePart(b)
	if !ok {
		return 0, tsBad
	}
	return parseTimeRest(b, i, days)
}

// parseTimeRest parses what follows the date part (b[i:]) of a timestamp
// on the day days.
func parseTimeRest(b []byte, i int, days int64) (int64, tsStatus) {
	if i == len(b) {
		return fromDayAndMicros(days, 0)
	}
	var us int64 // the time of day
	if b[i] != ' ' && b[i] != 'T' && b[i] != 't' {
		return 0, tsBad
	}
	i++
	hh, ok1 := digits(b[i:], 2)
	if !ok1 || i+2 >= len(b) || b[i+2] != ':' {
		return 0, tsBad
	}
	mm, ok2 := digits(b[i+3:], 2)
	if !ok2 {
		return 0, tsBad
	}
	i += 5
	ss := 0
	if i < len(b) && b[i] == ':' {
		var ok3 bool
		ss, ok3 = digits(b[i+1:], 2)
		if !ok3 {
			return 0, tsBad
		}
		i += 3
	}
	if hh > 23 || mm > 59 || ss > 59 {
		// DuckDB accepts 24:00:00 as the next midnight; so do we.
		if !(hh == 24 && mm == 0 && ss == 0) {
			return 0, tsBad
		}
	}
	us = int64(hh)*MicrosPerHour + int64(mm)*MicrosPerMinute + int64(ss)*MicrosPerSecond
	if i < len(b) && b[i] == '.' {
		i++
		n := 0
		frac := int64(0)
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if n < 6 {
				frac = frac*10 + int64(b[i]-'0')
			}
			n++
			i++
		}
		if n == 0 || n > 9 {
			return 0, tsBad
		}
		for k := n; k < 6; k++ {
			frac *= 10
		}
		us += frac
	}
	if i == len(b) {
		return fromDayAndMicros(days, us)
	}
	// Zone: Z, UTC, +HH, +HH:MM, +HHMM (an optional space before it, as DuckDB prints offsets).
	if b[i] == ' ' {
		i++
		if i == len(b) {
			return 0, tsBad
		}
	}
	if rest := b[i:]; len(rest) == 3 && (rest[0]|0x20) == 'u' && (rest[1]|0x20) == 't' && (rest[2]|0x20) == 'c' {
		return fromDayAndMicros(days, us)
	}
	switch b[i] {
	case 'Z', 'z':
		if i+1 != len(b) {
			return 0, tsBad
		}
		return fromDayAndMicros(days, us)
	case '+', '-':
		sign := int64(1)
		if b[i] == '-' {
			sign = -1
		}
		i++
		oh, ok := digits(b[i:], 2)
		if !ok {
			return 0, tsBad
		}
		i += 2
		om := 0
		if i < len(b) {
			if b[i] == ':' {
				i++
			}
			om, ok = digits(b[i:], 2)
			if !ok {
				return 0, tsBad
			}
			i += 2
		}
		if i != len(b) || oh > 23 || om > 59 {
			return 0, tsBad
		}
		return fromDayAndMicros(days, us-sign*(int64(oh)*MicrosPerHour+int64(om)*MicrosPerMinute))
	}
	return 0, tsBad
}

// FloorDiv returns floor(a / b) for b > 0.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}
