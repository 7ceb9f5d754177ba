// Package plan binds a parsed ubik SQL script to a physical plan: typed,
// compiled expressions, a window spec, aggregate calls, the key layout, the
// projection and the emit policy. The executor (package exec) runs a Query;
// it never looks at the AST.
//
// Two row layouts matter:
//
//   - the source row: the declared source's columns, by ordinal. WHERE, the
//     GROUP BY expressions and the aggregate arguments are compiled against it.
//   - the post-aggregation row (see Query.PostAggWidth): the key cells in
//     GROUP BY order, then one cell per aggregate call, then four metadata
//     cells: window_start, window_end (TIMESTAMP, NULL for a continuous view),
//     final (BOOLEAN) and revision (BIGINT). HAVING and the SELECT list are
//     compiled against it.
package plan

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/types"
)

// Expr is a compiled, typed scalar expression.
type Expr interface {
	// Type is the static result type.
	Type() types.Type
	// Eval computes the expression over row. It returns an error only for a
	// runtime failure DuckDB would also raise (a failed cast, an integer
	// overflow); a NULL result is a value, not an error.
	Eval(row []types.Value) (types.Value, error)
	// String renders the expression for explain output and messages.
	String() string
}

// Column is one column of a source.
type Column struct {
	Name string
	Type types.Type
	// JSON marks a column declared JSON: its Type is VARCHAR and the
	// decoder stores the field's raw JSON text (any JSON value, a string
	// with its quotes), for access with ->, ->> and json_extract.
	JSON bool
	// Computed, when not nil, makes this a computed column (CREATE SOURCE
	// s (..., name AS expr)): it is not read from the event; after the
	// physical columns are decoded, the computed columns are evaluated over
	// the row in declaration order, so one may read the physical columns
	// and the computed columns declared before it. Type is Computed.Type().
	Computed Expr
	// ComputedSQL is the computed column's expression as SQL text (for
	// explain and for recognizing a changed source across restarts).
	ComputedSQL string
	// Deps are the ordinals of the columns Computed reads, directly or
	// through earlier computed columns (physical and computed ones).
	Deps []int
	// TimeUnit is set for a TIMESTAMP(p) column with p < 6: 10^(6-p)
	// microseconds. Each value is rounded to a multiple of it (see
	// RoundTimestamp) when decoded. 0 or 1 keeps microseconds.
	TimeUnit int64
}

// TypeText is the column's type as declared: JSON, TIMESTAMP(p), or the type.
func (c *Column) TypeText() string {
	switch {
	case c.JSON:
		return "JSON"
	case c.TimeUnit > 1:
		p := 6
		for u := c.TimeUnit; u > 1; u /= 10 {
			p--
		}
		return fmt.Sprintf("TIMESTAMP(%d)", p)
	}
	return c.Type.String()
}

// Decl renders the column as declared: "name TYPE", or "name TYPE AS
// expr" (the expression's type) for a computed column.
func (c *Column) Decl() string {
	if c.Computed != nil {
		return c.Name + " " + c.Type.String() + " AS " + c.ComputedSQL
	}
	return c.Name + " " + c.TypeText()
}

// HasDerived reports whether any column is computed or rounded after
// decoding (the decoders then decode the physical columns and derive the
// rest; see exec.Deriver).
func (s *Source) HasDerived() bool {
	for _, c := range s.Columns {
		if c.Computed != nil || c.TimeUnit > 1 {
			return true
		}
	}
	return false
}

// RoundTimestamp rounds us (microseconds since the epoch) to a multiple of
// unit microseconds, the value of a TIMESTAMP(p) with unit = 10^(6-p): to
// the nearest multiple, a half rounding to the later instant. That is
// PostgreSQL's result for every time from 2000-01-01 on (PostgreSQL rounds
// a half away from its 2000-01-01 epoch, so before 2000 it rounds a half
// to the earlier instant); the rule here does not depend on an epoch. It
// reports false when the result leaves the TIMESTAMP range.
func RoundTimestamp(us, unit int64) (int64, bool) {
	if unit <= 1 {
		return us, true
	}
	q, r := us/unit, us%unit // truncated toward zero
	if r < 0 {
		q, r = q-1, r+unit // floor
	}
	if 2*r >= unit {
		q++
	}
	if q > types.MaxTimestamp/unit || q < types.MinTimestamp/unit {
		return 0, false
	}
	return q * unit, true
}

