// Package pgusage is the PostgreSQL backend of the usage-event log.
//
// The deduplication key is the table's primary key, so
// INSERT ... ON CONFLICT (key) DO NOTHING makes a retry a no-op inside one
// atomic statement: the first copy to commit wins and the guarantee holds the
// instant Write returns. The ingestion time is the database clock (now()),
// never the client's.
//
// ListEvents pages in (transaction id, sequence) order below a visibility
// watermark; see ListEvents for why that never skips a row that commits late.
package pgusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubiksql/ubik/usage"
)

// Options configure a Log. The zero value of every field but DSN is a
// documented default.
type Options struct {
	// DSN is the PostgreSQL connection string. Required unless Pool is set.
	DSN string
	// Pool, when set, is used instead of opening one from DSN; Close does not
	// close it.
	Pool *pgxpool.Pool
	// Table is the table name (default "usage_events"): lower-case letters,
	// digits and underscores, starting with a letter or underscore, at most
	// 48 bytes (room for the index-name suffixes).
	Table string
	// Schema, when set, qualifies the table (same rules as Table).
	Schema string
	// MaxRowsPerStatement bounds one INSERT (default 5000); a larger batch is
	// split into several statements, each atomic on its own.
	MaxRowsPerStatement int
	// Logger receives debug logs (default: discard).
	Logger *slog.Logger
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Log is a usage.Log on PostgreSQL.
type Log struct {
	pool     *pgxpool.Pool
	ownsPool bool
	table    string // quoted, possibly schema-qualified
	scope    string // the table's identity, bound into cursors (usage.Scope)
	maxRows  int
	log      *slog.Logger
	closed   atomic.Bool
}

var _ usage.Log = (*Log)(nil)

// Open connects, creates the table and indexes if missing, and returns the
// log. It never mutates opts.
func Open(ctx context.Context, opts Options) (*Log, error) {
	o := opts
	if o.Table == "" {
		o.Table = "usage_events"
	}
	if !identRE.MatchString(o.Table) {
		return nil, fmt.Errorf("%w: table %q must match %s", ErrInvalidOptions, o.Table, identRE)
	}
	if o.Schema != "" && !identRE.MatchString(o.Schema) {
		return nil, fmt.Errorf("%w: schema %q must match %s", ErrInvalidOptions, o.Schema, identRE)
	}
	if o.MaxRowsPerStatement == 0 {
		o.MaxRowsPerStatement = 5000
	}
	if o.MaxRowsPerStatement < 1 || o.MaxRowsPerStatement > 100_000 {
		return nil, fmt.Errorf("%w: MaxRowsPerStatement %d is outside [1, 100000]", ErrInvalidOptions, o.MaxRowsPerStatement)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{pool: o.Pool, maxRows: o.MaxRowsPerStatement, log: o.Logger}
	l.table = `"` + o.Table + `"`
	if o.Schema != "" {
		l.table = `"` + o.Schema + `".` + l.table
	}
	if l.pool == nil {
		if o.DSN == "" {
			return nil, fmt.Errorf("%w: DSN or Pool is required", ErrInvalidOptions)
		}
		cfg, err := pgxpool.ParseConfig(o.DSN)
		if err != nil {
			// pgx's parse error can echo the DSN, password included: keep it out.
			return nil, fmt.Errorf("%w: DSN does not parse", ErrInvalidOptions)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, &usage.StoreError{Op: "open", Err: err}
		}
		l.pool, l.ownsPool = pool, true
	}
	if err := l.ensureSchema(ctx, o.Table); err != nil {
		l.Close()
		return nil, &usage.StoreError{Op: "open", Err: err}
	}
	return l, nil
}

// ensureSchema creates the table under an advisory lock, because two
// processes running CREATE TABLE IF NOT EXISTS at once can still collide on
// the catalog's unique indexes.
func (l *Log) ensureSchema(ctx context.Context, name string) error {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "ubik.usage."+l.table); err != nil {
		return err
	}
	stmts := []string{
		// key is the deduplication key and the primary key. recorded_at, xid
		// and seq are assigned by the server and never sent by the client.
		`CREATE TABLE IF NOT EXISTS ` + l.table + ` (
			key         text PRIMARY KEY,
			event_ms    bigint NOT NULL,
			meter       text NOT NULL,
			quantity    numeric(38,9) NOT NULL,
			dims        jsonb NOT NULL,
			recorded_at timestamptz NOT NULL DEFAULT now(),
			xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
			seq         bigint GENERATED ALWAYS AS IDENTITY
		)`,
		`CREATE INDEX IF NOT EXISTS "` + name + `_meter_time" ON ` + l.table + ` (meter, event_ms)`,
		`CREATE INDEX IF NOT EXISTS "` + name + `_position" ON ` + l.table + ` (xid, seq)`,
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	// The database and the table's oid identify it: a table of the same
	// name elsewhere, or dropped and created again, is another table.
	var db, oid string
	if err := tx.QueryRow(ctx, `SELECT current_database(), $1::regclass::oid::text`, l.table).Scan(&db, &oid); err != nil {
		return err
	}
	l.scope = db + "\x00" + oid + "\x00" + l.table
	return tx.Commit(ctx)
}

// Close releases the pool if Open created it.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.ownsPool && l.pool != nil {
		l.pool.Close()
	}
	return nil
}

