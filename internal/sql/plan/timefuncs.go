package plan

import (
	"github.com/ubiksql/ubik/internal/sql/parser"
	"math"
	"strconv"
	"strings"

	"github.com/ubiksql/ubik/internal/types"
)

// Date and time functions: date_part/extract and its shorthands
// (year(ts), minute(ts), ...), date_trunc, time_bucket, epoch_ms, epoch_us,
// epoch and to_timestamp. Timestamps are UTC microseconds; semantics follow
// DuckDB's TIMESTAMP (not TIMESTAMPTZ) functions.

// datePart is a date_part specifier.
type datePart uint8

const (
	dpNone datePart = iota
	dpYear
	dpMonth
	dpDay
	dpHour
	dpMinute
	dpSecond
	dpMillisecond
	dpMicrosecond
	dpEpoch
	dpDow
	dpIsoDow
	dpDoy
	dpWeek
	dpIsoYear
	dpYearWeek
	dpQuarter
	dpDecade
	dpCentury
	dpMillennium
)

// datePartNames maps DuckDB's specifier spellings (case-insensitive) to a
// part.
var datePartNames = map[string]datePart{
	"year": dpYear, "years": dpYear, "y": dpYear, "yr": dpYear, "yrs": dpYear,
	"month": dpMonth, "months": dpMonth, "mon": dpMonth, "mons": dpMonth,
	"day": dpDay, "days": dpDay, "d": dpDay, "dayofmonth": dpDay,
	"hour": dpHour, "hours": dpHour, "h": dpHour, "hr": dpHour, "hrs": dpHour,
	"minute": dpMinute, "minutes": dpMinute, "min": dpMinute, "mins": dpMinute, "m": dpMinute,
	"second": dpSecond, "seconds": dpSecond, "sec": dpSecond, "secs": dpSecond, "s": dpSecond,
	"millisecond": dpMillisecond, "milliseconds": dpMillisecond, "ms": dpMillisecond, "msec": dpMillisecond, "msecs": dpMillisecond,
	"microsecond": dpMicrosecond, "microseconds": dpMicrosecond, "us": dpMicrosecond, "usec": dpMicrosecond, "usecs": dpMicrosecond,
	"epoch": dpEpoch,
	"dow":   dpDow, "dayofweek": dpDow, "weekday": dpDow,
	"isodow": dpIsoDow,
	"doy":    dpDoy, "dayofyear": dpDoy,
	"week": dpWeek, "weeks": dpWeek, "w": dpWeek, "weekofyear": dpWeek,
	"isoyear": dpIsoYear, "yearweek": dpYearWeek,
	"quarter": dpQuarter, "quarters": dpQuarter,
	"decade": dpDecade, "decades": dpDecade, "dec": dpDecade,
	"century": dpCentury, "centuries": dpCentury, "cent": dpCentury, "c": dpCentury,
	"millennium": dpMillennium, "millennia": dpMillennium, "mil": dpMillennium, "millenium": dpMillennium,
}

// datePartFuncs are the one-argument shorthands: minute(ts) is
// date_part('minute', ts).
var datePartFuncs = map[string]datePart{
	"year": dpYear, "month": dpMonth, "day": dpDay, "dayofmonth": dpDay, "hour": dpHour, "minute": dpMinute,
	"second": dpSecond, "millisecond": dpMillisecond, "microsecond": dpMicrosecond, "dayofweek": dpDow,
	"isodow": dpIsoDow, "dayofyear": dpDoy, "week": dpWeek, "weekofyear": dpWeek, "isoyear": dpIsoYear,
	"yearweek": dpYearWeek, "quarter": dpQuarter, "decade": dpDecade, "century": dpCentury, "millennium": dpMillennium,
}

// constPart reads a constant specifier argument.
func constPart(x Expr, fname string) (datePart, string) {
	c, ok := x.(*Const)
	if !ok || c.T.Kind != types.KindVarchar || c.V.Null {
		return dpNone, fname + "'s first argument must be a constant string naming a part, as in " + fname + "('minute', ts)"
	}
	p, ok := datePartNames[strings.ToLower(strings.TrimSpace(c.V.S))]
	if !ok {
		names := make([]string, 0, len(datePartNames))
		for k := range datePartNames {
			names = append(names, k)
		}
		return dpNone, "unknown date part '" + c.V.S + "'" + suggest(strings.ToLower(c.V.S), names)
	}
	return p, ""
}

