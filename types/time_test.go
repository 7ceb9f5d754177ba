package types

import (
	"fmt"
	"math/rand/v2"
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
		" 10:00:00Z", " 10:00:00+02:00", " 10:00:00 +0530", " 10:00:00 UTC", " 10:00:00 utc", " 10:00:00x", "x10:00:00", " 25:00:00", " 10:60:00"}
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
