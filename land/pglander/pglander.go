// Package pglander lands a ubik changelog into PostgreSQL.
//
// One table holds one row per identity:
//
//	query text, group_key text, window_start bigint, revision bigint,
//	final boolean, window_end bigint, key text, value jsonb, landed_at
//	timestamptz; PRIMARY KEY (query, group_key), plus window_start in
//	History mode.
//
// group_key is the message key for a continuous view and the key without
// its window cells otherwise; window_start is 0 for a continuous view. A
// batch is one statement: INSERT ... SELECT FROM unnest(...) ON CONFLICT DO
// UPDATE ... WHERE (t.window_start, t.revision) < (excluded.window_start,
// excluded.revision). The batch is deduplicated by identity first (one
// statement may not touch a row twice) and sorted, so that concurrent
// landers lock rows in one order and never deadlock each other.
//
// value is jsonb, so PostgreSQL re-renders it (key order and whitespace are
// not kept; every JSON value is); key is text and byte-exact. Revisions
// above 2^63-1 do not fit a bigint and are refused.
package pglander

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// Errors of the package.
var (
	ErrNoPool = errors.New("pglander: no pool")
)

// Options configure a Lander.
type Options struct {
	// Pool is the host's connection pool; Close does not close it.
	Pool *pgxpool.Pool
	// Mode is the identity rule (required).
	Mode land.Mode
	// Query, when set, is the namespace of records that carry no query
	// name, and the only query this lander accepts.
	Query string
	// Table is the table name, optionally schema-qualified (default
	// "ubik_land"). It is created when missing unless NoCreate is set.
	Table    string
	NoCreate bool
	// BatchRows bounds the rows of one statement (default 2000).
	BatchRows int
	// Parallel bounds the statements of one Land call in flight, each on
	// its own connection (default 2). They touch disjoint rows.
	Parallel int
}

// Lander lands into PostgreSQL. It is safe for concurrent use.
type Lander struct {
	o      Options
	table  string // quoted
	upsert string
	get    string
	closed atomic.Bool
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("pglander: table %q has more than a schema and a name", name)
	}
	for i, p := range parts {
		if !identRE.MatchString(p) || len(p) > 63 {
			return "", fmt.Errorf("pglander: table %q: %q is not a plain identifier", name, p)
		}
		parts[i] = pgx.Identifier{p}.Sanitize()
	}
	return strings.Join(parts, "."), nil
}

// New validates opts and creates the table when missing.
func New(ctx context.Context, opts Options) (*Lander, error) {
	if opts.Pool == nil {
		return nil, ErrNoPool
	}
	if !opts.Mode.Valid() {
		return nil, fmt.Errorf("pglander: invalid mode %v", opts.Mode)
	}
	if opts.Table == "" {
		opts.Table = "ubik_land"
	}
	if opts.BatchRows < 0 {
		return nil, fmt.Errorf("pglander: BatchRows %d is negative", opts.BatchRows)
	}
	if opts.BatchRows == 0 {
		opts.BatchRows = 2000
	}
	if opts.Parallel < 0 {
		return nil, fmt.Errorf("pglander: Parallel %d is negative", opts.Parallel)
	}
	if opts.Parallel == 0 {
		opts.Parallel = 2
	}
	t, err := quoteTable(opts.Table)
	if err != nil {
		return nil, err
	}
	l := &Lander{o: opts, table: t}
	pk, match := "query, group_key", "t.query = i.query AND t.group_key = i.group_key"
	if opts.Mode == land.History {
		pk += ", window_start"
		match += " AND t.window_start = i.window_start"
	}
	if !opts.NoCreate {
		if err := l.create(ctx, pk); err != nil {
			return nil, err
		}
	}
	l.upsert = fmt.Sprintf(`WITH i AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[], $6::bigint[], $7::text[], $8::text[])
    AS i(query, group_key, window_start, revision, final, window_end, key, value)
), old AS (
  SELECT i.query, i.group_key, i.window_start, i.revision FROM i JOIN %[1]s t ON %[3]s
  WHERE t.window_start = i.window_start AND t.revision = i.revision
), up AS (
  INSERT INTO %[1]s AS t (query, group_key, window_start, revision, final, window_end, key, value)
  SELECT query, group_key, window_start, revision, final, window_end, key, value::jsonb FROM i
  ON CONFLICT (%[2]s) DO UPDATE SET window_start = excluded.window_start, revision = excluded.revision,
    final = excluded.final, window_end = excluded.window_end, key = excluded.key, value = excluded.value,
    landed_at = now()
  WHERE (t.window_start, t.revision) < (excluded.window_start, excluded.revision)
  RETURNING 1
)
SELECT (SELECT count(*) FROM up), (SELECT count(*) FROM old)`, t, pk, match)
	l.get = fmt.Sprintf(`SELECT key, value::text, window_start, revision, final, window_end FROM %s
WHERE query = $1 AND group_key = $2`, t)
	if opts.Mode == land.History {
		l.get += " AND window_start = $3"
	}
	return l, nil
}

