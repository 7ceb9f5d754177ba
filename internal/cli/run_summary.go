package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// The summary of a run: the line on stderr and --stats-json.

// summary is what a run reports at the end: the text line on stderr and
// --stats-json use the same names (docs/operations.md, "What `ubik run` prints"), and the
// Prometheus metrics are ubik_<name>_total for the counters.
type summary struct {
	Query              string  `json:"query"`
	EventsRead         int64   `json:"events_read"`
	Malformed          int64   `json:"malformed"`
	EvalErrors         int64   `json:"eval_errors"`
	Filtered           int64   `json:"filtered"`
	Late               int64   `json:"late"`
	Duplicates         int64   `json:"duplicates"`
	DedupLate          int64   `json:"dedup_late"`
	DedupKeys          int64   `json:"dedup_keys"`
	RecordsEmitted     int64   `json:"records_emitted"`
	HavingSuppressed   int64   `json:"having_suppressed"`
	Unchanged          int64   `json:"unchanged_suppressed"`
	WindowsFinalized   int64   `json:"windows_finalized"`
	WallSeconds        float64 `json:"wall_seconds"`
	EventsPerSecond    float64 `json:"events_per_second"`
	EmitLatencyP50Ms   float64 `json:"emit_latency_p50_ms"`
	EmitLatencyP99Ms   float64 `json:"emit_latency_p99_ms"`
	StateBytes         int64   `json:"state_bytes"`
	StateBytesPeak     int64   `json:"state_bytes_peak"`
	LiveGroupsPeak     int64   `json:"live_groups_peak"`
	StateBytesPerGroup float64 `json:"state_bytes_per_group"`
	Watermark          string  `json:"watermark,omitempty"`
	BadInputLimit      string  `json:"bad_input_limit_crossed,omitempty"`
	Stopped            string  `json:"stopped,omitempty"`
	StoppedAtLine      int64   `json:"stopped_at_line,omitempty"`
	// Inputs are the counters of each input of a query that reads two (a
	// join: a stream and its versioned table, two streams, or two views
	// over two sources), first the one --input names; EventsRead,
	// Malformed and Late are then their sums.
	Inputs   []inputSummary   `json:"inputs,omitempty"`
	Join     *joinSummary     `json:"join,omitempty"`
	Interval *intervalSummary `json:"interval_join,omitempty"`
}

// inputSummary is one input's part of the run summary.
type inputSummary struct {
	Input      string `json:"input"`
	EventsRead int64  `json:"events_read"`
	Malformed  int64  `json:"malformed"`
	Late       int64  `json:"late"`
}

// inputNames names the two inputs of the target's query when it reads
// two (first the one read from --input), else nil. first and second are
// the run's inputs for a graph of views (second nil with one source).
func (t *runTarget) inputNames(first, second *ubik.Source) []string {
	switch pq := t.pq; {
	case t.via != nil:
		return nil // a query inside a graph: its own counters
	case joinTable(pq) != nil:
		return []string{pq.Source().Name(), joinTable(pq).Name()}
	case graphJoin([]*planQuery{pq}) != nil:
		j := graphJoin([]*planQuery{pq})
		return []string{j.Source().Name(), joinTable(j).Name()}
	case streamJoin([]*planQuery{pq}) != nil:
		left, right, _ := streamJoin([]*planQuery{pq}).IntervalJoin()
		return []string{left.Name(), right.Name()}
	case second != nil:
		return []string{first.Name(), second.Name()}
	}
	return nil
}

