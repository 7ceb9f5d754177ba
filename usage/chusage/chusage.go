// Package chusage is the ClickHouse backend of the usage-event log, over the
// HTTP interface. It works on ClickHouse 18.16.1 (Debian's package) and on
// current releases.
//
// ClickHouse has no primary-key constraint, so at-most-one-row-per-key is
// enforced where the log is read, not where it is written. The table is a
// ReplacingMergeTree ordered by the deduplication key; every read (Aggregate,
// ListEvents, Get) first collapses the rows of each key to one with
// argMax(column, version), filters included (argMax(predicate, version)), and
// only then filters and sums. That collapse is computed fresh over whatever
// rows exist when the query runs, so it never waits for a background merge,
// and a merge can only remove a copy the read was already ignoring.
//
// The version, chosen to agree with PostgreSQL's INSERT ... ON CONFLICT DO
// NOTHING (the first copy wins), is the negated ingestion time in
// milliseconds, assigned by the server in MATERIALIZED columns (which a
// client cannot even send):
//
//	recorded_ms = toInt64(toUInt32(now())) * 1000          (18.16: no now64)
//	recorded_ms = toUnixTimestamp64Milli(now64(3))         (servers with now64)
//	tiebreak    = cityHash64(key, event_ms, meter, toString(quantity), dim_names, dim_kv)
//	version     = -recorded_ms * 2^21 + tiebreak mod 2^21
//
// version's high part is exactly -recorded_ms, so the earliest-ingested
// copy has the largest version; the low 21 bits break ties between copies
// ingested in the same clock tick by a hash of their content, which is
// deterministic (the same copies always pick the same winner, before and
// after a merge) but is not arrival order. What the old server's clock
// allows: now() has one-second resolution on 18.16, so there "first copy
// wins" holds between copies ingested in different seconds; within one
// second the content hash decides. Identical copies (the normal retry) tie
// harmlessly. Two copies with different facts that land in the same tick
// AND collide in the 21-bit hash (odds 2^-21 per such pair) tie exactly;
// then the read keeps the copy it meets first and a merge keeps the last
// inserted, which can differ. That takes a caller reusing one key for
// different facts, a caller bug under either backend.
//
// Write checks which keys already exist just before appending and appends
// only the absent ones, so a sequential retry never lands a second row and
// WriteResult.Duplicates is accurate; two writers racing on one key can both
// find it absent and both append, which makes Duplicates optimistic by one
// in that window. Both copies are then on disk and the read path keeps one.
// No read depends on the check.
package chusage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ubiksql/ubik/land/chhttp"
	"github.com/ubiksql/ubik/usage"
)

// Options configure a Log.
type Options struct {
	// URL is the HTTP interface, e.g. "http://127.0.0.1:8123". Required.
	// Credentials belong in User and Password, not in the URL.
	URL string
	// Database (default "default") is created if missing.
	Database string
	// Table (default "usage_events") is created if missing.
	Table string
	// User and Password are sent as X-ClickHouse-User / X-ClickHouse-Key.
	User, Password string
	// HTTPClient (default: a client with a 5-minute timeout).
	HTTPClient *http.Client
	// MaxRowsPerInsert bounds one INSERT (default 10000); a larger batch is
	// split, each part checked and appended on its own.
	MaxRowsPerInsert int
	// Logger receives debug logs (default: discard).
	Logger *slog.Logger
}

// maxIdent bounds database and table names.
const maxIdent = 64

func validIdent(s string) bool { return len(s) <= maxIdent && chhttp.ValidIdent(s) }

const (
	prefilterAuto = iota
	prefilterAlways
	prefilterNever
)

// Log is a usage.Log on ClickHouse.
type Log struct {
	c       *chhttp.Client
	db, tab string
	table   string // quoted db.table
	scope   string // server, database and table, bound into cursors (usage.Scope)
	qidPre  string // query_id prefix of this log's INSERTs
	maxRows int
	ms      bool // the server has a millisecond clock (now64)
	log     *slog.Logger
	closed  atomic.Bool
	// prefilter is prefilterAuto, or forced by tests to cover both plans.
	prefilter int
}

