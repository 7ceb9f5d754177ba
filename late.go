package ubik

import (
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/exec"
)

// LateEvent is an event that arrived for a window already final (or a
// versioned table row behind the table's watermark). It is handed to
// QueryOptions.OnLate, OnLateTable or OnViewLate; its byte slices are
// valid only during the call (copy them to keep them).
type LateEvent struct {
	// Event is the input record as given to Push or Feed; nil for a row
	// given to PushRow.
	Event []byte
	// Key is the contract key (the changelog's key bytes) of the (group,
	// window) the event was for, when Windowed.
	Key      []byte
	Windowed bool
	// Row is the event's declared columns as a JSON object by name, its
	// cells rendered as the changelog renders them; when the event's
	// source is not known (a row given to PushRow, a view's row) it is the
	// row as the query read it, a JSON array.
	Row []byte
	// EventTime, WindowStart, WindowEnd and Watermark are in microseconds
	// since the Unix epoch; the window's bounds only when Windowed.
	EventTime, WindowStart, WindowEnd, Watermark int64
	// Reason says why the event is late, in words.
	Reason string
}

// lateHook adapts a host's late-event callback to the operator's. The
// returned function reuses one LateEvent and its buffers: a callback
// keeps nothing past its call.
func lateHook(f func(*LateEvent)) func(*exec.LateEvent) {
	if f == nil {
		return nil
	}
	var ev LateEvent
	var key, row []byte
	var rows drive.LateRows
	return func(e *exec.LateEvent) {
		key = key[:0]
		if e.Windowed {
			key = changelog.AppendKey(key, e.Key)
		}
		row = rows.Append(row[:0], e)
		ev = LateEvent{Event: e.Event, Key: key, Row: row, Windowed: e.Windowed, EventTime: e.EventTime,
			WindowStart: e.WindowStart, WindowEnd: e.WindowEnd, Watermark: e.Watermark, Reason: e.Reason}
		f(&ev)
	}
}

// viewLateHook is lateHook for a graph's views, which name their query.
func viewLateHook(f func(string, *LateEvent)) func(string, *exec.LateEvent) {
	if f == nil {
		return nil
	}
	hooks := map[string]func(*exec.LateEvent){}
	return func(query string, e *exec.LateEvent) {
		h := hooks[query]
		if h == nil {
			h = lateHook(func(ev *LateEvent) { f(query, ev) })
			hooks[query] = h
		}
		h(e)
	}
}