// Source is a declared input stream (CREATE SOURCE, or registered through the
// API).
type Source struct {
	Name    string
	Columns []Column
	// TimeCol is the ordinal of the event-time column (TIMESTAMP), or -1 when
	// the source declares none.
	TimeCol int
	// WatermarkDelay is the bounded out-of-orderness in microseconds:
	// watermark = max event time seen - WatermarkDelay.
	WatermarkDelay int64
	// Options are the WITH (...) options, keys lowercased, values verbatim
	// (format, path, connector, topic, ...).
	Options map[string]string
	// Dedup, when set, drops later copies of an event (WITH dedup_key,
	// dedup_within).
	Dedup *Dedup

	// View, when set, makes this the source a query over another query
	// of the script reads: the final rows of the windowed EMIT FINAL view
	// View (see view.go). Its columns are the view's SELECT list, its
	// event time the view's window start; it has no options and is not
	// decoded from input: hosts push the view's rows and move its
	// watermark by View.ViewWatermark.
	View *Query
	// PrimaryKey, set for a versioned table (CREATE TABLE ... PRIMARY KEY
	// (...) NOT ENFORCED), holds the ordinals of its key columns; a
	// versioned table is only joined (see TemporalJoin).
	PrimaryKey []int
}

// Dedup is a source's input deduplication: within Within microseconds of
// event time behind the watermark, only the first copy of an event with a
// given key (column Col) reaches the query.
type Dedup struct {
	Col    int
	Within int64
}