func (l *Lander) create(ctx context.Context, pk string) error {
	ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  query        text        NOT NULL,
  group_key    text        NOT NULL,
  window_start bigint      NOT NULL,
  revision     bigint      NOT NULL,
  final        boolean     NOT NULL,
  window_end   bigint      NOT NULL,
  key          text        NOT NULL,
  value        jsonb       NOT NULL,
  landed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (%s)
)`, l.table, pk)
	if _, err := l.o.Pool.Exec(ctx, ddl); err != nil {
		var pe *pgconn.PgError
		// Two landers creating one table race on the type's name: the
		// loser's table exists now.
		if !(errors.As(err, &pe) && pe.Code == "23505") {
			return fmt.Errorf("pglander: creating %s: %w", l.table, err)
		}
	}
	return nil
}

// Table is the quoted table name.
func (l *Lander) Table() string { return l.table }

// Mode implements land.Lander.
func (l *Lander) Mode() land.Mode { return l.o.Mode }

// Land implements land.Lander.
func (l *Lander) Land(ctx context.Context, recs []changelog.Record) (land.Result, error) {
	if l.closed.Load() {
		return land.Result{}, land.ErrClosed
	}
	items, res, err := land.PrepareBatch(l.o.Mode, l.o.Query, recs)
	if err != nil {
		return land.Result{}, err
	}
	for i, it := range items {
		if it.Version.Revision > math.MaxInt64 {
			return land.Result{}, &land.RecordError{Index: i, Err: fmt.Errorf("%w: revision %d does not fit a bigint", land.ErrBadRecord, it.Version.Revision)}
		}
	}
	// One lock order for every lander: no deadlock between racing writers.
	slices.SortFunc(items, func(a, b land.Item) int {
		return cmp.Or(strings.Compare(a.Query, b.Query), bytes.Compare(a.Group, b.Group), cmp.Compare(a.WindowStart, b.WindowStart))
	})
	n := (len(items) + l.o.BatchRows - 1) / l.o.BatchRows
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		next  atomic.Int64
	)
	for range min(n, l.o.Parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				r, err := l.write(ctx, items[i*l.o.BatchRows:min((i+1)*l.o.BatchRows, len(items))])
				mu.Lock()
				res = res.Add(r)
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return land.Result{}, first
	}
	return res, nil
}

func (l *Lander) write(ctx context.Context, items []land.Item) (land.Result, error) {
	n := len(items)
	var (
		query, group, key, value = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ws, rev, we              = make([]int64, n), make([]int64, n), make([]int64, n)
		final                    = make([]bool, n)
	)
	for i, it := range items {
		query[i], group[i], key[i], value[i] = it.Query, string(it.Group), string(it.Key), string(it.Value)
		ws[i], rev[i], we[i], final[i] = it.Version.WindowStart, int64(it.Version.Revision), it.WindowEnd, it.Final
	}
	var landed, dup int64
	err := l.o.Pool.QueryRow(ctx, l.upsert, query, group, ws, rev, final, we, key, value).Scan(&landed, &dup)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "22P02" {
			// invalid_text_representation: a value that is not JSON.
			return land.Result{}, fmt.Errorf("%w: pglander: %s: %v", land.ErrBadRecord, l.table, err)
		}
		return land.Result{}, fmt.Errorf("pglander: upsert into %s: %w", l.table, err)
	}
	return land.Result{Landed: int(landed), Duplicate: int(dup), Superseded: n - int(landed) - int(dup)}, nil
}

// Get implements land.Lander.
func (l *Lander) Get(ctx context.Context, ref land.Ref) (land.Stored, error) {
	args := []any{ref.Query, string(ref.Group)}
	if l.o.Mode == land.History {
		args = append(args, ref.WindowStart)
	}
	var st land.Stored
	var key, value string
	var rev int64
	err := l.o.Pool.QueryRow(ctx, l.get, args...).Scan(&key, &value, &st.Version.WindowStart, &rev, &st.Final, &st.WindowEnd)
	if errors.Is(err, pgx.ErrNoRows) {
		return land.Stored{}, fmt.Errorf("%w: %v in %s", land.ErrNotFound, ref, l.table)
	}
	if err != nil {
		return land.Stored{}, fmt.Errorf("pglander: reading %v from %s: %w", ref, l.table, err)
	}
	st.Key, st.Value, st.Version.Revision = []byte(key), []byte(value), uint64(rev)
	return st, nil
}

// Close implements land.Lander; it leaves the pool open.
func (l *Lander) Close() error {
	l.closed.Store(true)
	return nil
}