// timeArg accepts a TIMESTAMP or DATE operand (a string literal becomes a
// TIMESTAMP).
func timeArg(x Expr, fname string) (Expr, string) {
	switch x.Type().Kind {
	case types.KindTimestamp, types.KindDate:
		return x, ""
	case types.KindNull:
		return &Const{V: types.NullOf(types.Timestamp), T: types.Timestamp, Text: "NULL"}, ""
	case types.KindVarchar:
		if isStringLit(x) {
			c, err := coerce(x, types.Timestamp)
			if err != nil {
				return nil, fname + ": " + err.Error()
			}
			return c, ""
		}
	}
	return nil, fname + " needs a TIMESTAMP or DATE argument, got " + x.Type().String()
}

// micros returns the timestamp of a TIMESTAMP or DATE value.
func micros(v types.Value) int64 {
	if v.Kind == types.KindDate {
		return v.I * usPerDay
	}
	return v.I
}

func bindDatePart(b *binder, name string, args []Expr) (Expr, string) {
	p, msg := constPart(args[0], name)
	if msg != "" {
		return nil, msg
	}
	return datePartExpr(p, "date_part", []Expr{args[0]}, args[1])
}

func bindDatePartShort(b *binder, name string, args []Expr) (Expr, string) {
	return datePartExpr(datePartFuncs[name], name, nil, args[0])
}

func datePartExpr(p datePart, fname string, lead []Expr, x Expr) (Expr, string) {
	x, msg := timeArg(x, fname)
	if msg != "" {
		return nil, msg
	}
	t := types.BigInt
	if p == dpEpoch {
		t = types.Double
	}
	return &funcExpr{name: fname, args: append(lead, x), t: t, strict: true,
		fn1:  func(_ *funcExpr, v types.Value) (types.Value, error) { return extractPart(p, micros(v)), nil },
		arg1: len(lead)}, ""
}

// extractPart computes one part of a timestamp (DuckDB: second, millisecond
// and microsecond are integers that include the whole seconds of the minute;
// epoch is DOUBLE seconds).
func extractPart(p datePart, us int64) types.Value {
	days := floorDiv(us, usPerDay)
	tod := us - days*usPerDay
	y, m, d := types.CivilFromDays(days)
	var r int64
	switch p {
	case dpYear:
		r = y
	case dpMonth:
		r = int64(m)
	case dpDay:
		r = int64(d)
	case dpHour:
		r = tod / usPerHour
	case dpMinute:
		r = tod % usPerHour / usPerMin
	case dpSecond:
		r = tod % usPerMin / usPerSec
	case dpMillisecond:
		r = tod % usPerMin / 1000
	case dpMicrosecond:
		r = tod % usPerMin
	case dpEpoch:
		return types.Float(float64(us) / 1e6)
	case dpDow:
		r = floorMod(days+4, 7) // 1970-01-01 was a Thursday; Sunday is 0
	case dpIsoDow:
		r = isoDow(days)
	case dpDoy:
		r = days - types.DaysFromCivil(y, 1, 1) + 1
	case dpWeek:
		_, r = isoWeek(days)
	case dpIsoYear:
		r, _ = isoWeek(days)
	case dpYearWeek:
		iy, w := isoWeek(days)
		r = iy*100 + w
	case dpQuarter:
		r = int64((m-1)/3 + 1)
	case dpDecade:
		r = y / 10
	case dpCentury:
		if y > 0 {
			r = (y-1)/100 + 1
		} else {
			r = y/100 - 1
		}
	case dpMillennium:
		if y > 0 {
			r = (y-1)/1000 + 1
		} else {
			r = y/1000 - 1
		}
	}
	return types.Big(r)
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// isoDow is 1 (Monday) .. 7 (Sunday).
func isoDow(days int64) int64 {
	d := floorMod(days+4, 7)
	if d == 0 {
		return 7
	}
	return d
}

// isoWeek returns the ISO 8601 week-numbering year and week of a day: the
// week's Thursday decides the year.
func isoWeek(days int64) (int64, int64) {
	thu := days - (isoDow(days) - 1) + 3
	y, _, _ := types.CivilFromDays(thu)
	return y, (thu-types.DaysFromCivil(y, 1, 1))/7 + 1
}

// bindDateTrunc is date_trunc(part, ts): TIMESTAMP in, TIMESTAMP out; a
// DATE truncated to a day or coarser stays a DATE (DuckDB).
func bindDateTrunc(b *binder, name string, args []Expr) (Expr, string) {
	p, msg := constPart(args[0], name)
	if msg != "" {
		return nil, msg
	}
	switch p {
	case dpEpoch, dpDow, dpIsoDow, dpDoy, dpIsoYear, dpYearWeek:
		return nil, "date_trunc does not support the part '" + args[0].(*Const).V.S + "'"
	}
	x, msg := timeArg(args[1], name)
	if msg != "" {
		return nil, msg
	}
	t := types.Timestamp
	dateOut := false
	if x.Type().Kind == types.KindDate {
		switch p {
		case dpDay, dpWeek, dpMonth, dpQuarter, dpYear, dpDecade, dpCentury, dpMillennium:
			t, dateOut = types.Date, true
		}
	}
	return &funcExpr{name: "date_trunc", args: []Expr{args[0], x}, t: t, strict: true,
		fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
			r := truncTime(p, micros(v))
			if dateOut {
				return types.DateDays(floorDiv(r, usPerDay)), nil
			}
			return types.TS(r), nil
		}, arg1: 1}, ""
}

