package changelog

import (
	"math"
	"strconv"
)

const (
	microsPerSecond = 1_000_000
	microsPerMinute = 60 * microsPerSecond
	microsPerHour   = 60 * microsPerMinute
	microsPerDay    = 24 * microsPerHour
)

// DuckDB's temporal infinities: timestamp_t::infinity() is the largest int64
// and ninfinity() its negation; date_t likewise over int32. They cast to the
// texts "infinity" and "-infinity".
const (
	timestampInfinity  = math.MaxInt64
	timestampNInfinity = -math.MaxInt64
	dateInfinity       = math.MaxInt32
	dateNInfinity      = -math.MaxInt32
)

// floorDiv returns the floor of a/b for b > 0 (Go's / truncates toward zero,
// which would put 1969-12-31 23:59:59 on 1970-01-01).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date with
// astronomical year numbering (year 0 is 1 BC). It is exact over the whole
// int64 range: the 400-year era is split off before any offset is added.
// (Howard Hinnant's civil_from_days.)
func civil(days int64) (year int64, month, day int) {
	const daysPer400Y = 146097
	era := floorDiv(days, daysPer400Y)
	z := days - era*daysPer400Y + 719468 // days since 0000-03-01 of this era, < 2 eras
	era2 := z / daysPer400Y
	doe := z - era2*daysPer400Y // [0, 146096]
	era += era2
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365], from March 1
	mp := (5*doy + 2) / 153                                // [0, 11], March = 0
	day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		month = int(mp + 3)
	} else {
		month = int(mp - 9)
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// appendCivilDate appends DuckDB's date text for days since the epoch:
// YYYY-MM-DD with the year zero-padded to at least four digits, and for
// years before 1 the BC year (1 - astronomical year) followed by " (BC)".
func appendCivilDate(dst []byte, days int64) []byte {
	y, m, d := civil(days)
	bc := y <= 0
	if bc {
		y = 1 - y
	}
	switch {
	case y < 10:
		dst = append(dst, '0', '0', '0')
	case y < 100:
		dst = append(dst, '0', '0')
	case y < 1000:
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, y, 10)
	dst = append(dst, '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	dst = append2(dst, d)
	if bc {
		dst = append(dst, " (BC)"...)
	}
	return dst
}

// appendDateText appends DuckDB's text for a DATE of days since the epoch.
func appendDateText(dst []byte, days int64) []byte {
	switch days {
	case dateInfinity:
		return append(dst, "infinity"...)
	case dateNInfinity:
		return append(dst, "-infinity"...)
	}
	return appendCivilDate(dst, days)
}

// appendTimestampText appends DuckDB's text for a TIMESTAMP of microseconds
// since the epoch: the date text (with its " (BC)" when it has one), a space,
// HH:MM:SS, and when the microseconds are not zero a '.' and the six-digit
// fraction with its trailing zeros removed.
func appendTimestampText(dst []byte, us int64) []byte {
	switch us {
	case timestampInfinity:
		return append(dst, "infinity"...)
	case timestampNInfinity:
		return append(dst, "-infinity"...)
	}
	days := floorDiv(us, microsPerDay)
	tod := us - days*microsPerDay // [0, microsPerDay)
	dst = appendCivilDate(dst, days)
	dst = append(dst, ' ')
	return appendTimeOfDay(dst, tod)
}

// appendTimeOfDay appends HH:MM:SS[.f] for tod in [0, 24h) microseconds.
func appendTimeOfDay(dst []byte, tod int64) []byte {
	h := int(tod / microsPerHour)
	tod %= microsPerHour
	m := int(tod / microsPerMinute)
	tod %= microsPerMinute
	s := int(tod / microsPerSecond)
	frac := tod % microsPerSecond
	dst = append2(dst, h)
	dst = append(dst, ':')
	dst = append2(dst, m)
	dst = append(dst, ':')
	dst = append2(dst, s)
	return appendFraction(dst, frac)
}

// appendFraction appends '.' and the six digits of frac (0 < frac < 1e6)
// without trailing zeros; nothing when frac is 0.
func appendFraction(dst []byte, frac int64) []byte {
	if frac == 0 {
		return dst
	}
	var b [6]byte
	for i := 5; i >= 0; i-- {
		b[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 6
	for b[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, b[:n]...)
}

// append2 appends v in [0, 99] as two digits.
func append2(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}

// appendIntervalText appends DuckDB's INTERVAL text: "N year(s)", "N
// month(s)" (months split into years and months, each keeping the sign of
// the month count), "N day(s)", then the time part [-]HH:MM:SS[.f] with
// hours of at least two digits; parts that are zero are left out, and the
// empty interval is "00:00:00". A unit is plural unless its count is 1 or -1.
func appendIntervalText(dst []byte, months, days int32, micros int64) []byte {
	start := len(dst)
	if months != 0 {
		years := months / 12
		dst = appendIntervalUnit(dst, start, years, " year")
		dst = appendIntervalUnit(dst, start, months-years*12, " month")
	}
	dst = appendIntervalUnit(dst, start, days, " day")
	if micros == 0 {
		if len(dst) == start {
			dst = append(dst, "00:00:00"...)
		}
		return dst
	}
	if len(dst) != start {
		dst = append(dst, ' ')
	}
	// Work on the non-positive side so that the minimum int64 has a
	// magnitude, as DuckDB does.
	if micros < 0 {
		dst = append(dst, '-')
	} else {
		micros = -micros
	}
	hours := -(micros / microsPerHour)
	micros += hours * microsPerHour
	mins := -(micros / microsPerMinute)
	micros += mins * microsPerMinute
	secs := -(micros / microsPerSecond)
	micros += secs * microsPerSecond
	if hours < 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, hours, 10)
	dst = append(dst, ':')
	dst = append2(dst, int(mins))
	dst = append(dst, ':')
	dst = append2(dst, int(secs))
	return appendFraction(dst, -micros)
}

func appendIntervalUnit(dst []byte, start int, n int32, unit string) []byte {
	if n == 0 {
		return dst
	}
	if len(dst) != start {
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, unit...)
	if n != 1 && n != -1 {
		dst = append(dst, 's')
	}
	return dst
}

// AppendTimestamp appends the text of a TIMESTAMP of microseconds since
// the epoch, as AppendText renders one (unquoted; AppendCell quotes it).
func AppendTimestamp(dst []byte, us int64) []byte { return appendTimestampText(dst, us) }
