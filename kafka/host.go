package kafka

import (
	"sync"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/handle"
)

// This file is the pipeline's face to a host built on the root package
// (the ubik command): the compiled query and the late events in the root
// package's types.

// CheckPlan is CheckQuery for a query compiled by the root package.
func CheckPlan(p *ubik.Plan) error { return CheckQuery(handle.Query(p)) }

// hostOptions fills Query, OnLate and OnViewLate from Plan and
// OnLateEvent, when they are set.
// Both are then cleared: the pipelines New builds for the parts of a
// query (a view's) take copies of the options with their own Query.
func hostOptions(o *Options) {
	if o.Plan != nil {
		o.Query, o.Plan = handle.Query(o.Plan), nil
	}
	on := o.OnLateEvent
	o.OnLateEvent = nil
	if on == nil || o.Query == nil {
		return
	}
	name := o.Query.Name
	// The partitions' drivers call from their own goroutines: one at a
	// time, through one set of buffers.
	var mu sync.Mutex
	var late ubik.LateEvent
	var lr drive.LateRows
	view := func(query string, ev *drive.LateEvent) {
		mu.Lock()
		defer mu.Unlock()
		on(query, lateOf(&late, &lr, ev))
	}
	o.OnViewLate = view
	o.OnLate = func(ev *drive.LateEvent) { view(name, ev) }
}

// lateOf fills ev, reusing its buffers, with the late event e as the
// root package hands one to a host.
func lateOf(ev *ubik.LateEvent, lr *drive.LateRows, e *drive.LateEvent) *ubik.LateEvent {
	key := ev.Key[:0]
	if e.Windowed {
		key = changelog.AppendKey(key, e.Key)
	}
	row := lr.Append(ev.Row[:0], e)
	*ev = ubik.LateEvent{Event: e.Event, Key: key, Row: row, Windowed: e.Windowed, EventTime: e.EventTime,
		WindowStart: e.WindowStart, WindowEnd: e.WindowEnd, Watermark: e.Watermark, Reason: e.Reason}
	return ev
}

// ParseFormat reads the message format of a source's options (format,
// delimiter, header): whether its events are CSV, or an error for options
// no source takes.
func ParseFormat(opts map[string]string) (csv bool, err error) {
	f, err := drive.ParseMessageFormat(opts)
	return f.CSV, err
}
