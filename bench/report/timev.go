package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Usage is what GNU time -v reports about one finished process.
type Usage struct {
	WallSeconds float64
	UserSeconds float64
	SysSeconds  float64
	MaxRSSKB    int64
	ExitStatus  int
	Signal      int // the signal that ended it, 0 if it exited
}

// CPUSeconds is user + system time.
func (u Usage) CPUSeconds() float64 { return u.UserSeconds + u.SysSeconds }

// parseTimeV reads the output of `/usr/bin/time -v`. The wall time field has
// the form h:mm:ss or m:ss.ss.
func parseTimeV(r io.Reader) (Usage, error) {
	var u Usage
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "Command terminated by signal "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return u, fmt.Errorf("time -v: %q: %w", line, err)
			}
			u.Signal = n
			continue
		}
		i := strings.LastIndex(line, ": ")
		if i < 0 {
			continue
		}
		name, val := line[:i], strings.TrimSpace(line[i+2:])
		var err error
		switch name {
		case "User time (seconds)":
			u.UserSeconds, err = strconv.ParseFloat(val, 64)
		case "System time (seconds)":
			u.SysSeconds, err = strconv.ParseFloat(val, 64)
		case "Elapsed (wall clock) time (h:mm:ss or m:ss)":
			u.WallSeconds, err = parseClock(val)
		case "Maximum resident set size (kbytes)":
			u.MaxRSSKB, err = strconv.ParseInt(val, 10, 64)
		case "Exit status":
			u.ExitStatus, err = strconv.Atoi(val)
		default:
			continue
		}
		if err != nil {
			return u, fmt.Errorf("time -v: %q: %w", line, err)
		}
		seen[name] = true
	}
	if err := sc.Err(); err != nil {
		return u, err
	}
	for _, f := range []string{"User time (seconds)", "System time (seconds)", "Elapsed (wall clock) time (h:mm:ss or m:ss)", "Maximum resident set size (kbytes)"} {
		if !seen[f] {
			return u, fmt.Errorf("time -v: no %q line (is /usr/bin/time GNU time?)", f)
		}
	}
	return u, nil
}

// parseClock parses "1:02:03", "2:03.45" or "0:00.29" into seconds.
func parseClock(s string) (float64, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("clock %q: want h:mm:ss or m:ss", s)
	}
	total := 0.0
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("clock %q: bad field %q", s, p)
		}
		if i < len(parts)-1 && v != float64(int64(v)) {
			return 0, fmt.Errorf("clock %q: fractional field %q", s, p)
		}
		total = total*60 + v
	}
	return total, nil
}