func truncTime(p datePart, us int64) int64 {
	floorTo := func(unit int64) int64 { return floorDiv(us, unit) * unit }
	days := floorDiv(us, usPerDay)
	y, m, _ := types.CivilFromDays(days)
	day := func(y int64, m int) int64 { return types.DaysFromCivil(y, m, 1) * usPerDay }
	switch p {
	case dpMicrosecond:
		return us
	case dpMillisecond:
		return floorTo(1000)
	case dpSecond:
		return floorTo(usPerSec)
	case dpMinute:
		return floorTo(usPerMin)
	case dpHour:
		return floorTo(usPerHour)
	case dpDay:
		return days * usPerDay
	case dpWeek:
		return (days - (isoDow(days) - 1)) * usPerDay
	case dpMonth:
		return day(y, m)
	case dpQuarter:
		return day(y, (m-1)/3*3+1)
	case dpYear:
		return day(y, 1)
	case dpDecade:
		return day(y/10*10, 1)
	case dpCentury:
		return day(y/100*100, 1)
	case dpMillennium:
		return day(y/1000*1000, 1)
	}
	return us
}

// time_bucket's default origins (DuckDB, for TimescaleDB compatibility):
// Monday 2000-01-03 for widths in days, hours, minutes...; 2000-01-01 for
// widths in months and years.
const (
	bucketOriginMicros = 10959 * usPerDay
	bucketOriginMonths = 360
)

// bindTimeBucket is time_bucket(width, ts[, origin TIMESTAMP | offset
// INTERVAL]) with a constant width: a width without months buckets by
// microseconds from the origin; a width of whole months buckets by calendar
// months. A width mixing months with days or time is an error (DuckDB).
func bindTimeBucket(b *binder, name string, args []Expr) (Expr, string) {
	c, ok := args[0].(*Const)
	if !ok || c.T.Kind != types.KindInterval || c.V.Null {
		return nil, "time_bucket's first argument must be a constant INTERVAL, as in time_bucket(INTERVAL '5 minutes', ts)"
	}
	months, days, us := c.V.IntervalParts()
	width := int64(days)*usPerDay + us
	monthly := months != 0
	switch {
	case monthly && (days != 0 || us != 0):
		return nil, "time_bucket: month intervals cannot have a day or time component"
	case monthly && months < 0, !monthly && width <= 0:
		return nil, "time_bucket: the bucket width must be greater than 0"
	}
	x, msg := timeArg(args[1], name)
	if msg != "" {
		return nil, msg
	}
	t := x.Type()
	cs := []Expr{args[0], x}
	mode := 0 // 0 default origin, 1 origin, 2 offset
	if len(args) == 3 {
		third := args[2]
		switch third.Type().Kind {
		case types.KindInterval:
			mode = 2
		case types.KindNull:
			return &Const{V: types.NullOf(t), T: t, Text: "NULL"}, ""
		default:
			o, msg := timeArg(third, name)
			if msg != "" {
				return nil, "time_bucket's third argument must be an origin TIMESTAMP or an offset INTERVAL"
			}
			third, mode = o, 1
		}
		cs = append(cs, third)
	}
	return &funcExpr{name: "time_bucket", args: cs, t: t, strict: true,
		fnN: func(_ *funcExpr, v []types.Value) (types.Value, error) {
			ts := micros(v[1])
			var r int64
			var err error
			switch mode {
			case 0:
				r, err = bucket(ts, width, int64(months), bucketOriginMicros, bucketOriginMonths)
			case 1:
				o := micros(v[2])
				r, err = bucket(ts, width, int64(months), o, epochMonths(o))
			case 2:
				om, od, ou := v[2].IntervalParts()
				shifted, ok := addInterval(ts, -om, -od, -ou)
				if !ok {
					return types.Value{}, rangeErr("time_bucket: timestamp out of range")
				}
				if r, err = bucket(shifted, width, int64(months), bucketOriginMicros, bucketOriginMonths); err == nil {
					var ok bool
					if r, ok = addInterval(r, om, od, ou); !ok {
						return types.Value{}, rangeErr("time_bucket: timestamp out of range")
					}
				}
			}
			if err != nil {
				return types.Value{}, err
			}
			if t.Kind == types.KindDate {
				return types.DateDays(floorDiv(r, usPerDay)), nil
			}
			return types.TS(r), nil
		}}, ""
}

