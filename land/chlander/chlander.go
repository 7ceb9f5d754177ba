// Package chlander lands a ubik changelog into ClickHouse over its HTTP
// interface (JSONEachRow), on releases from 18.16 to current.
//
// ClickHouse has no conditional write, so the guard moves to the read:
//
//	CREATE TABLE t (query String, group_key String, window_start Int64,
//	  revision UInt64, final UInt8, window_end Int64, key String,
//	  value String)
//	ENGINE = ReplacingMergeTree(revision)
//	ORDER BY (query, group_key, window_start)
//
// Rows of one (query, group, window) merge in the background keeping the
// highest revision; since window_start is in the sorting key, within one
// merge group the version revision orders (window_start, revision)
// exactly. Every read collapses FIRST, with argMax over the tuple
// (window_start, revision) per identity, and filters AFTER: the view
// t_current and the Go helpers (Get, Scan, CurrentSQL) do so, so a read is
// exact whether or not any merge has run, and a merge only ever removes a
// row that every read already ignored. Never filter a non-identity column
// before the collapse, and never PREWHERE a non-key column with FINAL: both
// return stale rows.
//
// Before appending, Land reads the stored versions of the batch's
// identities and appends only records past them, which counts duplicates
// and superseded records as the other stores do and keeps the table small.
// The lander remembers the versions it read and appended (bounded,
// Options.KnownVersions): stored versions only grow, so a remembered one
// is a lower bound, and a batch of known identities needs no read. The
// read and the append are not atomic; a racing writer may still append a
// stale row, which the read path ignores.
package chlander

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chhttp"
)

// Options configure a Lander.
type Options struct {
	// URL is the base of the HTTP interface (default http://127.0.0.1:8123).
	URL string
	// User and Password, when set, authenticate (sent as headers, never
	// logged or put in errors).
	User, Password string
	// Database (default "default") and Table (default "ubik_land"). The
	// table and its view Table+"_current" are created when missing unless
	// NoCreate is set.
	Database, Table string
	NoCreate        bool
	// Mode is the identity rule (required).
	Mode land.Mode
	// Query, when set, is the namespace of records that carry no query
	// name, and the only query this lander accepts.
	Query string
	// BatchRows bounds the rows of one INSERT (default 20000).
	BatchRows int
	// AppendOnly skips the read before the append: every record is
	// appended and counted as Landed. Reads stay exact; the table holds
	// more rows until merges run.
	AppendOnly bool
	// KnownVersions bounds the identities whose stored version the lander
	// remembers (default 200000; negative: none). Stored versions only
	// grow, so what the lander read or appended itself is a lower bound
	// of the stored version, and a record at or below it needs no read:
	// once the working set is known, a batch is one append and no guard
	// read. Past the bound the memory is dropped and rebuilt from reads.
	// It assumes the table is not emptied behind a running lander.
	KnownVersions int
	// HTTPClient (default: chhttp's, which drops a connection idle for
	// longer than ClickHouse keeps one).
	HTTPClient *http.Client
}

// Lander lands into ClickHouse. It is safe for concurrent use.
type Lander struct {
	o      Options
	c      *chhttp.Client
	mu     sync.Mutex
	known  map[identity]land.Version // see Options.KnownVersions
	table  string                    // db.table, quoted
	view   string
	closed atomic.Bool
}