// newSummary makes the summary of a query's counters; inputs names its
// two inputs when it reads two (Stats: the first's counters, Table the
// second's), nil for one.
func newSummary(name string, st ubik.Stats, elapsed time.Duration, inputs []string) summary {
	s := summary{
		Query:            name,
		EventsRead:       st.EventsIn,
		Malformed:        st.Malformed,
		EvalErrors:       st.EvalErrors,
		Filtered:         st.Filtered,
		Late:             st.Late,
		Duplicates:       st.Duplicates,
		DedupLate:        st.DedupLate,
		DedupKeys:        st.DedupKeys,
		RecordsEmitted:   st.RecordsOut,
		HavingSuppressed: st.HavingSuppressed,
		Unchanged:        st.UnchangedSuppressed,
		WindowsFinalized: st.WindowsFinalized,
		WallSeconds:      elapsed.Seconds(),
		EmitLatencyP50Ms: st.LatencyP50 / 1e6,
		EmitLatencyP99Ms: st.LatencyP99 / 1e6,
		StateBytes:       st.StateBytes,
		StateBytesPeak:   st.StateBytesPeak,
		LiveGroupsPeak:   st.LiveGroupsPeak,
	}
	if len(inputs) == 2 {
		s.Inputs = []inputSummary{
			{Input: inputs[0], EventsRead: st.EventsIn, Malformed: st.Malformed, Late: st.Late},
			{Input: inputs[1], EventsRead: st.Table.RowsIn, Malformed: st.Table.Malformed, Late: st.Table.Late},
		}
		s.EventsRead += st.Table.RowsIn
		s.Malformed += st.Table.Malformed
		s.Late += st.Table.Late
	}
	if elapsed > 0 {
		s.EventsPerSecond = float64(s.EventsRead) / elapsed.Seconds()
	}
	if st.LiveGroupsPeak > 0 {
		s.StateBytesPerGroup = float64(st.StateBytesPeak) / float64(st.LiveGroupsPeak)
	}
	if st.Watermark != minInt64 {
		s.Watermark = string(changelog.AppendTimestamp(nil, st.Watermark))
	}
	if st.Interval.LeftRows > 0 || st.Interval.RightRows > 0 {
		s.Interval = newIntervalSummary(st)
	} else if st.Table.RowsIn > 0 || st.Join.Events > 0 {
		s.Join = newJoinSummary(st)
	}
	return s
}

const minInt64 = -1 << 63

// writeStatsJSON writes the run summary to path (--stats-json; nothing for
// ""): one object, or an array for a graph's queries. It writes a
// temporary file and renames it, so a reader never sees a half-written
// summary, even of a run killed while writing it.
func writeStatsJSON(path string, sums []summary) error {
	if path == "" {
		return nil
	}
	var v any = sums
	if len(sums) == 1 {
		v = sums[0]
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("--stats-json %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--stats-json: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--stats-json: %w", err)
	}
	return nil
}

func (s summary) print(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "ubik: %s: ", s.Query)
	if s.Stopped != "" {
		fmt.Fprintf(&b, "stopped (%s) after line %d: ", s.Stopped, s.StoppedAtLine)
	}
	// Each input's share follows the total: "15000 events read (person
	// 5000, auction 10000)"; a zero malformed or late count has none.
	each := func(v func(*inputSummary) int64) string {
		var sum int64
		for i := range s.Inputs {
			sum += v(&s.Inputs[i])
		}
		if len(s.Inputs) == 0 || sum == 0 {
			return ""
		}
		parts := make([]string, len(s.Inputs))
		for i := range s.Inputs {
			parts[i] = fmt.Sprintf("%s %d", s.Inputs[i].Input, v(&s.Inputs[i]))
		}
		return " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(&b, "%d events read%s, %d malformed%s, %d eval errors, %d late%s",
		s.EventsRead, each(func(i *inputSummary) int64 { return i.EventsRead }),
		s.Malformed, each(func(i *inputSummary) int64 { return i.Malformed }),
		s.EvalErrors, s.Late, each(func(i *inputSummary) int64 { return i.Late }))
	if s.Duplicates+s.DedupLate > 0 {
		fmt.Fprintf(&b, ", %d duplicates, %d dedup late", s.Duplicates, s.DedupLate)
	}
	fmt.Fprintf(&b, ", %d records emitted", s.RecordsEmitted)
	if s.Unchanged > 0 {
		fmt.Fprintf(&b, ", %d unchanged suppressed", s.Unchanged)
	}
	fmt.Fprintf(&b, ", %d windows finalized, %s, %.0f events/s",
		s.WindowsFinalized, formatWall(s.WallSeconds), s.EventsPerSecond)
	if s.Interval != nil {
		b.WriteString(s.Interval.text())
	}
	if s.Join != nil {
		b.WriteString(s.Join.text())
	}
	if s.BadInputLimit != "" {
		fmt.Fprintf(&b, "; failed: %s", s.BadInputLimit)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// formatWall prints a duration with three significant digits in a unit
// that fits (12.3µs, 4.56ms, 1.23s), never a bare 0.000s.
func formatWall(sec float64) string {
	d := time.Duration(sec * 1e9)
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return strconv.FormatFloat(sec*1e6, 'f', 1, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(sec*1e3, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(sec, 'f', 2, 64) + "s"
}