// bucket is DuckDB's WidthConvertibleTo{Micros,Months}Common.
func bucket(ts, width, months, originUS, originMonths int64) (int64, error) {
	if months == 0 {
		origin := originUS % width
		d := ts - origin
		if (origin > 0 && d > ts) || (origin < 0 && d < ts) {
			return 0, rangeErr("Overflow in subtraction of INT64 (%d - %d)!", ts, origin)
		}
		r := d / width * width
		if d < 0 && d%width != 0 {
			r -= width
		}
		return r + origin, nil
	}
	origin := originMonths % months
	tm := epochMonths(ts) - origin
	r := tm / months * months
	if tm < 0 && tm%months != 0 {
		r -= months
	}
	r += origin
	y := floorDiv(r, 12)
	return types.DaysFromCivil(1970+y, int(r-y*12)+1, 1) * usPerDay, nil
}

func epochMonths(us int64) int64 {
	y, m, _ := types.CivilFromDays(floorDiv(us, usPerDay))
	return (y-1970)*12 + int64(m) - 1
}

// bindEpochMs is epoch_ms(TIMESTAMP) -> BIGINT milliseconds (truncated
// toward zero, as DuckDB) and epoch_ms(integer) -> TIMESTAMP.
func bindEpochMs(b *binder, name string, args []Expr) (Expr, string) {
	x := args[0]
	if isInt(x.Type()) {
		x, _ = coerce(x, types.BigInt)
		return &funcExpr{name: name, args: []Expr{x}, t: types.Timestamp, strict: true,
			fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
				if v.I < minDateDays*usPerDay/1000 || v.I > maxDateDays*usPerDay/1000 {
					return types.Value{}, rangeErr("epoch_ms: %d milliseconds is out of the TIMESTAMP range", v.I)
				}
				return types.TS(v.I * 1000), nil
			}}, ""
	}
	return epochOf(name, x, types.BigInt, func(us int64) types.Value { return types.Big(us / 1000) })
}

func bindEpochUs(b *binder, name string, args []Expr) (Expr, string) {
	return epochOf(name, args[0], types.BigInt, func(us int64) types.Value { return types.Big(us) })
}

// epoch(ts) is DOUBLE seconds since the epoch.
func bindEpoch(b *binder, name string, args []Expr) (Expr, string) {
	return epochOf(name, args[0], types.Double, func(us int64) types.Value { return types.Float(float64(us) / 1e6) })
}

func epochOf(name string, arg Expr, t types.Type, f func(int64) types.Value) (Expr, string) {
	x, msg := timeArg(arg, name)
	if msg != "" {
		return nil, name + " needs a TIMESTAMP (or DATE; epoch_ms also takes BIGINT milliseconds), got " + arg.Type().String()
	}
	return &funcExpr{name: name, args: []Expr{x}, t: t, strict: true,
		fn1: func(_ *funcExpr, v types.Value) (types.Value, error) { return f(micros(v)), nil }}, ""
}

// bindToTimestamp is to_timestamp(seconds): DOUBLE seconds since the epoch
// to TIMESTAMP, rounded half to even to the microsecond (DuckDB returns
// TIMESTAMP WITH TIME ZONE; ubik's timestamps are UTC).
func bindToTimestamp(b *binder, name string, args []Expr) (Expr, string) {
	x := args[0]
	if !x.Type().IsNumeric() && x.Type().Kind != types.KindNull {
		return nil, name + " needs numeric seconds since the epoch, got " + x.Type().String()
	}
	x, err := coerce(x, types.Double)
	if err != nil {
		return nil, err.Error()
	}
	return &funcExpr{name: name, args: []Expr{x}, t: types.Timestamp, strict: true,
		fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
			us := math.RoundToEven(v.F * 1e6)
			if math.IsNaN(us) || us < float64(minDateDays*usPerDay) || us > float64(maxDateDays*usPerDay) {
				return types.Value{}, convErr("Could not convert epoch seconds to TIMESTAMP WITH TIME ZONE")
			}
			return types.TS(int64(us)), nil
		}}, ""
}