var _ usage.Log = (*Log)(nil)

// Open validates opts, creates the database and table if missing and
// returns the log. It never mutates opts.
func Open(ctx context.Context, opts Options) (*Log, error) {
	o := opts
	if o.URL == "" {
		return nil, fmt.Errorf("%w: URL is required", ErrInvalidOptions)
	}
	if o.Database == "" {
		o.Database = "default"
	}
	if o.Table == "" {
		o.Table = "usage_events"
	}
	if !validIdent(o.Database) || !validIdent(o.Table) {
		return nil, fmt.Errorf("%w: database %q and table %q must be plain identifiers of at most %d characters", ErrInvalidOptions, o.Database, o.Table, maxIdent)
	}
	if o.MaxRowsPerInsert == 0 {
		o.MaxRowsPerInsert = 10_000
	}
	if o.MaxRowsPerInsert < 1 || o.MaxRowsPerInsert > 1_000_000 {
		return nil, fmt.Errorf("%w: MaxRowsPerInsert %d is outside [1, 1000000]", ErrInvalidOptions, o.MaxRowsPerInsert)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Minute, Transport: chhttp.NewTransport()}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := chhttp.New(chhttp.Options{URL: o.URL, User: o.User, Password: o.Password, HTTPClient: o.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	l := &Log{
		c:       c,
		db:      o.Database,
		tab:     o.Table,
		table:   chhttp.QuoteIdent(o.Database) + "." + chhttp.QuoteIdent(o.Table),
		qidPre:  "ubik-usage-" + o.Database + "-" + o.Table + "-",
		maxRows: o.MaxRowsPerInsert,
		log:     o.Logger,
	}
	if err := l.ensureSchema(ctx); err != nil {
		return nil, &usage.StoreError{Op: "open", Err: err}
	}
	return l, nil
}

func (l *Log) ensureSchema(ctx context.Context) error {
	var n json.Number
	err := l.selectRows(ctx, `SELECT count() AS n FROM system.functions WHERE name = 'now64'`, func(d *json.Decoder) error {
		var r struct{ N json.Number }
		err := d.Decode(&r)
		n = r.N
		return err
	})
	if err != nil {
		return err
	}
	l.ms = n != "0"
	recorded := `toInt64(toUInt32(now())) * 1000`
	if l.ms {
		recorded = `toUnixTimestamp64Milli(now64(3))`
	}
	if _, err := l.c.Exec(ctx, `CREATE DATABASE IF NOT EXISTS `+chhttp.QuoteIdent(l.db), nil); err != nil {
		return err
	}
	// Partitioned by event time: copies of one key with the same event time
	// share a partition and can merge; ingestion time would scatter them.
	ddl := `CREATE TABLE IF NOT EXISTS ` + l.table + ` (
		key         String,
		event_ms    Int64,
		meter       String,
		quantity    Decimal(38, 9),
		dim_names   Array(String),
		dim_kv      Array(String),
		recorded_ms Int64  MATERIALIZED ` + recorded + `,
		tiebreak    UInt64 MATERIALIZED cityHash64(key, event_ms, meter, toString(quantity), dim_names, dim_kv),
		version     Int64  MATERIALIZED -recorded_ms * 2097152 + toInt64(tiebreak % 2097152)
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY intDiv(event_ms, 2592000000)
	ORDER BY key`
	if _, err = l.c.Exec(ctx, ddl, nil); err != nil {
		return err
	}
	// The server's host name and the table's name identify it (18.16 has
	// no table uuid).
	return l.selectRows(ctx, `SELECT hostName() AS h`, func(d *json.Decoder) error {
		var r struct{ H string }
		err := d.Decode(&r)
		l.scope = r.H + "\x00" + l.db + "\x00" + l.tab
		return err
	})
}

// Close marks the log closed. The HTTP client holds no connection that
// needs releasing beyond idle keep-alives.
func (l *Log) Close() error {
	l.closed.Store(true)
	return nil
}

// Write checks and appends the valid events; see usage.Log and the package
// comment for what Duplicates means here.
func (l *Log) Write(ctx context.Context, events []usage.Event) (usage.WriteResult, error) {
	if l.closed.Load() {
		return usage.WriteResult{}, usage.ErrClosed
	}
	b := usage.Prepare(events)
	res := usage.WriteResult{Duplicates: b.BatchDuplicate, Rejected: len(b.Invalid)}
	for start := 0; start < len(b.Rows); start += l.maxRows {
		rows := b.Rows[start:min(start+l.maxRows, len(b.Rows))]
		present, err := l.existing(ctx, rows)
		if err != nil {
			return res, &usage.StoreError{Op: "write", Err: err}
		}
		fresh := rows[:0:0]
		for _, r := range rows {
			if _, ok := present[r.Key]; ok {
				res.Duplicates++
				continue
			}
			fresh = append(fresh, r)
		}
		if err := l.insertRows(ctx, fresh); err != nil {
			return res, &usage.StoreError{Op: "write", Err: err}
		}
		res.Inserted += len(fresh)
	}
	return res, b.Err()
}

// existing returns the keys of rows that already have a copy in the table.
func (l *Log) existing(ctx context.Context, rows []usage.Row) (map[string]struct{}, error) {
	var q strings.Builder
	q.WriteString(`SELECT DISTINCT key FROM ` + l.table + ` WHERE key IN (`)
	for i, r := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(chhttp.Quote(r.Key))
	}
	q.WriteString(`)`)
	present := map[string]struct{}{}
	err := l.selectRows(ctx, q.String(), func(d *json.Decoder) error {
		var r struct{ Key string }
		if err := d.Decode(&r); err != nil {
			return err
		}
		present[r.Key] = struct{}{}
		return nil
	})
	return present, err
}

// insertRows appends rows unconditionally, in one INSERT (one part, visible
// atomically). Its query_id carries this log's prefix so ListEvents can see
// it in system.processes while it runs.
func (l *Log) insertRows(ctx context.Context, rows []usage.Row) error {
	if len(rows) == 0 {
		return nil
	}
	body := make([]byte, 0, len(rows)*128)
	for _, r := range rows {
		body = appendRow(body, r)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	settings := url.Values{"query_id": {l.qidPre + hex.EncodeToString(id[:])}}
	return l.c.Insert(ctx, `INSERT INTO `+l.table+` (key, event_ms, meter, quantity, dim_names, dim_kv) FORMAT Values`, body, settings)
}

// appendRow appends one row of INSERT ... FORMAT Values: strings through
// the one literal rule (chhttp.AppendQuote), the quantity as its
// fixed-point text, which the Values parser reads into Decimal(38, 9)
// exactly.
func appendRow(b []byte, r usage.Row) []byte {
	b = append(b, '(')
	b = chhttp.AppendQuote(b, r.Key)
	b = append(b, ',')
	b = strconv.AppendInt(b, r.Millis, 10)
	b = append(b, ',')
	b = chhttp.AppendQuote(b, r.Meter)
	b = append(b, ',')
	b = append(b, r.Quantity...)
	b = append(b, ",["...)
	for i, d := range r.Dims {
		if i > 0 {
			b = append(b, ',')
		}
		b = chhttp.AppendQuote(b, d.Name)
	}
	b = append(b, "],["...)
	for i, d := range r.Dims {
		if i > 0 {
			b = append(b, ',')
		}
		b = chhttp.AppendQuote(b, encodeDim(d.Name, d.Value))
	}
	return append(b, "])\n"...)
}

// Dimensions are stored as two parallel arrays: dim_names (to test absence)
// and dim_kv, one canonical typed entry per dimension,
//
//	name NUL code value      code: z null, b bool, n number, s string
//
// so a typed equality filter is a whole-string has() after the collapse: the
// number 5 is "d\0n5", the string "5" is "d\0s5", and an explicit null is
// "d\0z". Names and string values never contain NUL (validated), so the
// encoding is unambiguous.
func encodeDim(name string, v usage.Value) string {
	switch v.Kind() {
	case usage.KindNull:
		return name + "\x00z"
	case usage.KindBool:
		return name + "\x00b" + strconv.FormatBool(v.BoolVal())
	case usage.KindNumber:
		return name + "\x00n" + v.NumText()
	default:
		return name + "\x00s" + v.Str()
	}
}

func decodeDim(s string) (string, usage.Value, error) {
	name, rest, ok := strings.Cut(s, "\x00")
	if !ok || rest == "" {
		return "", usage.Value{}, fmt.Errorf("chusage: malformed dimension entry %q", s)
	}
	val := rest[1:]
	switch rest[0] {
	case 'z':
		return name, usage.Null(), nil
	case 'b':
		return name, usage.Bool(val == "true"), nil
	case 'n':
		// ParseNumber also reads the exponent text older versions wrote.
		v, err := usage.ParseNumber(val)
		if err != nil {
			return "", usage.Value{}, fmt.Errorf("chusage: malformed number in dimension %q: %v", name, err)
		}
		return name, v, nil
	case 's':
		return name, usage.String(val), nil
	}
	return "", usage.Value{}, fmt.Errorf("chusage: unknown dimension code in %q", s)
}

// cond is the filter on meter, event time and dimensions over the raw
// columns of one copy. It is used only to pick candidate keys (see
// collapsed); the answer itself filters on the winner.
func cond(meter string, fromMs, toMs int64, filters []usage.Filter) string {
	var p []string
	if meter != "" {
		p = append(p, "meter = "+chhttp.Quote(meter))
	}
	p = append(p, "event_ms >= "+quoteInt(fromMs), "event_ms < "+quoteInt(toMs))
	for _, f := range filters {
		p = append(p, filterPred(f))
	}
	return strings.Join(p, " AND ")
}

// filterPred is a dimension filter over the raw columns of one copy.
func filterPred(f usage.Filter) string {
	if f.Absent {
		return "NOT has(dim_names, " + chhttp.Quote(f.Dim) + ")"
	}
	return "has(dim_kv, " + chhttp.Quote(encodeDim(f.Dim, f.Value)) + ")"
}

// winnerCond filters collapsed rows: meter and time on the winner's t and
// m, and each dimension filter through its collapsed flag f0, f1, ...
func winnerCond(meter string, fromMs, toMs int64, nFilters int) string {
	var p []string
	if meter != "" {
		p = append(p, "m = "+chhttp.Quote(meter))
	}
	p = append(p, "t >= "+quoteInt(fromMs), "t < "+quoteInt(toMs))
	for i := 0; i < nFilters; i++ {
		p = append(p, "f"+strconv.Itoa(i))
	}
	return strings.Join(p, " AND ")
}

// collapsed is the one-row-per-key view every read goes through:
//
//	SELECT key, argMax(event_ms, version) AS t, argMax(meter, version) AS m, ...
//	FROM table GROUP BY key
//
// Each column is the winning copy's (largest version: earliest ingested).
// Every argMax of one key sees the same rows in the same order and uses the
// same comparison on the same version, so all of them pick the same copy,
// even on an exact version tie; one argMax per scalar column is several
// times faster on 18.16 than one argMax over a tuple. A dimension filter is
// collapsed the same way, as argMax(predicate, version) AS fN: the
// predicate evaluated on the winning copy. The outer query then filters on
// t, m and fN: collapse first, filter after.
//
// The optional candidate condition narrows which KEYS are collapsed, never
// which copies: a key is a candidate when any of its copies passes cond, and
// all copies of a candidate are collapsed. The winner of a key that the
// outer filter keeps passed cond itself, so it is a candidate: the narrowing
// cannot change an answer, it only saves collapsing keys that cannot match.
func (l *Log) collapsed(extra []string, candidate string) string {
	from := l.table
	if candidate != "" {
		from += ` WHERE key IN (SELECT key FROM ` + l.table + ` WHERE ` + candidate + `)`
	}
	cols := append([]string{"key", "argMax(event_ms, version) AS t", "argMax(meter, version) AS m", "argMax(quantity, version) AS q"}, extra...)
	return `SELECT ` + strings.Join(cols, ", ") + ` FROM ` + from + ` GROUP BY key`
}

// filterFlags returns the collapsed filter columns f0, f1, ...
func filterFlags(filters []usage.Filter) []string {
	out := make([]string, len(filters))
	for i, f := range filters {
		out[i] = "argMax(" + filterPred(f) + ", version) AS f" + strconv.Itoa(i)
	}
	return out
}

// usePrefilter decides whether narrowing to candidate keys pays: it does
// when few copies can match (a short period, a rare dimension), and it does
// not when most of the table is a candidate, where building the key set
// costs more than it saves. Either way the answer is the same.
func (l *Log) usePrefilter(ctx context.Context, candidate string) (bool, error) {
	switch l.prefilter {
	case prefilterAlways:
		return true, nil
	case prefilterNever:
		return false, nil
	}
	var r struct{ C, N json.Number }
	err := l.selectRows(ctx, `SELECT countIf(`+candidate+`) AS c, count() AS n FROM `+l.table, func(d *json.Decoder) error { return d.Decode(&r) })
	if err != nil {
		return false, err
	}
	c, _ := r.C.Int64()
	n, _ := r.N.Int64()
	return c*4 < n, nil
}

// Aggregate collapses, then filters, then sums; see usage.Log.
func (l *Log) Aggregate(ctx context.Context, q usage.AggregateQuery) (usage.Totals, error) {
	if l.closed.Load() {
		return usage.Totals{}, usage.ErrClosed
	}
	spec, err := q.Spec()
	if err != nil {
		return usage.Totals{}, err
	}
	extra := filterFlags(spec.Filters)
	sel := []string{"toInt64(0) AS bucket"}
	if spec.WindowMs > 0 {
		w := quoteInt(spec.WindowMs)
		sel[0] = "intDiv(t, " + w + ") * " + w + " AS bucket"
	}
	group := []string{"bucket"}
	for i, g := range spec.GroupBy {
		alias := "g" + strconv.Itoa(i)
		extra = append(extra, "argMax(if(has(dim_names, "+chhttp.Quote(g)+"), dim_kv[indexOf(dim_names, "+chhttp.Quote(g)+")], ''), version) AS "+alias)
		sel = append(sel, alias)
		group = append(group, alias)
	}
	// The Decimal(38,9) sum is exact while the exact total stays inside
	// the 128-bit range (about 1.7e29); beyond, the store's addition wraps.
	// The double sum only guards that range (fits): below 1.5e29 the sum
	// cannot have wrapped, and its exact text is checked for 29 integer
	// digits in usage.Finish; at or above, the exact sum has 30 digits or
	// more. The decimal goes out as a bare JSON number, never through
	// toString: 18.16's toString of a Decimal128 beyond 19 integer digits
	// writes NUL bytes in place of digits.
	sel = append(sel, "sum(q) AS s", "abs(sum(toFloat64(q))) < 1.5e29 AS fits", "count() AS c")
	candidate := cond(spec.Meter, spec.FromMs, spec.ToMs, spec.Filters)
	pre, err := l.usePrefilter(ctx, candidate)
	if err != nil {
		return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
	}
	if !pre {
		candidate = ""
	}
	query := `SELECT ` + strings.Join(sel, ", ") +
		` FROM (` + l.collapsed(extra, candidate) + `)` +
		` WHERE ` + winnerCond(spec.Meter, spec.FromMs, spec.ToMs, len(spec.Filters)) +
		` GROUP BY ` + strings.Join(group, ", ")
	var groups []usage.GroupTotals
	err = l.selectRows(ctx, query, func(d *json.Decoder) error {
		var r map[string]any
		if err := d.Decode(&r); err != nil {
			return err
		}
		var g usage.GroupTotals
		c, err := num(r["c"])
		if err != nil {
			return err
		}
		g.Count = c
		if fits, err := num(r["fits"]); err != nil || fits != 1 {
			return fmt.Errorf("%w: a group's sum reaches 1.5e29", usage.ErrSumOutOfRange)
		}
		if g.Sum, err = usage.ParseDecimal(decimalText(r["s"])); err != nil {
			return err
		}
		if spec.WindowMs > 0 {
			b, err := num(r["bucket"])
			if err != nil {
				return err
			}
			g.WindowStart = time.UnixMilli(b).UTC()
		}
		for i, name := range spec.GroupBy {
			gv := usage.GroupValue{Name: name}
			enc, _ := r["g"+strconv.Itoa(i)].(string)
			if enc != "" {
				_, v, err := decodeDim(enc)
				if err != nil {
					return err
				}
				gv.Present, gv.Value = true, v
			}
			g.Dims = append(g.Dims, gv)
		}
		groups = append(groups, g)
		return nil
	})
	if err != nil {
		return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
	}
	return usage.Finish(spec, groups)
}

func num(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("expected a number, got %T", v)
	}
	return strconv.ParseInt(string(n), 10, 64)
}

// watermark returns the ingestion time (ms) below which the set of rows is
// final: no INSERT that is still running, or that starts later, can add a
// row with recorded_ms below it.
//
// Why that holds: recorded_ms is the server's now() evaluated while an
// INSERT runs, so it is at least the INSERT's start time. An INSERT is in
// system.processes from its start until after its part is committed. So
// with S = the current second and E = the longest elapsed time of this
// log's INSERTs still running, every row that is not yet visible belongs to
// an INSERT that is running now (recorded_ms >= floor(S - E) seconds) or
// that starts later (recorded_ms >= S). min(S, floor(S - E)) is therefore a
// sound watermark. Limits: only INSERTs made by this package (recognized by
// their query_id prefix) are seen, on a single server (system.processes is
// per server), and the server clock must not step backwards.
func (l *Log) watermark(ctx context.Context) (int64, error) {
	q := `SELECT toInt64(toUInt32(now())) AS s, toFloat64(max(elapsed)) AS e, count() AS n FROM system.processes WHERE startsWith(query_id, ` + chhttp.Quote(l.qidPre) + `)`
	var wm int64
	err := l.selectRows(ctx, q, func(d *json.Decoder) error {
		var r struct {
			S, N json.Number
			E    json.Number
		}
		if err := d.Decode(&r); err != nil {
			return err
		}
		s, err := r.S.Int64()
		if err != nil {
			return err
		}
		wm = s
		if n, _ := r.N.Int64(); n > 0 {
			e, err := r.E.Float64()
			if err != nil {
				return err
			}
			wm = min(wm, int64(math.Floor(float64(s)-e)))
		}
		return nil
	})
	return wm * 1000, err
}

// ListEvents pages the collapsed events in (recorded_ms, key) order below
// the watermark; see watermark for why that never skips a row and usage.Log
// for the contract. The collapsed row of a key takes the earliest copy's
// recorded_ms, and a copy arriving later cannot be earlier, so a key's
// position never moves once it is below the watermark.
func (l *Log) ListEvents(ctx context.Context, q usage.ListQuery) (usage.Page, error) {
	if l.closed.Load() {
		return usage.Page{}, usage.ErrClosed
	}
	spec, err := q.Spec()
	if err != nil {
		return usage.Page{}, err
	}
	cur, err := usage.DecodeCursor(q.Cursor, 'c', usage.Scope(spec.Fingerprint, l.scope))
	if err != nil {
		return usage.Page{}, err
	}
	wm, err := l.watermark(ctx)
	if err != nil {
		return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
	}
	candidate := cond(spec.Meter, spec.FromMs, spec.ToMs, spec.Filters) + " AND recorded_ms < " + quoteInt(wm)
	outer := winnerCond(spec.Meter, spec.FromMs, spec.ToMs, len(spec.Filters)) + " AND rec < " + quoteInt(wm)
	if cur.Started {
		candidate += " AND recorded_ms >= " + quoteInt(cur.A)
		outer += " AND (rec > " + quoteInt(cur.A) + " OR (rec = " + quoteInt(cur.A) + " AND key > " + chhttp.Quote(cur.K) + "))"
	}
	extra := append(filterFlags(spec.Filters), "argMax(dim_kv, version) AS kv", "argMax(recorded_ms, version) AS rec")
	query := `SELECT key, t, m, q, kv, rec FROM (` + l.collapsed(extra, candidate) + `) WHERE ` + outer +
		` ORDER BY rec, key LIMIT ` + strconv.Itoa(spec.Limit)
	page := usage.Page{Events: []usage.Stored{}}
	next := cur
	next.Started = true
	err = l.selectRows(ctx, query, func(d *json.Decoder) error {
		var r struct {
			Key, M    string
			Q, T, Rec json.Number
			KV        []string
		}
		if err := d.Decode(&r); err != nil {
			return err
		}
		s, err := storedFrom(r.Key, r.T, r.M, r.Q, r.KV, r.Rec)
		if err != nil {
			return err
		}
		page.Events = append(page.Events, s)
		next.A, _ = r.Rec.Int64()
		next.K = r.Key
		return nil
	})
	if err != nil {
		return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
	}
	page.Next = next.Encode()
	return page, nil
}

// Get collapses the copies of one key. Restricting to key = k before the
// collapse is exact: the key is the collapse's own grouping, so every copy
// of k is included.
func (l *Log) Get(ctx context.Context, key string) (usage.Stored, bool, error) {
	if l.closed.Load() {
		return usage.Stored{}, false, usage.ErrClosed
	}
	query := `SELECT key, t, m, q, kv, rec FROM (SELECT key, argMax(event_ms, version) AS t, argMax(meter, version) AS m, ` +
		`argMax(quantity, version) AS q, argMax(dim_kv, version) AS kv, argMax(recorded_ms, version) AS rec FROM ` +
		l.table + ` WHERE key = ` + chhttp.Quote(key) + ` GROUP BY key)`
	var out usage.Stored
	found := false
	err := l.selectRows(ctx, query, func(d *json.Decoder) error {
		var r struct {
			Key, M    string
			Q, T, Rec json.Number
			KV        []string
		}
		if err := d.Decode(&r); err != nil {
			return err
		}
		s, err := storedFrom(r.Key, r.T, r.M, r.Q, r.KV, r.Rec)
		out, found = s, true
		return err
	})
	if err != nil {
		return usage.Stored{}, false, &usage.StoreError{Op: "get", Err: err}
	}
	return out, found, nil
}

// decimalText is the text of a decimal the server wrote as a JSON number
// (or, where a server quotes decimals, as a string).
func decimalText(v any) string {
	switch x := v.(type) {
	case json.Number:
		return string(x)
	case string:
		return x
	}
	return ""
}

func storedFrom(key string, t json.Number, meter string, qty json.Number, kv []string, rec json.Number) (usage.Stored, error) {
	ms, err := t.Int64()
	if err != nil {
		return usage.Stored{}, err
	}
	r, err := rec.Int64()
	if err != nil {
		return usage.Stored{}, err
	}
	s := usage.Stored{Key: key, Time: time.UnixMilli(ms).UTC(), Meter: meter, RecordedAt: time.UnixMilli(r).UTC(), Dims: map[string]usage.Value{}}
	if s.Quantity, err = usage.ParseDecimal(string(qty)); err != nil {
		return usage.Stored{}, err
	}
	for _, e := range kv {
		name, v, err := decodeDim(e)
		if err != nil {
			return usage.Stored{}, err
		}
		s.Dims[name] = v
	}
	return s, nil
}
