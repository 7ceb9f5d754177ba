package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// histCap is the largest latency, in milliseconds, a hist counts in its
// own bucket; anything above shares the last one (the max stays exact).
const histCap = 60_000

// hist counts latencies in whole milliseconds, one bucket per millisecond:
// the inputs are whole milliseconds, so its quantiles are exact, and its
// size is fixed however many records a run reads.
type hist struct {
	counts []int64 // histCap+1 buckets; the last holds everything above histCap
	n, max int64
}

func newHist() *hist { return &hist{counts: make([]int64, histCap+1)} }

// add counts one latency; a negative one (clocks of one machine do not go
// backwards, but a record could carry a future sent_ms) counts as 0.
func (h *hist) add(ms int64) {
	ms = max(ms, 0)
	h.n++
	h.max = max(h.max, ms)
	h.counts[min(ms, histCap)]++
}

// quantile is the nearest-rank q-quantile (the smallest latency at least
// a fraction q of the counts are at or below), or -1 when h is empty. A
// quantile in the last bucket is reported as the max.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return -1
	}
	rank := int64(q*float64(h.n) + 0.999999999)
	rank = min(max(rank, 1), h.n)
	var seen int64
	for ms, c := range h.counts {
		seen += c
		if seen >= rank {
			if ms == histCap {
				return h.max
			}
			return int64(ms)
		}
	}
	return h.max
}

// intField is the integer cell of the named column in a changelog value
// (docs/contract.md: a JSON object whose members are written `"name": cell`
// and separated by `, `). A quote inside a string cell is escaped, so the
// pattern `"name": ` only matches a member name. ok is false when the
// column is missing or its cell is not an integer (null).
func intField(value []byte, pattern []byte) (v int64, ok bool) {
	i := bytes.Index(value, pattern)
	if i < 0 {
		return 0, false
	}
	rest := value[i+len(pattern):]
	j := 0
	if j < len(rest) && rest[j] == '-' {
		j++
	}
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return v, err == nil
}

// fieldPattern is what intField looks for: the column's name as the
// contract writes a member name (plain names only: no escapes).
func fieldPattern(column string) []byte { return []byte(`"` + column + `": `) }

// windowEndMs is the record's window end in ms (header ubik.window_end,
// decimal µs), or ok false without one.
func windowEndMs(headers []kgo.RecordHeader) (ms int64, ok bool) {
	for _, h := range headers {
		if h.Key == "ubik.window_end" {
			us, err := strconv.ParseInt(string(h.Value), 10, 64)
			return us / 1000, err == nil
		}
	}
	return 0, false
}

// isFinal tells a final record (header ubik.final: true) from an early one.
func isFinal(headers []kgo.RecordHeader) bool {
	for _, h := range headers {
		if h.Key == "ubik.final" {
			return string(h.Value) == "true"
		}
	}
	return false
}

// tally is one kind's records (early or final): all it read, those that
// arrived during the warm-up (counted, not in the quantiles), those whose
// value had no integer max_sent_ms, and the latencies of the rest.
type tally struct {
	read, warm, unparsed int64
	lat                  *hist
}

func newTally() *tally { return &tally{lat: newHist()} }

// freshness is what the sink's reader saw: the early records and the
// finals apart; the finals once more against their window's end (event
// time is the send time, so the end is about when the window's newest
// event, of any group, was sent); and the largest early latency of each
// second since the producer started (bounded by the run's length).
type freshness struct {
	early, final, afterEnd *tally
	perSecond              []int64
}

func newFreshness(seconds int) *freshness {
	return &freshness{early: newTally(), final: newTally(), afterEnd: newTally(), perSecond: make([]int64, seconds)}
}

// record counts one sink record that arrived at arrival (ms since 1970);
// start is when the producer started and warmEnd when the warm-up ended.
func (f *freshness) record(r *kgo.Record, pattern []byte, arrival, start, warmEnd int64) {
	if isFinal(r.Headers) {
		end, ok := windowEndMs(r.Headers)
		f.afterEnd.count(arrival-end, ok, arrival >= warmEnd)
		sent, ok := intField(r.Value, pattern)
		f.final.count(arrival-sent, ok, arrival >= warmEnd)
		return
	}
	sent, ok := intField(r.Value, pattern)
	f.early.count(arrival-sent, ok, arrival >= warmEnd)
	if s := (arrival - start) / 1000; ok && s >= 0 && s < int64(len(f.perSecond)) {
		f.perSecond[s] = max(f.perSecond[s], arrival-sent)
	}
}

// count counts one record's latency lat: in the quantiles when ok and
// measured (past the warm-up), else as unparsed or warm.
func (t *tally) count(lat int64, ok, measured bool) {
	t.read++
	switch {
	case !ok:
		t.unparsed++
	case !measured:
		t.warm++
	default:
		t.lat.add(lat)
	}
}

// table prints the freshness table: per kind, the records read, those in
// the quantiles, and p50, p99 and max in milliseconds.
func (f *freshness) table(w io.Writer, warmup time.Duration) {
	fmt.Fprintf(w, "| records | read | in the quantiles (after the %s warm-up) | p50 ms | p99 ms | max ms |\n", warmup)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|\n")
	for _, k := range []struct {
		name string
		t    *tally
	}{{"early", f.early}, {"final", f.final}, {"final, after its window's end", f.afterEnd}} {
		h := k.t.lat
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", k.name, k.t.read, h.n,
			msText(h.quantile(0.5)), msText(h.quantile(0.99)), msText(maxOrNone(h)))
		if k.t.unparsed > 0 {
			fmt.Fprintf(w, "| (%s: %d records without the value or header timed) | | | | | |\n", k.name, k.t.unparsed)
		}
	}
}

func maxOrNone(h *hist) int64 {
	if h.n == 0 {
		return -1
	}
	return h.max
}

func msText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return strconv.FormatInt(ms, 10)
}