// bindToTimestampLTZ is Flink's TO_TIMESTAMP_LTZ(n, precision): n units
// since the epoch to TIMESTAMP, where precision is a constant 0 (n is
// seconds), 3 (milliseconds) or 6 (microseconds; Flink takes only 0 and 3).
// Flink's result is a TIMESTAMP_LTZ, an instant shown in the session time
// zone; ubik's timestamps are UTC instants, so the result is the same
// instant. An integer n converts exactly; a DOUBLE or DECIMAL n is rounded
// half to even to the microsecond. A result outside the TIMESTAMP range is
// an error, NULL in is NULL out.
func (b *binder) bindToTimestampLTZ(n *parser.FuncCall, args []Expr) (Expr, error) {
	const name = "to_timestamp_ltz"
	pc, ok := args[1].(*Const)
	if !ok || pc.T.Kind != types.KindInteger && pc.T.Kind != types.KindBigInt || pc.V.Null {
		return nil, b.errAt(n.Args[1].Pos(), "%s's precision must be a constant integer: 0 (seconds), 3 (milliseconds) or 6 (microseconds), got %s", name, parser.Format(n.Args[1]))
	}
	var mul int64
	switch pc.V.I {
	case 0:
		mul = 1_000_000
	case 3:
		mul = 1000
	case 6:
		mul = 1
	default:
		return nil, b.errAt(n.Args[1].Pos(), "%s's precision must be 0 (seconds), 3 (milliseconds) or 6 (microseconds), got %s", name, parser.Format(n.Args[1]))
	}
	x := args[0]
	t := x.Type()
	switch {
	case t.Kind == types.KindNull:
		return &Const{V: types.NullOf(types.Timestamp), T: types.Timestamp, Text: "NULL"}, nil
	case t.Kind == types.KindInteger || t.Kind == types.KindBigInt:
		x, _ = coerce(x, types.BigInt)
		return fold(&funcExpr{name: name, args: []Expr{x, args[1]}, t: types.Timestamp, strict: true,
			fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
				if v.I > types.MaxTimestamp/mul || v.I < types.MinTimestamp/mul {
					return types.Value{}, rangeErr("%s: %d is out of the TIMESTAMP range (%s to %s)", name, v.I, types.MinTimestampText, types.MaxTimestampText)
				}
				return types.TS(v.I * mul), nil
			}}, x), nil
	case t.Kind == types.KindDouble || t.Kind == types.KindDecimal:
		x, err := coerce(x, types.Double)
		if err != nil {
			return nil, b.errAt(n.Args[0].Pos(), "%s", err.Error())
		}
		return fold(&funcExpr{name: name, args: []Expr{x, args[1]}, t: types.Timestamp, strict: true,
			fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
				us := math.RoundToEven(v.F * float64(mul))
				// float64(MaxTimestamp) rounds up to 2^63, so the upper
				// bound is exclusive.
				if math.IsNaN(us) || us < float64(types.MinTimestamp) || us >= float64(types.MaxTimestamp) {
					return types.Value{}, rangeErr("%s: %s is out of the TIMESTAMP range (%s to %s)", name, ValueText(v), types.MinTimestampText, types.MaxTimestampText)
				}
				return types.TS(int64(us)), nil
			}}, x), nil
	}
	return nil, b.errAt(n.Args[0].Pos(), "%s needs a number of seconds, milliseconds or microseconds since the epoch (INTEGER, BIGINT, DOUBLE or DECIMAL), got %s", name, t)
}

// bindStrftime is strftime(ts, format): the timestamp (or date) as text,
// with DuckDB's (C's) format specifiers. The format is a constant, checked
// and compiled once; an unknown specifier is a compile error.
func bindStrftime(b *binder, name string, args []Expr) (Expr, string) {
	x, msg := timeArg(args[0], name)
	if msg != "" {
		return nil, msg
	}
	c, ok := args[1].(*Const)
	if !ok || c.T.Kind != types.KindVarchar {
		return nil, "strftime's format must be a constant string, as in strftime(ts, '%Y-%m-%d')"
	}
	if c.V.Null {
		return &Const{V: types.NullOf(types.Varchar), T: types.Varchar, Text: "NULL"}, ""
	}
	f, msg := compileStrftime(c.V.S)
	if msg != "" {
		return nil, msg
	}
	return &funcExpr{name: name, args: []Expr{x, args[1]}, t: types.Varchar, strict: true,
		fn1: func(_ *funcExpr, v types.Value) (types.Value, error) {
			return types.Str(string(f(nil, micros(v)))), nil
		}}, ""
}