// ColumnIndex returns the ordinal of the named column (case-insensitive), or -1.
func (s *Source) ColumnIndex(name string) int {
	for i, c := range s.Columns {
		if equalFold(c.Name, name) {
			return i
		}
	}
	return -1
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// WindowKind is the shape of a window.
type WindowKind uint8

// Window kinds.
const (
	Tumble WindowKind = iota + 1
	Hop
	Session
)

func (k WindowKind) String() string {
	switch k {
	case Tumble:
		return "TUMBLE"
	case Hop:
		return "HOP"
	case Session:
		return "SESSION"
	}
	return "WINDOW?"
}

// Window describes the window of a windowed query. All durations are
// microseconds and fixed (no month intervals).
type Window struct {
	Kind    WindowKind
	TimeCol int   // source ordinal of the TIMESTAMP column windows are over
	Size    int64 // TUMBLE and HOP: window length
	Slide   int64 // HOP: distance between window starts (Size for TUMBLE)
	Gap     int64 // SESSION: the quiet span that closes a session
}

// MaxHopWindowsPerEvent bounds a HOP's size/slide ratio: the number of
// windows each event falls into. Every event updates that many windows and
// every group keeps that many open, so the ratio multiplies both the work
// per event and the state. 10,000 admits the usual shapes (1 hour every
// second is 3,600 windows, 1 day every minute 1,440, 1 week every hour 168)
// and refuses the ones that exhaust memory (1 day every second is 86,400).
const MaxHopWindowsPerEvent = 10_000

// WindowsPerEvent returns how many windows an event falls into at most:
// ceil(size/slide) for HOP, 1 for TUMBLE and SESSION.
func (w *Window) WindowsPerEvent() int64 {
	if w.Kind != Hop || w.Slide <= 0 {
		return 1
	}
	n := w.Size / w.Slide
	if w.Size%w.Slide != 0 {
		n++
	}
	return n
}

// KeyKind says what a key term is.
type KeyKind uint8

// Key term kinds.
const (
	KeyExpr        KeyKind = iota // an expression over the source row
	KeyWindowStart                // the window start (legacy TUMBLE(...) term, or TVF window_start)
	KeyWindowEnd                  // the window end (TVF window_end)
)

// KeyTerm is one GROUP BY term, in GROUP BY order. Its position in
// Query.Keys is its position in the key array.
type KeyTerm struct {
	Kind KeyKind
	Expr Expr   // for KeyExpr
	Name string // display name (the GROUP BY text), for explain
}

// AggCall is one aggregate call. Identical calls in the query share one
// AggCall.
type AggCall struct {
	// Func is the lowercase canonical name: "count_star", "count", "sum",
	// "min", "max", "avg", "min_by", "max_by", "first", "last", "var_samp",
	// "var_pop", "stddev_samp", "stddev_pop", "bool_and", "bool_or",
	// "approx_count_distinct", "approx_quantile" (aliases are resolved).
	Func string
	// Args are over the source row; empty for count_star. min_by/max_by
	// take (arg, val); first/last take (x, event time), the event time
	// added by the binder.
	Args     []Expr
	Distinct bool
	// Filter is FILTER (WHERE cond) over the source row: the aggregate sees
	// only rows for which it is true. nil without FILTER.
	Filter Expr
	// Param is a constant parameter: approx_quantile's fraction (DOUBLE).
	Param types.Value
	// Type is the result type, following DuckDB: count -> BIGINT;
	// sum(INTEGER|BIGINT|HUGEINT) -> HUGEINT; sum(DOUBLE) -> DOUBLE;
	// sum(DECIMAL(p,s)) -> DECIMAL(38,s); avg, var_*, stddev_* -> DOUBLE;
	// min/max/min_by/max_by/first/last/approx_quantile -> the (first)
	// argument's type; bool_and/bool_or -> BOOLEAN; approx_count_distinct ->
	// BIGINT.
	Type types.Type
	Name string // display text, for explain
}

// EmitMode is when a windowed query publishes.
type EmitMode uint8

// Emit modes.
const (
	// EmitFinal publishes each (group, window) once, when it closes.
	EmitFinal EmitMode = iota
	// EmitEarly publishes every EarlyEvery of processing time the whole
	// current value of each (group, window) touched since the last emission,
	// then the final value when it closes.
	EmitEarly
	// EmitChanges publishes on every change (continuous views' default).
	EmitChanges
)

// MinEarlyEvery is the shortest EMIT EARLY interval, in microseconds
// (10 ms). Each interval wakes the query even when no event came: at 1 µs
// an idle run took a whole core, at 10 ms under 2% of one, and records
// more often than 100 per second per key serve no reader.
const MinEarlyEvery = 10_000

// Emit is the emission policy.
type Emit struct {
	Mode       EmitMode
	EarlyEvery int64 // microseconds of processing time, EmitEarly only
	// AllowedLateness (microseconds): a window is final when the watermark
	// passes its end plus this.
	AllowedLateness int64
}

// OutputColumn is one SELECT list entry.
type OutputColumn struct {
	Name string
	Expr Expr // over the post-aggregation row
}

// Query is one compiled aggregating query.
type Query struct {
	Name   string
	SQL    string // the query's own text, for messages
	Source *Source
	Filter Expr    // WHERE over the source row; nil when absent
	Window *Window // nil for a continuous view
	Keys   []KeyTerm
	Aggs   []AggCall
	Having Expr // over the post-aggregation row; nil when absent
	Select []OutputColumn
	Emit   Emit
	// SelectReadsRevision is set by the binder when a SELECT column reads
	// REVISION(): the value then changes with every record, and the
	// operator compares values with the revision fixed.
	SelectReadsRevision bool
	// UsedColumns marks the source columns the query reads (expressions,
	// the window, the event time, the dedup key); the decoder converts only
	// those. Nil means all.
	UsedColumns []bool
	// Output names where the changelog goes ("" = the default output). Two
	// queries of one program with the same Output are rejected by Compile.
	Output string
	// Join, when set, is the temporal join the query reads: Source is then
	// the joined row (see TemporalJoin).
	Join *TemporalJoin
	// IJoin, when set, is the interval join of two streams the query
	// reads: Source is then the joined row (see IntervalJoin).
	IJoin *IntervalJoin
}

// Offsets into the post-aggregation row.
func (q *Query) AggOffset() int       { return len(q.Keys) }
func (q *Query) WindowStartSlot() int { return len(q.Keys) + len(q.Aggs) }
func (q *Query) WindowEndSlot() int   { return len(q.Keys) + len(q.Aggs) + 1 }
func (q *Query) FinalSlot() int       { return len(q.Keys) + len(q.Aggs) + 2 }
func (q *Query) RevisionSlot() int    { return len(q.Keys) + len(q.Aggs) + 3 }
func (q *Query) PostAggWidth() int    { return len(q.Keys) + len(q.Aggs) + 4 }
func (q *Query) Windowed() bool       { return q.Window != nil }
func (q *Query) WindowPositions() []int {
	var p []int
	for i, k := range q.Keys {
		if k.Kind != KeyExpr {
			p = append(p, i)
		}
	}
	return p
}

// Sink is a CREATE SINK name FROM query WITH (...) statement: it names the
// output a query's changelog goes to (Query.Output is the sink's Name).
type Sink struct {
	Name  string
	Query string // the name of the query that writes to it
	// Options are the WITH (...) options, keys lowercased, values verbatim.
	Options map[string]string
}

// Program is a compiled script: its sources, its queries and its sinks.
type Program struct {
	Sources []*Source
	Queries []*Query
	Sinks   []*Sink
}
