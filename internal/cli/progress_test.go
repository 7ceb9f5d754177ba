package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestProgressFirstRate: the rate the bar shows at its first update is
// the bytes read over the time since the run started, never the bytes
// over the microseconds since the update began.
func TestProgressFirstRate(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	bar := newProgressBar(&out, 100<<20)
	time.Sleep(300 * time.Millisecond) // past the bar's 200 ms throttle
	const read = 1<<20 + 1             // run's first update: after 1 MiB
	if err := bar.Set64(read); err != nil {
		t.Fatal(err)
	}
	limit := float64(read) / time.Since(start).Seconds() * 1.5 // the rate since start, with room for rounding
	m := regexp.MustCompile(`\(([0-9.]+) ([kMGT]?B)/s\)`).FindAllStringSubmatch(out.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no rate shown:\n%q", out.String())
	}
	last := m[len(m)-1]
	v, _ := strconv.ParseFloat(last[1], 64)
	v *= map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[last[2]]
	if v > limit {
		t.Fatalf("first rate %s %s/s, want at most %.0f B/s:\n%q", last[1], last[2], limit, out.String())
	}
}