var (
	weekdayNames = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames   = [12]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// compileStrftime turns a strftime format into an appender.
func compileStrftime(format string) (func(dst []byte, us int64) []byte, string) {
	type step struct {
		lit  string
		spec byte
		pad  bool
	}
	var steps []step
	lit := []byte{}
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if ch != '%' {
			lit = append(lit, ch)
			continue
		}
		pad := true
		i++
		if i < len(format) && format[i] == '-' {
			pad = false
			i++
		}
		if i >= len(format) {
			return nil, "strftime: the format ends in a lone %"
		}
		sp := format[i]
		valid := strings.IndexByte("aAbBdfgHIjmMpSuwyY%", sp) >= 0
		if !pad {
			valid = strings.IndexByte("dmHIMSj", sp) >= 0
		}
		if !valid {
			spec := "%" + string(sp)
			if !pad {
				spec = "%-" + string(sp)
			}
			return nil, "strftime: unsupported format specifier " + spec + " (supported: %a %A %b %B %d %f %g %H %I %j %m %M %p %S %u %w %y %Y %%, and %-d %-m %-H %-I %-M %-S %-j without padding)"
		}
		if sp == '%' {
			lit = append(lit, '%')
			continue
		}
		if len(lit) > 0 {
			steps = append(steps, step{lit: string(lit)})
			lit = lit[:0]
		}
		steps = append(steps, step{spec: sp, pad: pad})
	}
	if len(lit) > 0 {
		steps = append(steps, step{lit: string(lit)})
	}
	num := func(dst []byte, v int64, width int, pad bool) []byte {
		s := strconv.FormatInt(v, 10)
		if pad {
			for n := len(s); n < width; n++ {
				dst = append(dst, '0')
			}
		}
		return append(dst, s...)
	}
	return func(dst []byte, us int64) []byte {
		days := floorDiv(us, usPerDay)
		tod := us - days*usPerDay
		y, m, d := types.CivilFromDays(days)
		h := tod / usPerHour
		for _, st := range steps {
			if st.spec == 0 {
				dst = append(dst, st.lit...)
				continue
			}
			switch st.spec {
			case 'Y':
				if y < 0 {
					dst = append(dst, '-')
					dst = num(dst, -y, 4, true)
				} else {
					dst = num(dst, y, 4, true)
				}
			case 'y':
				dst = num(dst, ((y%100)+100)%100, 2, true)
			case 'm':
				dst = num(dst, int64(m), 2, st.pad)
			case 'd':
				dst = num(dst, int64(d), 2, st.pad)
			case 'H':
				dst = num(dst, h, 2, st.pad)
			case 'I':
				h12 := h % 12
				if h12 == 0 {
					h12 = 12
				}
				dst = num(dst, h12, 2, st.pad)
			case 'p':
				if h < 12 {
					dst = append(dst, "AM"...)
				} else {
					dst = append(dst, "PM"...)
				}
			case 'M':
				dst = num(dst, tod/usPerMin%60, 2, st.pad)
			case 'S':
				dst = num(dst, tod/usPerSec%60, 2, st.pad)
			case 'f':
				dst = num(dst, tod%usPerSec, 6, true)
			case 'g':
				dst = num(dst, tod%usPerSec/1000, 3, true)
			case 'j':
				dst = num(dst, days-types.DaysFromCivil(y, 1, 1)+1, 3, st.pad)
			case 'a', 'A', 'w', 'u':
				wd := (days%7 + 11) % 7 // 1970-01-01 was a Thursday (4)
				switch st.spec {
				case 'a':
					dst = append(dst, weekdayNames[wd][:3]...)
				case 'A':
					dst = append(dst, weekdayNames[wd]...)
				case 'w':
					dst = num(dst, wd, 1, false)
				default:
					if wd == 0 {
						wd = 7
					}
					dst = num(dst, wd, 1, false)
				}
			case 'b':
				dst = append(dst, monthNames[m-1][:3]...)
			case 'B':
				dst = append(dst, monthNames[m-1]...)
			}
		}
		return dst
	}, ""
}