// Write inserts the valid events; see usage.Log.
func (l *Log) Write(ctx context.Context, events []usage.Event) (usage.WriteResult, error) {
	if l.closed.Load() {
		return usage.WriteResult{}, usage.ErrClosed
	}
	b := usage.Prepare(events)
	res := usage.WriteResult{Duplicates: b.BatchDuplicate, Rejected: len(b.Invalid)}
	// Writers that insert the same keys in different orders each lock a key
	// the other then waits for: a deadlock. In one order (by key) they only
	// ever wait, never in a cycle.
	sorted := slices.Clone(b.Rows)
	slices.SortFunc(sorted, func(x, y usage.Row) int { return strings.Compare(x.Key, y.Key) })
	for start := 0; start < len(sorted); start += l.maxRows {
		rows := sorted[start:min(start+l.maxRows, len(sorted))]
		n, err := retry(ctx, maxWriteAttempts, func() (int, error) { return l.insert(ctx, rows) })
		if err != nil {
			return res, &usage.StoreError{Op: "write", Err: err}
		}
		res.Inserted += n
		res.Duplicates += len(rows) - n
	}
	return res, b.Err()
}

func (l *Log) insert(ctx context.Context, rows []usage.Row) (int, error) {
	keys := make([]string, len(rows))
	ms := make([]int64, len(rows))
	meters := make([]string, len(rows))
	qty := make([]string, len(rows))
	dims := make([]string, len(rows))
	for i, r := range rows {
		keys[i], ms[i], meters[i], qty[i] = r.Key, r.Millis, r.Meter, r.Quantity
		d, err := dimsJSON(r.Dims)
		if err != nil {
			return 0, err
		}
		dims[i] = d
	}
	// One statement: ON CONFLICT DO NOTHING makes every key that already
	// exists (or that a concurrent transaction commits first) a no-op, and
	// RETURNING counts exactly the rows that landed.
	tag, err := l.pool.Exec(ctx, `INSERT INTO `+l.table+` (key, event_ms, meter, quantity, dims)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::numeric[], $5::jsonb[])
		ON CONFLICT (key) DO NOTHING`, keys, ms, meters, qty, dims)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

func dimsJSON(dims []usage.Dim) (string, error) {
	m := make(map[string]usage.Value, len(dims))
	for _, d := range dims {
		m[d.Name] = d.Value
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// where builds the shared WHERE clause: meter, event-time bounds, filters.
// Equality filters become one jsonb containment (typed: 5 does not contain
// "5", and {"d":null} matches only an explicit null); Absent filters test
// that the key is not there.
type args struct{ v []any }

func (a *args) add(x any) string {
	a.v = append(a.v, x)
	return "$" + strconv.Itoa(len(a.v))
}

func whereClause(a *args, meter string, fromMs, toMs int64, filters []usage.Filter) (string, error) {
	var c []string
	if meter != "" {
		c = append(c, "meter = "+a.add(meter))
	}
	c = append(c, "event_ms >= "+a.add(fromMs), "event_ms < "+a.add(toMs))
	eq := map[string]usage.Value{}
	for _, f := range filters {
		if f.Absent {
			c = append(c, "NOT (dims ? "+a.add(f.Dim)+")")
			continue
		}
		if prev, ok := eq[f.Dim]; ok && !prev.Equal(f.Value) {
			c = append(c, "false") // two different values for one dimension
			continue
		}
		eq[f.Dim] = f.Value
	}
	if len(eq) > 0 {
		b, err := json.Marshal(eq)
		if err != nil {
			return "", err
		}
		c = append(c, "dims @> "+a.add(string(b))+"::jsonb")
	}
	return strings.Join(c, " AND "), nil
}

// Aggregate sums and counts; see usage.Log. Every row is a logical event
// (the primary key admits no second copy), so a plain SUM is exact.
func (l *Log) Aggregate(ctx context.Context, q usage.AggregateQuery) (usage.Totals, error) {
	if l.closed.Load() {
		return usage.Totals{}, usage.ErrClosed
	}
	spec, err := q.Spec()
	if err != nil {
		return usage.Totals{}, err
	}
	var a args
	var sel, group []string
	if spec.WindowMs > 0 {
		w := a.add(spec.WindowMs)
		sel = append(sel, "(event_ms / "+w+"::bigint) * "+w+"::bigint")
		group = append(group, "1")
	} else {
		sel = append(sel, "0::bigint")
	}
	for i, g := range spec.GroupBy {
		sel = append(sel, "(dims -> "+a.add(g)+")::text")
		group = append(group, strconv.Itoa(i+2))
	}
	where, err := whereClause(&a, spec.Meter, spec.FromMs, spec.ToMs, spec.Filters)
	if err != nil {
		return usage.Totals{}, err
	}
	sql := "SELECT " + strings.Join(sel, ", ") + ", coalesce(sum(quantity), 0)::text, count(*) FROM " + l.table + " WHERE " + where
	if len(group) > 0 {
		sql += " GROUP BY " + strings.Join(group, ", ")
	}
	rows, err := l.pool.Query(ctx, sql, a.v...)
	if err != nil {
		return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
	}
	defer rows.Close()
	var groups []usage.GroupTotals
	for rows.Next() {
		vals := make([]any, 0, len(spec.GroupBy)+3)
		var bucket int64
		gv := make([]*string, len(spec.GroupBy))
		var sum string
		var count int64
		vals = append(vals, &bucket)
		for i := range gv {
			vals = append(vals, &gv[i])
		}
		vals = append(vals, &sum, &count)
		if err := rows.Scan(vals...); err != nil {
			return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
		}
		if count == 0 && len(group) == 0 {
			continue // the no-group query always returns one row
		}
		g := usage.GroupTotals{Count: count}
		if spec.WindowMs > 0 {
			g.WindowStart = time.UnixMilli(bucket).UTC()
		}
		if g.Sum, err = usage.ParseDecimal(sum); err != nil {
			return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
		}
		for i, s := range gv {
			v := usage.GroupValue{Name: spec.GroupBy[i]}
			if s != nil {
				v.Present = true
				if err := json.Unmarshal([]byte(*s), &v.Value); err != nil {
					return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
				}
			}
			g.Dims = append(g.Dims, v)
		}
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return usage.Totals{}, &usage.StoreError{Op: "aggregate", Err: err}
	}
	return usage.Finish(spec, groups)
}

// ListEvents pages in (xid, seq) order; see usage.Log.
//
// Why this never skips a row that commits late: seq comes from an identity
// sequence, handed out when a row is inserted, not when its transaction
// commits, so a keyset cursor over seq alone would skip a row whose
// transaction took seq 10 but committed after a reader had already returned
// seq 11. Instead every row carries the id of the transaction that inserted
// it (xid, a 64-bit xid8 that never wraps), and a page only returns rows
// whose xid is below the xmin of the statement's own snapshot. Every
// transaction with an id below xmin has finished, so that set of rows is
// final: no transaction that is still running, or that starts later, can add
// a row with a smaller xid (running ones have xid >= xmin; new ones get a
// larger id). Ordering by (xid, seq) and resuming strictly after the last
// (xid, seq) returned therefore neither skips nor repeats. The cost: a row
// becomes listable only once every transaction older than its own has ended,
// so a long-running transaction anywhere on the server holds the listing
// back (never the aggregates) until it ends.
func (l *Log) ListEvents(ctx context.Context, q usage.ListQuery) (usage.Page, error) {
	if l.closed.Load() {
		return usage.Page{}, usage.ErrClosed
	}
	spec, err := q.Spec()
	if err != nil {
		return usage.Page{}, err
	}
	cur, err := usage.DecodeCursor(q.Cursor, 'p', usage.Scope(spec.Fingerprint, l.scope))
	if err != nil {
		return usage.Page{}, err
	}
	var a args
	where, err := whereClause(&a, spec.Meter, spec.FromMs, spec.ToMs, spec.Filters)
	if err != nil {
		return usage.Page{}, err
	}
	// The watermark comes from the same statement, so it and the rows it
	// admits are read from one snapshot.
	sql := `WITH w AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
		SELECT w.xmin::text, e.xid::text, e.seq, e.key, e.event_ms, e.meter, e.quantity::text, e.dims::text, e.recorded_at
		FROM w LEFT JOIN LATERAL (
			SELECT * FROM ` + l.table + `
			WHERE xid < w.xmin AND (xid, seq) > (` + a.add(strconv.FormatInt(cur.A, 10)) + `::text::xid8, ` + a.add(cur.B) + `::bigint)
			AND ` + where + `
			ORDER BY xid, seq LIMIT ` + a.add(spec.Limit) + `
		) e ON true`
	rows, err := l.pool.Query(ctx, sql, a.v...)
	if err != nil {
		return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
	}
	defer rows.Close()
	page := usage.Page{Events: []usage.Stored{}}
	next := cur
	next.Started = true
	var xmin int64
	for rows.Next() {
		var xminS string
		var xidS, key, meter, qty, dims *string
		var seq, ms *int64
		var rec *time.Time
		if err := rows.Scan(&xminS, &xidS, &seq, &key, &ms, &meter, &qty, &dims, &rec); err != nil {
			return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
		}
		if xmin, err = strconv.ParseInt(xminS, 10, 64); err != nil {
			return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
		}
		if xidS == nil {
			continue // no row: the LEFT JOIN still returned the watermark
		}
		s, err := storedFrom(*key, *ms, *meter, *qty, *dims, *rec)
		if err != nil {
			return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
		}
		page.Events = append(page.Events, s)
		x, err := strconv.ParseInt(*xidS, 10, 64)
		if err != nil {
			return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
		}
		next.A, next.B = x, *seq
	}
	if err := rows.Err(); err != nil {
		return usage.Page{}, &usage.StoreError{Op: "list", Err: err}
	}
	if len(page.Events) < spec.Limit && xmin > 0 {
		// Caught up: every row below the watermark has been seen, so the
		// next page may start at the watermark and skip re-reading the
		// final rows this query did not match.
		if p := xmin - 1; p > next.A || (p == next.A && next.B < 1<<62) {
			next.A, next.B = p, 1<<62
		}
	}
	page.Next = next.Encode()
	return page, nil
}

// Get returns the event stored under key; see usage.Log.
func (l *Log) Get(ctx context.Context, key string) (usage.Stored, bool, error) {
	if l.closed.Load() {
		return usage.Stored{}, false, usage.ErrClosed
	}
	var ms int64
	var meter, qty, dims string
	var rec time.Time
	err := l.pool.QueryRow(ctx, `SELECT event_ms, meter, quantity::text, dims::text, recorded_at FROM `+l.table+` WHERE key = $1`, key).
		Scan(&ms, &meter, &qty, &dims, &rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return usage.Stored{}, false, nil
	}
	if err != nil {
		return usage.Stored{}, false, &usage.StoreError{Op: "get", Err: err}
	}
	s, err := storedFrom(key, ms, meter, qty, dims, rec)
	if err != nil {
		return usage.Stored{}, false, &usage.StoreError{Op: "get", Err: err}
	}
	return s, true, nil
}

func storedFrom(key string, ms int64, meter, qty, dims string, rec time.Time) (usage.Stored, error) {
	s := usage.Stored{Key: key, Time: time.UnixMilli(ms).UTC(), Meter: meter, RecordedAt: rec.UTC()}
	var err error
	if s.Quantity, err = usage.ParseDecimal(qty); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(dims), &s.Dims); err != nil {
		return s, fmt.Errorf("dims %s: %w", dims, err)
	}
	return s, nil
}
