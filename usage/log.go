package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Log is the usage-event log. Implementations are safe for concurrent use.
type Log interface {
	// Write stores events. A key already in the log, or repeated earlier in
	// the same batch, is a duplicate and does not add a logical row. Invalid
	// events are rejected with a *BatchError naming each one by index; they
	// never block the valid events of the batch, which are written and
	// counted in the result returned alongside that error.
	Write(ctx context.Context, events []Event) (WriteResult, error)
	// Aggregate sums and counts the logical events of one meter whose time
	// lies in [From, To), exact as of the moment it runs.
	Aggregate(ctx context.Context, q AggregateQuery) (Totals, error)
	// ListEvents returns one page of logical events in ingestion order. A
	// reader that follows Page.Next sees every row exactly once, including
	// rows written while it pages.
	ListEvents(ctx context.Context, q ListQuery) (Page, error)
	// Get returns the logical event stored under key.
	Get(ctx context.Context, key string) (Stored, bool, error)
	// Close releases the store connection.
	Close() error
}

// WriteResult counts what a Write did with its valid events.
type WriteResult struct {
	// Inserted is the number of events that added a logical row.
	Inserted int
	// Duplicates is the number of valid events whose key was already in the
	// log or earlier in the batch. On PostgreSQL it is exact. On ClickHouse
	// it comes from a check made just before the append, so two writers
	// racing on one key can both count it as inserted (optimistic by one per
	// race); no read depends on it.
	Duplicates int
	// Rejected is the number of invalid events (listed in the *BatchError).
	Rejected int
}

// Filter is a typed equality on one dimension, or a test that it is absent.
type Filter struct {
	Dim string
	// Absent selects events that do not carry Dim at all. When false, the
	// dimension must be present and typed-equal to Value (Null() matches
	// only an explicit null).
	Absent bool
	Value  Value
}

// Eq is the filter "dimension dim is present and typed-equal to v".
func Eq(dim string, v Value) Filter { return Filter{Dim: dim, Value: v} }

// Absent is the filter "dimension dim is missing".
func Absent(dim string) Filter { return Filter{Dim: dim, Absent: true} }

// Matches applies the filter to a dimension map (used by tests and by
// callers that post-filter).
func (f Filter) Matches(dims map[string]Value) bool {
	v, ok := dims[f.Dim]
	if f.Absent {
		return !ok
	}
	return ok && v.Equal(f.Value)
}

// Limits on queries.
const (
	MaxFilters      = 32
	MaxGroupBy      = 8
	MaxBuckets      = 100_000
	DefaultPageSize = 100
	MaxPageSize     = 10_000
)

// AggregateQuery asks for the sum and count of one meter over [From, To).
type AggregateQuery struct {
	Meter string
	// From and To bound the event time, half-open: From <= t < To. They are
	// compared at millisecond resolution, rounding a bound with a sub-millisecond
	// part up, so consecutive periods [a, b) and [b, c) tile exactly.
	From, To time.Time
	Filters  []Filter // all must match
	// GroupBy names dimensions to group by; a missing dimension is its own
	// group (GroupValue.Present false), distinct from an explicit null.
	GroupBy []string
	// Window, when non-zero, splits the totals into tumbling windows of this
	// size aligned to the Unix epoch (like Flink's TUMBLE with no offset). It
	// must be a whole number of milliseconds.
	Window time.Duration
}

// Totals is an aggregate's answer. Sum and Count cover the whole query;
// Groups break them down when GroupBy or Window is set, ordered by window
// start and then by group values (missing < null < bool < number < string).
type Totals struct {
	Sum    Decimal       `json:"sum"`
	Count  int64         `json:"count"`
	Groups []GroupTotals `json:"groups,omitempty"`
}

// GroupTotals is one group of an aggregate.
type GroupTotals struct {
	WindowStart time.Time    `json:"-"`
	Dims        []GroupValue `json:"dims,omitempty"`
	Sum         Decimal      `json:"sum"`
	Count       int64        `json:"count"`
}

// GroupValue is the value of one GroupBy dimension in a group.
type GroupValue struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	Value   Value  `json:"value"`
}

// ListQuery selects the events ListEvents pages through.
type ListQuery struct {
	Meter    string    // "" for every meter
	From, To time.Time // event time in [From, To); zero From = the beginning, zero To = no bound
	Filters  []Filter
	Cursor   string // "" for the first page, then Page.Next
	Limit    int    // page size; 0 = DefaultPageSize, at most MaxPageSize
}

// Page is one page of ListEvents.
type Page struct {
	Events []Stored `json:"events"`
	// Next resumes after the last event of this page. It is never empty: at
	// the end of what is visible it still marks the position, so a reader
	// can poll it later for rows written since. A page shorter than the limit
	// means the reader has caught up with the visibility watermark.
	Next string `json:"next"`
}

// AggregateSpec is a validated AggregateQuery in store terms.
type AggregateSpec struct {
	Meter    string
	FromMs   int64
	ToMs     int64
	Filters  []Filter
	GroupBy  []string
	WindowMs int64 // 0 = no window
}

