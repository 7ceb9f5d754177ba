package plan

import (
	"github.com/ubiksql/ubik/internal/types"
	"math"
	"strconv"
	"strings"
)

// Calendar arithmetic on the proleptic Gregorian calendar, without
// time.Time so that any DuckDB-representable year works and nothing
// allocates. Algorithms from Howard Hinnant's "chrono-compatible low-level
// date algorithms".

const (
	usPerSec  = int64(1_000_000)
	usPerMin  = 60 * usPerSec
	usPerHour = 60 * usPerMin
	usPerDay  = 24 * usPerHour
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// Range DuckDB accepts for dates and timestamps: years -290307..294247.
const (
	minDateDays = -106_751_990 // roughly 290307 BC
	maxDateDays = 106_751_990
)

// ---- parsing ----

// scanInt reads up to max digits at s[i:]; it returns the value, the new
// index and the number of digits read.
func scanInt(s string, i, max int) (int64, int, int) {
	var v int64
	n := 0
	for i < len(s) && n < max && s[i] >= '0' && s[i] <= '9' {
		v = v*10 + int64(s[i]-'0')
		i++
		n++
	}
	return v, i, n
}

// ParseDate parses DuckDB date text: YYYY-MM-DD, surrounding spaces allowed.
// It is types.ParseDate, the one date parser of the project.
func ParseDate(s string) (int64, bool) {
	d, err := types.ParseDate([]byte(strings.TrimSpace(s)))
	return d, err == nil
}

// ParseTimestamp parses timestamp text into microseconds since the epoch
// (UTC): DuckDB text, RFC 3339 (offsets converted to UTC), a bare date. It is
// types.ParseTimestamp, the one timestamp parser of the project (event times
// and casts accept the same text).
func ParseTimestamp(s string) (int64, bool) {
	us, err := types.ParseTimestamp([]byte(s))
	return us, err == nil
}

// Interval is a parsed interval value.
type intervalVal struct {
	months, days int64
	micros       int64
}

type unitSpec struct {
	months, days, micros int64 // one unit expressed in a single field
}

var intervalUnitTable = map[string]unitSpec{
	"microsecond": {micros: 1}, "microseconds": {micros: 1}, "us": {micros: 1},
	"millisecond": {micros: 1000}, "milliseconds": {micros: 1000}, "ms": {micros: 1000},
	"second": {micros: usPerSec}, "seconds": {micros: usPerSec}, "s": {micros: usPerSec}, "sec": {micros: usPerSec}, "secs": {micros: usPerSec},
	"minute": {micros: usPerMin}, "minutes": {micros: usPerMin}, "m": {micros: usPerMin}, "min": {micros: usPerMin}, "mins": {micros: usPerMin},
	"hour": {micros: usPerHour}, "hours": {micros: usPerHour}, "h": {micros: usPerHour}, "hr": {micros: usPerHour}, "hrs": {micros: usPerHour},
	"day": {days: 1}, "days": {days: 1}, "d": {days: 1},
	"week": {days: 7}, "weeks": {days: 7}, "w": {days: 7},
	"month": {months: 1}, "months": {months: 1}, "mon": {months: 1}, "mons": {months: 1},
	"year": {months: 12}, "years": {months: 12}, "y": {months: 12}, "yr": {months: 12}, "yrs": {months: 12},
}

const maxIntervalPart = 1 << 53

// parseInterval parses interval text: a sequence of "<number> <unit>"
// pairs ("1 hour 30 minutes", "1.5 seconds", "-2 days"), optionally with a
// trailing "[-]HH:MM[:SS[.ffffff]]" time part. A fractional month spills
// into days (30 per month) and a fractional day into microseconds, as in
// DuckDB.
func parseInterval(s string) (intervalVal, string) {
	var iv intervalVal
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) == 0 {
		return iv, "empty interval"
	}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Contains(f, ":") {
			us, ok := parseClock(f)
			if !ok {
				return iv, "bad time part " + strconv.Quote(f)
			}
			iv.micros += us
			continue
		}
		num := f
		unit := ""
		// "10s", "5minutes": a number glued to its unit.
		j := 0
		for j < len(f) && (f[j] >= '0' && f[j] <= '9' || f[j] == '.' || f[j] == '-' || f[j] == '+') {
			j++
		}
		if j < len(f) {
			num, unit = f[:j], f[j:]
		} else if i+1 < len(fields) {
			i++
			unit = fields[i]
		}
		if unit == "" {
			return iv, "missing unit after " + strconv.Quote(num)
		}
		u, ok := intervalUnitTable[unit]
		if !ok {
			return iv, "unknown interval unit " + strconv.Quote(unit)
		}
		x, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" || strings.ContainsAny(num, "eEinIN") {
			return iv, "bad number " + strconv.Quote(num)
		}
		if math.Abs(x) > maxIntervalPart {
			return iv, "interval out of range"
		}
		whole, frac := math.Modf(x)
		isInt := frac == 0 && !strings.Contains(num, ".")
		switch {
		case u.months != 0:
			iv.months += int64(whole) * u.months
			if !isInt {
				// fraction of years -> months, of months -> days (30 per
				// month) -> micros
				fm, fmr := math.Modf(frac * float64(u.months))
				iv.months += int64(fm)
				wd, fdd := math.Modf(fmr * 30)
				iv.days += int64(wd)
				iv.micros += int64(math.Round(fdd * float64(usPerDay)))
			}
		case u.days != 0:
			iv.days += int64(whole) * u.days
			if !isInt {
				iv.micros += int64(math.Round(frac * float64(u.days) * float64(usPerDay)))
			}
		default:
			if isInt {
				// exact integer path: no float rounding
				n, err := strconv.ParseInt(strings.TrimPrefix(num, "+"), 10, 64)
				if err != nil {
					return iv, "bad number " + strconv.Quote(num)
				}
				iv.micros += n * u.micros
			} else {
				iv.micros += int64(math.Round(x * float64(u.micros)))
			}
		}
		if iv.months > math.MaxInt32 || iv.months < math.MinInt32 || iv.days > math.MaxInt32 || iv.days < math.MinInt32 ||
			iv.micros > math.MaxInt64/2 || iv.micros < math.MinInt64/2 {
			return iv, "interval out of range"
		}
	}
	return iv, ""
}

