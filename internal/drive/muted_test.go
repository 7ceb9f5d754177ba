package drive

import (
	"slices"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
)

// TestMuted: a query Config.Muted names runs as ever (the same records
// and rows to its readers) but hands no late event to a hook and counts
// nothing, in a graph (a muted view leaves the graph's counters to its
// reader's) and alone; the unmuted run is the control.
func TestMuted(t *testing.T) {
	qs := graphQueries(t)
	in := []string{`{"g":"a","ts":"2026-01-01 00:00:01"}`, `{"g":"b","ts":"2026-01-01 00:00:12"}`, `not json`,
		`{"g":"late","ts":"2026-01-01 00:00:00"}`, `{"g":"c","ts":"2026-01-01 00:00:25"}`}
	type outcome struct {
		records, late []string
		taken, counts Counts
	}
	run := func(graph bool, muted map[string]bool) outcome {
		t.Helper()
		var o outcome
		emit := func(r *changelog.Record) error {
			o.records = append(o.records, r.Meta.Query+" "+string(r.Key)+" "+string(r.Value))
			return nil
		}
		late := func(name string) func(*exec.LateEvent) {
			return func(ev *exec.LateEvent) { o.late = append(o.late, name+" "+string(ev.Event)) }
		}
		cfg := Config{Emit: emit, Late: late("primary"), Muted: muted}
		var h interface {
			Push([]byte) error
			Close() error
			TakeCounts() Counts
			Counts() Counts
		}
		var err error
		if graph {
			h, err = NewGraph(qs["ra"], nil, cfg, emit, func(name string, ev *exec.LateEvent) { late(name)(ev) })
		} else {
			h, err = New(qs["va"], cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range in {
			_ = h.Push([]byte(raw)) // the malformed record's error is counted
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		o.taken, o.counts = h.TakeCounts(), h.Counts()
		return o
	}
	for _, graph := range []bool{true, false} {
		want := run(graph, nil)
		if len(want.late) != 1 || want.taken.Late != 1 || want.taken.Malformed != 1 || want.taken.Records != 5 || want.counts != want.taken {
			t.Fatalf("graph %v, unmuted: late %q, taken %+v, counts %+v", graph, want.late, want.taken, want.counts)
		}
		got := run(graph, map[string]bool{"va": true})
		if !slices.Equal(got.records, want.records) || len(got.records) == 0 {
			t.Errorf("graph %v: records %q, unmuted %q", graph, got.records, want.records)
		}
		if len(got.late) != 0 || got.taken != (Counts{}) || got.counts != (Counts{}) {
			t.Errorf("graph %v, va muted: late %q, taken %+v, counts %+v: want none", graph, got.late, got.taken, got.counts)
		}
	}
}
