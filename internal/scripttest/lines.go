package scripttest

import (
	"fmt"
	"regexp"
	"strings"
)

// Kind is a kind of output line.
type Kind int

// The kinds of output lines.
const (
	Record     Kind = iota // "[VIEW: ]F|P rev=N key<TAB>value"
	EventError             // "! event N: message": a rejected event of an input
	Error                  // "! message" and the lines under it (a caret)
	Late                   // "[VIEW: ]late REASON: event ..."
	Stats                  // the counters: "events=...", "duplicates=..."
	JoinStats              // the temporal join's: "join: ...", "table: ..."
	Inputs                 // "inputs: A, B": the inputs a query takes rows on
)

func (k Kind) String() string {
	return [...]string{"record", "event error", "error", "late event", "stats", "join stats", "inputs"}[k]
}

// Line is one output line, classified.
type Line struct {
	Kind Kind
	View string // the view whose record or late event it is ("" the query's own)
	// Stream groups the lines a host produces in one order: a query's
	// records, its late events, an input's rejected events.
	Stream string
	Text   string
}

var (
	recordLine = regexp.MustCompile(`^(?:([^ :]+): )?[FP] rev=[0-9]+ `)
	lateLine   = regexp.MustCompile(`^(?:([^ :]+): )?late `)
	eventError = regexp.MustCompile(`^! event [0-9]+: (?:(table [^ :]+): )?`)
)

// Classify gives each line its kind. A line of no known kind continues the
// line above it (the caret under a SQL error).
func Classify(lines []string) []Line {
	var out []Line
	for _, l := range lines {
		switch m := recordLine.FindStringSubmatch(l); {
		case m != nil:
			out = append(out, Line{Record, m[1], "records " + m[1], l})
			continue
		}
		if m := lateLine.FindStringSubmatch(l); m != nil {
			out = append(out, Line{Late, m[1], "late " + m[1], l})
			continue
		}
		if m := eventError.FindStringSubmatch(l); m != nil {
			out = append(out, Line{EventError, "", "rejected " + m[1], l})
			continue
		}
		switch {
		case strings.HasPrefix(l, "! "):
			out = append(out, Line{Error, "", "errors", l})
		case strings.HasPrefix(l, "events=") || strings.HasPrefix(l, "duplicates="):
			out = append(out, Line{Stats, "", "stats", l})
		case strings.HasPrefix(l, "join: ") || strings.HasPrefix(l, "table: "):
			out = append(out, Line{JoinStats, "", "join stats", l})
		case strings.HasPrefix(l, "inputs: "):
			out = append(out, Line{Inputs, "", "inputs", l})
		case len(out) > 0 && out[len(out)-1].Kind == Error:
			out[len(out)-1].Text += "\n" + l
		default:
			out = append(out, Line{Error, "", "errors", l})
		}
	}
	return out
}

// RecordLine renders a record as the scripts print it; a view's record
// (query is not the primary's name) is prefixed with the view's name.
func RecordLine(view string, final bool, rev uint64, key, value string) string {
	kind := "P"
	if final {
		kind = "F"
	}
	l := fmt.Sprintf("%s rev=%d %s\t%s", kind, rev, key, value)
	if view != "" {
		l = view + ": " + l
	}
	return l
}

// LateLine renders a late event: its reason, its event time, its window
// ("[start, end)", or "-" for an event that was not for a window) and the
// watermark, times as the contract prints them.
func LateLine(view, reason, eventTime, window, watermark string) string {
	l := fmt.Sprintf("late %s: event %s window %s watermark %s", reason, eventTime, window, watermark)
	if view != "" {
		l = view + ": " + l
	}
	return l
}

// Counters are a query's counters as stats prints them, each nil when the
// host does not know it (printed "?", compared with nothing).
type Counters struct {
	Events, Malformed, EvalErrors, Filtered, Late, Records, Finalized, HavingSuppressed, LiveGroups *int64
	Duplicates, DedupLate, DedupKeys                                                                *int64
}

// StatsLines renders stats.
func StatsLines(c Counters) []string {
	out := []string{fmt.Sprintf("events=%s malformed=%s eval_errors=%s filtered=%s late=%s records=%s finalized=%s having_suppressed=%s live_groups=%s",
		n(c.Events), n(c.Malformed), n(c.EvalErrors), n(c.Filtered), n(c.Late), n(c.Records), n(c.Finalized), n(c.HavingSuppressed), n(c.LiveGroups))}
	if v(c.Duplicates)+v(c.DedupLate)+v(c.DedupKeys) > 0 {
		out = append(out, fmt.Sprintf("duplicates=%s dedup_late=%s dedup_keys=%s", n(c.Duplicates), n(c.DedupLate), n(c.DedupKeys)))
	}
	return out
}

// JoinCounters are a temporal join's counters as join-stats prints them,
// each nil when the host does not know it.
type JoinCounters struct {
	Events, LateEvents, Joined, Unmatched, NullKeys, Buffered, Versions, Keys, Dropped *int64
	TableRows, TableMalformed, TableLate                                               *int64
	TableWatermark                                                                     string // "-" for none, "?" unknown
}

// JoinStatsLines renders join-stats.
func JoinStatsLines(c JoinCounters) []string {
	return []string{
		fmt.Sprintf("join: events=%s late_events=%s joined=%s unmatched=%s null_keys=%s buffered=%s versions=%s keys=%s dropped=%s",
			n(c.Events), n(c.LateEvents), n(c.Joined), n(c.Unmatched), n(c.NullKeys), n(c.Buffered), n(c.Versions), n(c.Keys), n(c.Dropped)),
		fmt.Sprintf("table: rows=%s malformed=%s late=%s watermark=%s", n(c.TableRows), n(c.TableMalformed), n(c.TableLate), c.TableWatermark),
	}
}

// Int is &v, for the counters.
func Int(v int64) *int64 { return &v }

func n(p *int64) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprint(*p)
}

func v(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
