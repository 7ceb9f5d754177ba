package types

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkParser: the caching parser agrees with ParseTimestamp on every
// input, value and failure alike, whatever it parsed before.
func checkParser(t *testing.T, p *TimestampParser, s string) {
	t.Helper()
	want, werr := ParseTimestamp([]byte(s))
	got, gerr := p.Parse([]byte(s))
	if (werr == nil) != (gerr == nil) || got != want || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("Parse(%q) = %d, %v; ParseTimestamp = %d, %v", s, got, gerr, want, werr)
	}
}

func TestTimestampParserMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var p TimestampParser
	days := []string{"2026-07-18", "2026-07-19", "2024-02-29", "1999-12-31", "2026-13-01", "2023-02-29", "12026-07-18", "-0001-01-01"}
	times := []string{"", " ", "T", " 10:00:00", " 10:00:00.001", "T23:59:59.999999", " 24:00:00", " 24:00:01", " 10:00", " 10:0", " 10:00:00.", " 10:00:00.1234567891",
		" 10:00:00Z", " 10:00:00+02:00", " 10:00:00 +0530", " 10:00:00 UTC", " 10:00:00 utc", " 10:00:00x", "x10:00:00", " 25:00:00", " 10:60:00",
		// around the common-form fast path (clockTime)
		" 10:00:00.1", " 10:00:00.123456", " 10:00:00.1234567", "t10:00:00.5", " 1a:00:00", " 29:00:00", " 30:00:00", " 10:00:00.12a",
		" 10:59:59.99999", " 10:00:6a", " 10:0a:00", " 23:59:59", " 00:00:00.000000", " 10-00-00", " 10:00:00.-1", " 10:00:00 "}
	for i := 0; i < 20000; i++ {
		s := days[r.IntN(len(days))] + times[r.IntN(len(times))]
		if r.IntN(10) == 0 {
			s = " " + s + " "
		}
		checkParser(t, &p, s)
	}
}

func FuzzTimestampParser(f *testing.F) {
	for _, s := range []string{"2026-07-18 10:00:00.001", "2026-07-18", "2026-07-18T10:00:00Z", " 2026-07-18 24:00:00 ", "2026-07-1810:00:00", "2026-02-30 10:00:00"} {
		f.Add(s, "2026-07-18 10:00:01")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var p TimestampParser
		checkParser(t, &p, a)
		checkParser(t, &p, b)
		checkParser(t, &p, a)
		checkParser(t, &p, fmt.Sprint(b, "0"))
	})
}

// TestTimestampRange: the supported range is DuckDB's, 290309-12-22 (BC)
// 00:00:00 to 294247-01-10 04:00:54.775806; text outside it is an error
// that says so, never a value wrapped around int64.
func TestTimestampRange(t *testing.T) {
	ok := []struct {
		s  string
		us int64
	}{
		{"294247-01-10 04:00:54.775806", MaxTimestamp},
		{"294247-01-10T04:00:54.775806Z", MaxTimestamp},
		{"294247-01-11 03:00:54.775806+23:00", MaxTimestamp},
		{"-290308-12-22 00:00:00", MinTimestamp},
		{"-290308-12-22", MinTimestamp},
		{"290309-12-22 (BC) 00:00:00", MinTimestamp},
		{"290309-12-22 (BC)", MinTimestamp},
		{"-290308-12-21 23:00:00-01:00", MinTimestamp},
		{"1970-01-01 00:00:00", 0},
	}
	for _, c := range ok {
		var p TimestampParser
		for _, f := range []func([]byte) (int64, error){ParseTimestamp, p.Parse, p.Parse} {
			got, err := f([]byte(c.s))
			if err != nil || got != c.us {
				t.Errorf("parse %q = %d, %v; want %d", c.s, got, err, c.us)
			}
		}
	}
	bad := []string{
		"294247-01-10 04:00:54.775807", "294247-01-10 04:00:55", "294247-01-11", "294248-01-01",
		"300000-01-01", "999999999-12-31 23:59:59", "294247-01-11 04:00:54+00:00",
		"-290308-12-21 23:59:59.999999", "-290308-12-22 00:00:00+00:01", "-290309-01-01", "-999999999-01-01",
		"294247-01-10 04:00:54.775806-00:01", "290309-12-21 (BC) 23:59:59",
	}
	for _, s := range bad {
		var p TimestampParser
		p.Parse([]byte("294247-01-10 00:00:00")) // prime the cached date
		for _, f := range []func([]byte) (int64, error){ParseTimestamp, p.Parse} {
			got, err := f([]byte(s))
			if err == nil {
				t.Errorf("parse %q = %d, want an out-of-range error", s, got)
				continue
			}
			if !strings.Contains(err.Error(), "out of the TIMESTAMP range") {
				t.Errorf("parse %q: error %q does not give the reason", s, err)
			}
		}
	}
}

// TestTimestampBC: DuckDB's " (BC)" years parse to the astronomical year
// (1 BC is year 0), so ubik reads back what it prints.
func TestTimestampBC(t *testing.T) {
	for _, c := range [][2]string{
		{"0001-01-01 (BC) 00:00:00", "0000-01-01 00:00:00"},
		{"0002-12-31 (BC)", "-0001-12-31"},
		{"0044-03-15 (BC) 12:00:00", "-0043-03-15 12:00:00"},
	} {
		a, err1 := ParseTimestamp([]byte(c[0]))
		b, err2 := ParseTimestamp([]byte(c[1]))
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("%q = %d, %v; %q = %d, %v", c[0], a, err1, c[1], b, err2)
		}
	}
	for _, s := range []string{"0000-01-01 (BC)", "-0001-01-01 (BC)", "2026-07-18 (bc)", "2026-07-18 (BC"} {
		if _, err := ParseTimestamp([]byte(s)); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}