// parseClock reads [-]HH:MM[:SS[.ffffff]].
func parseClock(f string) (int64, bool) {
	neg := false
	if strings.HasPrefix(f, "-") {
		neg = true
		f = f[1:]
	}
	h, i, n := scanInt(f, 0, 9)
	if n == 0 || i >= len(f) || f[i] != ':' {
		return 0, false
	}
	m, i, n := scanInt(f, i+1, 2)
	if n == 0 || m > 59 {
		return 0, false
	}
	var sec, frac int64
	if i < len(f) && f[i] == ':' {
		sec, i, n = scanInt(f, i+1, 2)
		if n == 0 || sec > 59 {
			return 0, false
		}
		if i < len(f) && f[i] == '.' {
			i++
			d := 0
			for i < len(f) && f[i] >= '0' && f[i] <= '9' {
				if d < 6 {
					frac = frac*10 + int64(f[i]-'0')
				}
				d++
				i++
			}
			for ; d < 6; d++ {
				frac *= 10
			}
		}
	}
	if i != len(f) {
		return 0, false
	}
	us := h*usPerHour + m*usPerMin + sec*usPerSec + frac
	if neg {
		us = -us
	}
	return us, true
}

// addMonths adds months to a day count, clamping the day of month to the
// target month's length (DuckDB: 2020-01-31 + 1 month = 2020-02-29).
func addMonths(days int64, months int64) int64 {
	if months == 0 {
		return days
	}
	y, mi, di := types.CivilFromDays(days)
	m, d := int64(mi), int64(di)
	total := y*12 + (m - 1) + months
	ny := floorDiv(total, 12)
	nm := total - ny*12 + 1
	if dim := daysIn(ny, nm); d > dim {
		d = dim
	}
	return types.DaysFromCivil(ny, int(nm), int(d))
}

// addInterval adds an interval to a timestamp.
func addInterval(ts int64, months, days int32, micros int64) (int64, bool) {
	if months != 0 {
		day := floorDiv(ts, usPerDay)
		tod := ts - day*usPerDay
		day = addMonths(day, int64(months))
		ts = day*usPerDay + tod
	}
	d := int64(days) * usPerDay
	r := ts + d
	if (d > 0 && r < ts) || (d < 0 && r > ts) {
		return 0, false
	}
	r2 := r + micros
	if (micros > 0 && r2 < r) || (micros < 0 && r2 > r) {
		return 0, false
	}
	if r2 < minDateDays*usPerDay || r2 > maxDateDays*usPerDay {
		return 0, false
	}
	return r2, true
}
