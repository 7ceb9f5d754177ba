package changelog

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/types"
)

// duckDateText renders a Go time's date the way DuckDB's DateToStringCast
// does, from Go's own calendar arithmetic (astronomical years), as an oracle
// independent of civil().
func duckDateText(tm time.Time) string {
	y, m, d := tm.Date()
	bc := ""
	if y <= 0 {
		y, bc = 1-y, " (BC)"
	}
	return fmt.Sprintf("%04d-%02d-%02d%s", y, int(m), d, bc)
}

func duckTimestampText(us int64) string {
	tm := time.UnixMicro(us).UTC()
	s := duckDateText(tm) + fmt.Sprintf(" %02d:%02d:%02d", tm.Hour(), tm.Minute(), tm.Second())
	if f := tm.Nanosecond() / 1000; f != 0 {
		frac := fmt.Sprintf(".%06d", f)
		for frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
		s += frac
	}
	return s
}

// TestTimestampAgainstGoTime: over the whole int64 microsecond range (which
// spans about 292,277 years either side of 1970), the timestamp text agrees
// with Go's calendar.
func TestTimestampAgainstGoTime(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 2))
	check := func(us int64) {
		if us == timestampInfinity || us == timestampNInfinity {
			return
		}
		got := string(appendTimestampText(nil, us))
		if want := duckTimestampText(us); got != want {
			t.Fatalf("seed %d: TS(%d) = %q, want %q", seed, us, got, want)
		}
	}
	for _, us := range []int64{0, -1, 1, math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1,
		-62135596800_000000, -62135596800_000001, 253402300800_000000, -microsPerDay, microsPerDay - 1} {
		check(us)
	}
	for range 200_000 {
		switch rng.IntN(3) {
		case 0:
			check(int64(rng.Uint64()))
		case 1: // within a few thousand years of the epoch
			check(rng.Int64N(2*200_000_000_000_000_000) - 200_000_000_000_000_000)
		default: // around the year 1 / 1 BC boundary
			check(-62135596800_000000 + rng.Int64N(2*400*366*microsPerDay) - 400*366*microsPerDay)
		}
	}
}

// TestDateAgainstGoTime does the same for DATE over ±10^11 days.
func TestDateAgainstGoTime(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 3))
	for range 200_000 {
		var days int64
		if rng.IntN(2) == 0 {
			days = rng.Int64N(2e11) - 1e11
		} else {
			days = rng.Int64N(2e6) - 1e6
		}
		if days == dateInfinity || days == dateNInfinity {
			continue
		}
		got := string(appendDateText(nil, days))
		if want := duckDateText(time.Unix(days*86400, 0).UTC()); got != want {
			t.Fatalf("seed %d: DATE(%d) = %q, want %q", seed, days, got, want)
		}
	}
}

// TestTemporalDuckDBRules pins DuckDB's rules outside the everyday range.
func TestTemporalDuckDBRules(t *testing.T) {
	const day = microsPerDay
	for _, tc := range []struct {
		v    types.Value
		want string
	}{
		{types.DateDays(-719162), `"0001-01-01"`},
		{types.DateDays(-719163), `"0001-12-31 (BC)"`}, // the day before 1 AD is 1 BC, no year 0
		{types.DateDays(-719528), `"0001-01-01 (BC)"`},
		{types.DateDays(-719529), `"0002-12-31 (BC)"`},
		{types.DateDays(2932896), `"9999-12-31"`},
		{types.DateDays(2932897), `"10000-01-01"`}, // five-digit years widen
		{types.DateDays(-4371587), `"10000-01-01 (BC)"`},
		{types.DateDays(math.MaxInt32), `"infinity"`},
		{types.DateDays(-math.MaxInt32), `"-infinity"`},
		{types.TS(-62135596800_000000), `"0001-01-01 00:00:00"`},
		{types.TS(-62135596800_000000 - 500_000), `"0001-12-31 (BC) 23:59:59.5"`}, // (BC) follows the date
		{types.TS(2932897 * day), `"10000-01-01 00:00:00"`},
		{types.TS(2932897*day + 1), `"10000-01-01 00:00:00.000001"`},
		{types.TS(math.MaxInt64), `"infinity"`},
		{types.TS(-math.MaxInt64), `"-infinity"`},
		{types.TS(-62135596800_000000 + 1_000), `"0001-01-01 00:00:00.001"`},
	} {
		if got := string(AppendCell(nil, tc.v)); got != tc.want {
			t.Errorf("AppendCell(%+v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

// TestIntervalText pins DuckDB's IntervalToStringCast.
func TestIntervalText(t *testing.T) {
	const (
		s = microsPerSecond
		m = microsPerMinute
		h = microsPerHour
	)
	for _, tc := range []struct {
		months, days int32
		micros       int64
		want         string
	}{
		{0, 0, 0, "00:00:00"},
		{0, 0, m, "00:01:00"},
		{0, 0, 1_500_000, "00:00:01.5"},
		{0, 0, -m, "-00:01:00"},
		{0, 0, 100 * h, "100:00:00"},
		{0, 0, 3*h + 25*m + 45*s + 120_000, "03:25:45.12"},
		{0, 1, 0, "1 day"},
		{0, -1, 0, "-1 day"},
		{0, 2, 0, "2 days"},
		{1, 0, 0, "1 month"},
		{-1, 0, 0, "-1 month"},
		{12, 0, 0, "1 year"},
		{14, 0, 0, "1 year 2 months"},
		{24, 0, 0, "2 years"},
		{-13, 0, 0, "-1 year -1 month"},
		{2, 3, 4*h + 5*m + 6_500_000, "2 months 3 days 04:05:06.5"},
		{0, 2, -h, "2 days -01:00:00"},
		{-14, -1, -1, "-1 year -2 months -1 day -00:00:00.000001"},
		{math.MinInt32, math.MinInt32, math.MinInt64,
			"-178956970 years -8 months -2147483648 days -2562047788:00:54.775808"},
		{math.MaxInt32, math.MaxInt32, math.MaxInt64,
			"178956970 years 7 months 2147483647 days 2562047788:00:54.775807"},
	} {
		got := string(AppendCell(nil, types.Interv(tc.months, tc.days, tc.micros)))
		if want := `"` + tc.want + `"`; got != want {
			t.Errorf("INTERVAL(%d, %d, %d) = %s, want %s", tc.months, tc.days, tc.micros, got, want)
		}
	}
}