// New validates opts and creates the table and view when missing.
func New(ctx context.Context, opts Options) (*Lander, error) {
	if opts.URL == "" {
		opts.URL = "http://127.0.0.1:8123"
	}
	if opts.Database == "" {
		opts.Database = "default"
	}
	if opts.Table == "" {
		opts.Table = "ubik_land"
	}
	if opts.BatchRows == 0 {
		opts.BatchRows = 20000
	}
	if opts.KnownVersions == 0 {
		opts.KnownVersions = 200000
	}
	switch {
	case !opts.Mode.Valid():
		return nil, fmt.Errorf("chlander: invalid mode %v", opts.Mode)
	case !chhttp.ValidIdent(opts.Database) || !chhttp.ValidIdent(opts.Table):
		return nil, fmt.Errorf("chlander: database %q and table %q must be plain identifiers", opts.Database, opts.Table)
	case opts.BatchRows < 0:
		return nil, fmt.Errorf("chlander: BatchRows %d is negative", opts.BatchRows)
	}
	// The lander reads whole tables in Scan: no bound on a reply.
	c, err := chhttp.New(chhttp.Options{URL: opts.URL, User: opts.User, Password: opts.Password,
		Database: opts.Database, HTTPClient: opts.HTTPClient, MaxResponse: -1})
	if err != nil {
		return nil, fmt.Errorf("chlander: %w", err)
	}
	l := &Lander{
		o:     opts,
		c:     c,
		table: chhttp.QuoteIdent(opts.Database) + "." + chhttp.QuoteIdent(opts.Table),
		view:  chhttp.QuoteIdent(opts.Database) + "." + chhttp.QuoteIdent(opts.Table+"_current"),
	}
	if !opts.NoCreate {
		if err := l.create(ctx); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Table is the quoted database.table; View the collapsing view over it.
func (l *Lander) Table() string { return l.table }

// View is the quoted name of the view that collapses the table.
func (l *Lander) View() string { return l.view }

func (l *Lander) identityColumns() string {
	if l.o.Mode == land.History {
		return "query, group_key, window_start"
	}
	return "query, group_key"
}

// CurrentSQL is the collapse: one row per identity, the row with the
// greatest (window_start, revision). Filter its result, never its input
// (except on the identity columns query and group_key, and window_start in
// History mode).
func (l *Lander) CurrentSQL(where string) string {
	inner := "SELECT query, group_key, window_start AS ws, revision AS rev, final AS fin, window_end AS we, key AS k, value AS val FROM " + l.table
	if where != "" {
		inner += " WHERE " + where
	}
	sel := "query, group_key, argMax(ws, (ws, rev)) AS window_start"
	group := "query, group_key"
	if l.o.Mode == land.History {
		sel = "query, group_key, ws AS window_start"
		group += ", ws"
	}
	return "SELECT " + sel + ", argMax(rev, (ws, rev)) AS revision, argMax(fin, (ws, rev)) AS final, " +
		"argMax(we, (ws, rev)) AS window_end, argMax(k, (ws, rev)) AS key, argMax(val, (ws, rev)) AS value " +
		"FROM (" + inner + ") GROUP BY " + group
}

func (l *Lander) create(ctx context.Context) error {
	ddl := "CREATE TABLE IF NOT EXISTS " + l.table + ` (
  query String, group_key String, window_start Int64, revision UInt64,
  final UInt8, window_end Int64, key String, value String
) ENGINE = ReplacingMergeTree(revision) ORDER BY (query, group_key, window_start)`
	if _, err := l.c.Exec(ctx, ddl, nil); err != nil {
		return fmt.Errorf("chlander: creating %s: %w", l.table, err)
	}
	if _, err := l.c.Exec(ctx, "CREATE VIEW IF NOT EXISTS "+l.view+" AS "+l.CurrentSQL(""), nil); err != nil {
		return fmt.Errorf("chlander: creating %s: %w", l.view, err)
	}
	return nil
}

// Exec runs one statement and returns the reply body (for hosts and tests:
// OPTIMIZE, SYSTEM STOP MERGES, ad-hoc reads).
func (l *Lander) Exec(ctx context.Context, stmt string) ([]byte, error) {
	return l.c.Exec(ctx, stmt, nil)
}

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
	for start := 0; start < len(items); start += l.o.BatchRows {
		r, err := l.write(ctx, items[start:min(start+l.o.BatchRows, len(items))])
		if err != nil {
			return land.Result{}, l.configErr(err)
		}
		res = res.Add(r)
	}
	return res, nil
}

func (l *Lander) write(ctx context.Context, items []land.Item) (land.Result, error) {
	var res land.Result
	if !l.o.AppendOnly {
		stored, found, err := l.stored(ctx, items)
		if err != nil {
			return res, err
		}
		keep := make([]land.Item, 0, len(items))
		for i, it := range items {
			switch c := it.Version.Compare(stored[i]); {
			case !found[i] || c > 0:
				keep = append(keep, it)
			case c == 0:
				res.Duplicate++
			default:
				res.Superseded++
			}
		}
		items = keep
	}
	if len(items) == 0 {
		return res, nil
	}
	// Sized once (quoting rarely adds bytes): growing the body row by row
	// copied it over and over, a fifth of the lander's CPU.
	size := 0
	for _, it := range items {
		size += len(it.Query) + len(it.Group) + len(it.Key) + len(it.Value) + rowOverhead
	}
	body := make([]byte, 0, size)
	for _, it := range items {
		body = appendRow(body, it)
	}
	if err := l.c.Insert(ctx, "INSERT INTO "+l.table+" (query, group_key, window_start, revision, final, window_end, key, value) FORMAT Values", body, nil); err != nil {
		return land.Result{}, fmt.Errorf("chlander: appending %d rows to %s: %w", len(items), l.table, err)
	}
	l.remember(func(put func(identity, land.Version)) {
		for _, it := range items {
			put(identity{it.Query, string(it.Group), it.WindowStart}, it.Version)
		}
	})
	res.Landed += len(items)
	return res, nil
}

// rowOverhead bounds a Values row's bytes besides its four strings: quotes,
// commas, parentheses, three integers of at most 20 digits and a digit.
const rowOverhead = 4*2 + 7 + 2 + 3*20 + 1 + 1

// stored returns the stored version of each item's identity (found[i]
// false: none stored): from memory where the lander knows one, from one
// guard read for the rest.
func (l *Lander) stored(ctx context.Context, items []land.Item) ([]land.Version, []bool, error) {
	vs := make([]land.Version, len(items))
	found := make([]bool, len(items))
	var unknown []land.Item
	var at []int // at[j]: the index in items of unknown[j]
	l.mu.Lock()
	for i, it := range items {
		if v, ok := l.known[identity{it.Query, string(it.Group), it.WindowStart}]; ok {
			vs[i], found[i] = v, true
		} else {
			unknown = append(unknown, it)
			at = append(at, i)
		}
	}
	l.mu.Unlock()
	if len(unknown) == 0 {
		return vs, found, nil
	}
	read, err := l.versions(ctx, unknown)
	if err != nil {
		return nil, nil, err
	}
	for j, it := range unknown {
		if v, ok := read[identity{it.Query, string(it.Group), it.WindowStart}]; ok {
			vs[at[j]], found[at[j]] = v, true
		}
	}
	l.remember(func(put func(identity, land.Version)) {
		for id, v := range read {
			put(id, v)
		}
	})
	return vs, found, nil
}

// remember records versions known to be stored (a lower bound: the store
// may hold a higher one written by someone else).
func (l *Lander) remember(each func(put func(identity, land.Version))) {
	if l.o.KnownVersions < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known == nil {
		l.known = make(map[identity]land.Version)
	}
	each(func(id identity, v land.Version) {
		if old, ok := l.known[id]; !ok || v.Compare(old) > 0 {
			l.known[id] = v
		}
	})
	if len(l.known) > l.o.KnownVersions {
		l.known = nil // past the bound: start again from reads
	}
}

type identity struct {
	query, group string
	ws           int64
}

// versions reads the stored (window_start, revision) of items'
// identities in one query. The identities go to the server as a temporary
// table (external data) numbered by their index in items, not as an IN
// list in the SQL text: the server parses them as data, one batch is one
// round trip whatever its size, and the answer names each identity by its
// number, so it is numbers only.
//
// The greatest revision of each (identity, window start) is a plain max,
// and the greatest pair of an identity is picked here: argMax over a tuple
// costs 18.16 tens of µs a row, through generic values.
func (l *Lander) versions(ctx context.Context, items []land.Item) (map[identity]land.Version, error) {
	m := make(map[identity]land.Version, len(items))
	ids := make([]byte, 0, len(items)*48)
	for i, it := range items {
		ids = append(ids, '(')
		ids = strconv.AppendInt(ids, int64(i), 10)
		ids = append(ids, ',')
		ids = chhttp.AppendQuote(ids, it.Query)
		ids = append(ids, ',')
		ids = chhttp.AppendQuote(ids, string(it.Group))
		if l.o.Mode == land.History {
			ids = append(ids, ',')
			ids = strconv.AppendInt(ids, it.WindowStart, 10)
		}
		ids = append(ids, ')', '\n')
	}
	structure := "i UInt32, query String, group_key String"
	if l.o.Mode == land.History {
		structure += ", window_start Int64"
	}
	q := "SELECT i, window_start, max(revision) FROM " + l.table +
		" ANY INNER JOIN _ids USING (" + l.identityColumns() + ") GROUP BY i, window_start"
	err := l.c.SelectTSV(ctx, q, nil, &chhttp.Table{Name: "_ids", Structure: structure, Values: ids}, func(f [][]byte) error {
		if len(f) != 3 {
			return fmt.Errorf("%d fields, want 3", len(f))
		}
		i, err1 := strconv.Atoi(string(f[0]))
		ws, err2 := strconv.ParseInt(string(f[1]), 10, 64)
		rev, err3 := strconv.ParseUint(string(f[2]), 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil || i < 0 || i >= len(items) {
			return fmt.Errorf("row %q: identity %d of %d: %v", bytes.Join(f, []byte{'\t'}), i, len(items), err)
		}
		it := items[i]
		id := identity{it.Query, string(it.Group), 0}
		if l.o.Mode == land.History {
			id.ws = it.WindowStart
		}
		v := land.Version{WindowStart: ws, Revision: rev}
		if old, ok := m[id]; !ok || v.Compare(old) > 0 {
			m[id] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chlander: reading the stored versions in %s: %w", l.table, err)
	}
	return m, nil
}

// row is one JSONEachRow line of the collapsed read.
type row struct {
	Query       string `json:"query"`
	GroupKey    string `json:"group_key"`
	WindowStart int64  `json:"window_start"`
	Revision    uint64 `json:"revision"`
	Final       uint8  `json:"final"`
	WindowEnd   int64  `json:"window_end"`
	Key         string `json:"key"`
	Value       string `json:"value"`
}

// eachRow runs the collapse with where and calls fn on each row.
func (l *Lander) eachRow(ctx context.Context, where string, fn func(row) error) error {
	return l.c.SelectJSON(ctx, l.CurrentSQL(where), nil, func(dec *json.Decoder) error {
		var r row
		if err := dec.Decode(&r); err != nil {
			return err
		}
		return fn(r)
	})
}

func (r row) stored() land.Stored {
	return land.Stored{
		Key: []byte(r.Key), Value: []byte(r.Value), Final: r.Final == 1, WindowEnd: r.WindowEnd,
		Version: land.Version{WindowStart: r.WindowStart, Revision: r.Revision},
	}
}

// Get implements land.Lander: the collapsed state of one identity.
func (l *Lander) Get(ctx context.Context, ref land.Ref) (land.Stored, error) {
	where := "query = " + chhttp.Quote(ref.Query) + " AND group_key = " + chhttp.Quote(string(ref.Group))
	if l.o.Mode == land.History {
		where += " AND window_start = " + strconv.FormatInt(ref.WindowStart, 10)
	}
	var st *land.Stored
	err := l.eachRow(ctx, where, func(r row) error {
		if st != nil {
			return fmt.Errorf("%w: two rows for %v", ErrReply, ref)
		}
		s := r.stored()
		st = &s
		return nil
	})
	if err != nil {
		return land.Stored{}, err
	}
	if st == nil {
		return land.Stored{}, fmt.Errorf("%w: %v in %s", land.ErrNotFound, ref, l.table)
	}
	return *st, nil
}

// Scan implements land.Scanner over the collapsed state.
func (l *Lander) Scan(ctx context.Context, fn func(land.Ref, land.Stored) error) error {
	return l.eachRow(ctx, "", func(r row) error {
		ref := land.Ref{Query: r.Query, Group: []byte(r.GroupKey)}
		if l.o.Mode == land.History {
			ref.WindowStart = r.WindowStart
		}
		return fn(ref, r.stored())
	})
}

// Close implements land.Lander.
func (l *Lander) Close() error {
	l.closed.Store(true)
	return nil
}

// appendRow appends one row of INSERT ... FORMAT Values, in the column
// order of write's INSERT.
func appendRow(dst []byte, it land.Item) []byte {
	dst = append(dst, '(')
	dst = chhttp.AppendQuote(dst, it.Query)
	dst = append(dst, ',')
	dst = chhttp.AppendQuote(dst, string(it.Group))
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, it.Version.WindowStart, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, it.Version.Revision, 10)
	if it.Final {
		dst = append(dst, ",1,"...)
	} else {
		dst = append(dst, ",0,"...)
	}
	dst = strconv.AppendInt(dst, it.WindowEnd, 10)
	dst = append(dst, ',')
	dst = chhttp.AppendQuote(dst, string(it.Key))
	dst = append(dst, ',')
	dst = chhttp.AppendQuote(dst, string(it.Value))
	return append(dst, ')', '\n')
}