// Spec validates the query.
func (q AggregateQuery) Spec() (AggregateSpec, error) {
	if q.Meter == "" {
		return AggregateSpec{}, fmt.Errorf("%w: meter is required", ErrInvalidQuery)
	}
	if err := checkText(q.Meter, MaxMeterBytes); err != nil {
		return AggregateSpec{}, fmt.Errorf("%w: meter: %v", ErrInvalidQuery, err)
	}
	if q.From.IsZero() || q.To.IsZero() {
		return AggregateSpec{}, fmt.Errorf("%w: from and to are both required", ErrInvalidQuery)
	}
	if q.To.Before(q.From) {
		return AggregateSpec{}, fmt.Errorf("%w: to (%s) is before from (%s)", ErrInvalidQuery, FormatTime(q.To), FormatTime(q.From))
	}
	s := AggregateSpec{Meter: q.Meter, FromMs: BoundMillis(q.From), ToMs: BoundMillis(q.To)}
	var err error
	if s.Filters, err = checkFilters(q.Filters); err != nil {
		return AggregateSpec{}, err
	}
	if len(q.GroupBy) > MaxGroupBy {
		return AggregateSpec{}, fmt.Errorf("%w: %d group-by dimensions, at most %d", ErrInvalidQuery, len(q.GroupBy), MaxGroupBy)
	}
	seen := map[string]bool{}
	for _, g := range q.GroupBy {
		if err := checkDimName(g); err != nil {
			return AggregateSpec{}, fmt.Errorf("%w: group by: %v", ErrInvalidQuery, err)
		}
		if seen[g] {
			return AggregateSpec{}, fmt.Errorf("%w: group by %q twice", ErrInvalidQuery, g)
		}
		seen[g] = true
	}
	s.GroupBy = append([]string(nil), q.GroupBy...)
	if q.Window != 0 {
		if q.Window < time.Millisecond || q.Window%time.Millisecond != 0 {
			return AggregateSpec{}, fmt.Errorf("%w: window %s is not a positive whole number of milliseconds", ErrInvalidQuery, q.Window)
		}
		s.WindowMs = q.Window.Milliseconds()
		first := s.FromMs / s.WindowMs
		last := (s.ToMs - 1) / s.WindowMs
		if s.ToMs > s.FromMs && last-first+1 > MaxBuckets {
			return AggregateSpec{}, fmt.Errorf("%w: window %s over this interval gives %d buckets, at most %d", ErrInvalidQuery, q.Window, last-first+1, MaxBuckets)
		}
	}
	return s, nil
}

// ListSpec is a validated ListQuery in store terms.
type ListSpec struct {
	Meter       string
	FromMs      int64
	ToMs        int64 // exclusive; MaxMillis when unbounded
	Filters     []Filter
	Limit       int
	Fingerprint uint64 // identifies the query, bound into cursors
}

// Spec validates the query (the cursor is decoded by the backend).
func (q ListQuery) Spec() (ListSpec, error) {
	if q.Meter != "" {
		if err := checkText(q.Meter, MaxMeterBytes); err != nil {
			return ListSpec{}, fmt.Errorf("%w: meter: %v", ErrInvalidQuery, err)
		}
	}
	s := ListSpec{Meter: q.Meter, FromMs: BoundMillis(q.From), ToMs: MaxMillis}
	if !q.To.IsZero() {
		s.ToMs = BoundMillis(q.To)
	}
	if s.ToMs < s.FromMs {
		return ListSpec{}, fmt.Errorf("%w: to (%s) is before from (%s)", ErrInvalidQuery, FormatTime(q.To), FormatTime(q.From))
	}
	var err error
	if s.Filters, err = checkFilters(q.Filters); err != nil {
		return ListSpec{}, err
	}
	switch {
	case q.Limit == 0:
		s.Limit = DefaultPageSize
	case q.Limit < 0 || q.Limit > MaxPageSize:
		return ListSpec{}, fmt.Errorf("%w: limit %d is outside [1, %d]", ErrInvalidQuery, q.Limit, MaxPageSize)
	default:
		s.Limit = q.Limit
	}
	s.Fingerprint = fingerprint(s)
	return s, nil
}

func checkFilters(fs []Filter) ([]Filter, error) {
	if len(fs) > MaxFilters {
		return nil, fmt.Errorf("%w: %d filters, at most %d", ErrInvalidQuery, len(fs), MaxFilters)
	}
	out := make([]Filter, len(fs))
	for i, f := range fs {
		if err := checkDimName(f.Dim); err != nil {
			return nil, fmt.Errorf("%w: filter %d: %v", ErrInvalidQuery, i, err)
		}
		if !f.Absent {
			if err := checkValue(f.Value); err != nil {
				return nil, fmt.Errorf("%w: filter %d on %q: %v", ErrInvalidQuery, i, f.Dim, err)
			}
		}
		out[i] = f
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Dim < out[j].Dim })
	return out, nil
}

// SortGroups puts groups in the documented order so that every backend
// reports them identically.
func SortGroups(gs []GroupTotals) {
	sort.SliceStable(gs, func(i, j int) bool {
		a, b := gs[i], gs[j]
		if !a.WindowStart.Equal(b.WindowStart) {
			return a.WindowStart.Before(b.WindowStart)
		}
		for k := range a.Dims {
			if c := compareGroupValue(a.Dims[k], b.Dims[k]); c != 0 {
				return c < 0
			}
		}
		return false
	})
}

func compareGroupValue(a, b GroupValue) int {
	switch {
	case !a.Present && !b.Present:
		return 0
	case !a.Present:
		return -1
	case !b.Present:
		return 1
	}
	return a.Value.Compare(b.Value)
}

// MarshalJSON omits the value of a missing dimension.
func (g GroupValue) MarshalJSON() ([]byte, error) {
	if !g.Present {
		return json.Marshal(struct {
			Name    string `json:"name"`
			Present bool   `json:"present"`
		}{g.Name, false})
	}
	return json.Marshal(struct {
		Name    string `json:"name"`
		Present bool   `json:"present"`
		Value   Value  `json:"value"`
	}{g.Name, true, g.Value})
}
