package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// CompileOptions are the inputs to Compile besides the script.
type CompileOptions struct {
	// Sources are sources registered outside the script (the Go API). They
	// are visible to every query; a CREATE SOURCE of the same name is an
	// error. Compile does not modify them.
	Sources []*Source
	// DefaultName names a bare SELECT (not wrapped in CREATE VIEW). Empty
	// means "query". The CLI passes the script file's base name.
	DefaultName string
	// OwnOutputs: the host writes each query without a CREATE SINK to an
	// output of its own (the CLI: a file per query), so such queries never
	// share the default output and the one-grouping-per-output rule does
	// not join them.
	OwnOutputs bool
}

// Compile parses and binds a script: CREATE SOURCE, CREATE VIEW name AS
// SELECT, bare SELECT and CREATE SINK statements, separated by semicolons.
// Every error is a *parser.Error carrying the position of the offending
// node; it never panics.
func Compile(script string, opts CompileOptions) (prog *Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			// A panic here is a bug; report it as an error rather than
			// crashing the host (panics never cross the API boundary).
			prog, err = nil, fmt.Errorf("plan: internal error compiling script: %v", r)
		}
	}()
	s, err := parser.Parse(script)
	if err != nil {
		return nil, err
	}
	b := &binder{sql: script}
	return b.program(s, opts)
}

func validateSource(s *Source) error {
	if s.Name == "" {
		return fmt.Errorf("%w: a source has no name", ErrInvalidSource)
	}
	if len(s.Columns) == 0 {
		return fmt.Errorf("%w: source %q has no columns", ErrInvalidSource, s.Name)
	}
	seen := map[string]bool{}
	for i, c := range s.Columns {
		k := strings.ToLower(c.Name)
		if c.Name == "" || seen[k] {
			return fmt.Errorf("%w: source %q has an empty or repeated column name %q", ErrInvalidSource, s.Name, c.Name)
		}
		seen[k] = true
		if c.Type.Kind == types.KindNull || c.Type.Kind > types.KindInterval ||
			c.Type.Kind == types.KindDecimal && (c.Type.Width < 1 || c.Type.Width > 38 || c.Type.Scale > c.Type.Width) {
			return fmt.Errorf("%w: source %q column %q has invalid type %s", ErrInvalidSource, s.Name, c.Name, c.Type)
		}
		if c.JSON && c.Type.Kind != types.KindVarchar {
			return fmt.Errorf("%w: source %q JSON column %q must have type VARCHAR, not %s", ErrInvalidSource, s.Name, c.Name, c.Type)
		}
		if c.TimeUnit > 1 && c.Type.Kind != types.KindTimestamp {
			return fmt.Errorf("%w: source %q column %q has a TimeUnit but is %s, not TIMESTAMP", ErrInvalidSource, s.Name, c.Name, c.Type)
		}
		if c.Computed == nil {
			if len(c.Deps) > 0 {
				return fmt.Errorf("%w: source %q column %q has Deps but is not computed", ErrInvalidSource, s.Name, c.Name)
			}
			continue
		}
		if c.Computed.Type() != c.Type || c.JSON {
			return fmt.Errorf("%w: source %q computed column %q has type %s but its expression is %s", ErrInvalidSource, s.Name, c.Name, c.Type, c.Computed.Type())
		}
		for _, d := range c.Deps {
			// Computed columns are evaluated in order: one reads only
			// earlier computed columns.
			if d < 0 || d >= len(s.Columns) || d == i || d > i && s.Columns[d].Computed != nil {
				return fmt.Errorf("%w: source %q computed column %q depends on column %d, which is not a physical column or an earlier computed column", ErrInvalidSource, s.Name, c.Name, d)
			}
		}
	}
	if s.TimeCol < -1 || s.TimeCol >= len(s.Columns) {
		return fmt.Errorf("%w: source %q TimeCol %d is not -1 or a column ordinal", ErrInvalidSource, s.Name, s.TimeCol)
	}
	if s.TimeCol >= 0 && s.Columns[s.TimeCol].Type.Kind != types.KindTimestamp {
		return fmt.Errorf("%w: source %q time column %q is %s, not TIMESTAMP", ErrInvalidSource, s.Name, s.Columns[s.TimeCol].Name, s.Columns[s.TimeCol].Type)
	}
	if s.WatermarkDelay < 0 {
		return fmt.Errorf("%w: source %q has a negative WatermarkDelay", ErrInvalidSource, s.Name)
	}
	return validateTable(s)
}

type binder struct {
	sql   string
	depth int // nesting of the expression being bound (a left operand is not a level)
	chain int // recursion depth of the expression being bound, left operands included

	views map[string]*Source // the script's views as their readers see them (view.go)
	// declared holds the position of every CREATE VIEW name in the script,
	// so that a FROM naming a view declared further down gets an error that
	// says so instead of "unknown source".
	declared map[string]int
}

func (b *binder) program(s *parser.Script, opts CompileOptions) (*Program, error) {
	prog := &Program{}
	byName := map[string]*Source{}
	for _, src := range opts.Sources {
		if src == nil {
			return nil, fmt.Errorf("%w: CompileOptions.Sources holds a nil source", ErrInvalidSource)
		}
		if err := validateSource(src); err != nil {
			return nil, err
		}
		key := strings.ToLower(src.Name)
		if byName[key] != nil {
			return nil, fmt.Errorf("%w: two registered sources are named %q", ErrInvalidSource, src.Name)
		}
		byName[key] = src
		prog.Sources = append(prog.Sources, src)
	}
	defaultName := opts.DefaultName
	if defaultName == "" {
		defaultName = "query"
	}
	queries := map[string]*Query{}
	queryPos := map[*Query]int{}
	var sinks []*parser.CreateSink
	b.declared = map[string]int{}
	for _, st := range s.Stmts {
		if v, ok := st.(*parser.CreateView); ok {
			if _, dup := b.declared[strings.ToLower(v.Name.Name)]; !dup {
				b.declared[strings.ToLower(v.Name.Name)] = v.Name.P
			}
		}
	}
	for _, st := range s.Stmts {
		switch n := st.(type) {
		case *parser.CreateSource:
			src, err := b.source(n)
			if err != nil {
				return nil, err
			}
			key := strings.ToLower(src.Name)
			if byName[key] != nil {
				return nil, b.errAt(n.Name.P, "source %q is already defined", src.Name)
			}
			if queries[key] != nil {
				return nil, b.errAt(n.Name.P, "source %q has the name of a query declared before it", src.Name)
			}
			byName[key] = src
			prog.Sources = append(prog.Sources, src)
		case *parser.CreateView, *parser.Select:
			var sel *parser.Select
			var name string
			var pos int
			if v, ok := n.(*parser.CreateView); ok {
				sel, name, pos = v.Query, v.Name.Name, v.Name.P
			} else {
				sel, name, pos = n.(*parser.Select), defaultName, n.Pos()
			}
			if prev := queries[strings.ToLower(name)]; prev != nil {
				hint := ""
				if _, bare := n.(*parser.Select); bare {
					hint = "; name each query with CREATE VIEW name AS SELECT ..."
				}
				return nil, b.errAt(pos, "query name %q is already used%s", name, hint)
			}
			if byName[strings.ToLower(name)] != nil {
				return nil, b.errAt(pos, "query name %q is already the name of a source", name)
			}
			q, err := b.query(name, sel, byName)
			if err != nil {
				return nil, err
			}
			queries[strings.ToLower(name)] = q
			b.addView(q)
			queryPos[q] = pos
			prog.Queries = append(prog.Queries, q)
		case *parser.CreateSink:
			sinks = append(sinks, n)
		}
	}
	// Sinks may name a query declared later in the script.
	sinkNames := map[string]bool{}
	for _, n := range sinks {
		key := strings.ToLower(n.Name.Name)
		if sinkNames[key] {
			return nil, b.errAt(n.Name.P, "sink %q is already defined", n.Name.Name)
		}
		sinkNames[key] = true
		q := queries[strings.ToLower(n.From.Name)]
		if q == nil {
			names := make([]string, 0, len(queries))
			for _, q := range prog.Queries {
				names = append(names, q.Name)
			}
			return nil, b.errAt(n.From.P, "unknown query %q in CREATE SINK%s", n.From.Name, suggest(n.From.Name, names))
		}
		if q.Output != "" {
			return nil, b.errAt(n.From.P, "query %s already writes to sink %s; a query has one output", q.Name, q.Output)
		}
		opts, err := b.options(n.Options, "sink", sinkOptionKeys())
		if err != nil {
			return nil, err
		}
		q.Output = n.Name.Name
		queryPos[q] = n.P
		prog.Sinks = append(prog.Sinks, &Sink{Name: n.Name.Name, Query: q.Name, Options: opts})
	}
	// One output holds one grouping.
	byOutput := map[string]*Query{}
	for _, q := range prog.Queries {
		key := strings.ToLower(q.Output)
		if q.Output == "" && (opts.OwnOutputs || len(prog.ViewReaders(q)) > 0) {
			continue // its own output, or a view other queries read
		}
		if prev := byOutput[key]; prev != nil {
			out := "the default output"
			if q.Output != "" {
				out = "output " + q.Output
			}
			return nil, b.errAt(queryPos[q], "queries %s and %s both write to %s; one output holds one grouping (a five-minute and an hourly window with the same start would collide). Give each query its own sink", prev.Name, q.Name, out)
		}
		byOutput[key] = q
	}
	return prog, nil
}

// kafkaOptionKeys are the WITH options of a Kafka source or sink that both
// roles take (the kafka package reads them; its tests check the lists agree).
func kafkaOptionKeys() []string {
	return []string{"brokers", "topic", "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "sasl_mechanism", "sasl_user", "sasl_password_env"}
}

// sourceOptionKeys are the WITH options CREATE SOURCE accepts: the file
// options, input deduplication, and the Kafka connector's.
func sourceOptionKeys() []string {
	return append([]string{"connector", "format", "path", "delimiter", "header", "dedup_key", "dedup_within",
		"from", "partitioned_by_key", "idle_timeout"}, kafkaOptionKeys()...)
}

// sinkOptionKeys are the WITH options CREATE SINK accepts: path (the file a
// file run writes the changelog to) and the Kafka connector's.
func sinkOptionKeys() []string {
	return append([]string{"connector", "path", "allow_uncompacted", "partitions"}, kafkaOptionKeys()...)
}

// SourceOptionKeys and SinkOptionKeys list the accepted WITH options.
func SourceOptionKeys() []string { return sourceOptionKeys() }

// SinkOptionKeys: see SourceOptionKeys.
func SinkOptionKeys() []string { return sinkOptionKeys() }

// options binds WITH (...) options: keys are case-insensitive, each given
// once, and one of known; an unknown key is an error at its position with
// the closest known key, so a typo never silently falls back to a default.
func (b *binder) options(opts []parser.Option, what string, known []string) (map[string]string, error) {
	m := make(map[string]string, len(opts))
	for _, o := range opts {
		k := strings.ToLower(o.Key)
		if _, dup := m[k]; dup {
			return nil, b.errAt(o.P, "option %q is given twice", k)
		}
		if !slices.Contains(known, k) {
			if strings.Contains(k, "password") {
				return nil, b.errAt(o.P, "%s option %q: a password is never taken from a WITH option; put it in an environment variable and name it with sasl_password_env (default UBIK_KAFKA_PASSWORD)", what, k)
			}
			sorted := slices.Clone(known)
			slices.Sort(sorted)
			return nil, b.errAt(o.P, "unknown %s option %q%s; known: %s", what, o.Key, suggest(k, known), strings.Join(sorted, ", "))
		}
		m[k] = o.Value
	}
	return m, nil
}

func (b *binder) source(n *parser.CreateSource) (*Source, error) {
	src := &Source{Name: n.Name.Name, TimeCol: -1}
	for _, c := range n.Columns {
		if src.ColumnIndex(c.Name.Name) >= 0 {
			return nil, b.errAt(c.Name.P, "column %q is declared twice", c.Name.Name)
		}
		if c.Expr != nil {
			// Typed once every column is known (computedColumn).
			src.Columns = append(src.Columns, Column{Name: c.Name.Name})
			continue
		}
		if c.Type.Name == "JSON" {
			if len(c.Type.Args) > 0 {
				return nil, b.errAt(c.Type.P, "type JSON takes no arguments")
			}
			src.Columns = append(src.Columns, Column{Name: c.Name.Name, Type: types.Varchar, JSON: true})
			continue
		}
		t, err := b.typeOf(c.Type)
		if err != nil {
			return nil, err
		}
		src.Columns = append(src.Columns, Column{Name: c.Name.Name, Type: t, TimeUnit: timeUnit(c.Type)})
	}
	if len(src.Columns) == 0 {
		return nil, b.errAt(n.Name.P, "source %s declares no columns", n.Name.Name)
	}
	physical := 0
	for i, c := range n.Columns {
		if c.Expr == nil {
			physical++
			continue
		}
		if err := b.computedColumn(src, n, i); err != nil {
			return nil, err
		}
	}
	if physical == 0 {
		return nil, b.errAt(n.Name.P, "source %s declares only computed columns: an event needs at least one physical column to be read from", n.Name.Name)
	}
	if w := n.Watermark; w != nil {
		i := src.ColumnIndex(w.Column.Name)
		if i < 0 {
			return nil, b.errAt(w.Column.P, "WATERMARK FOR unknown column %q%s", w.Column.Name, suggest(w.Column.Name, columnNames(src)))
		}
		if t := src.Columns[i].Type; t.Kind != types.KindTimestamp {
			return nil, b.errAt(w.Column.P, "WATERMARK column %s is %s; it must be a TIMESTAMP", w.Column.Name, t)
		}
		delay, err := b.watermarkDelay(w, src.Columns[i].Name)
		if err != nil {
			return nil, err
		}
		src.TimeCol, src.WatermarkDelay = i, delay
	}
	opts, err := b.options(n.Options, "source", sourceOptionKeys())
	if err != nil {
		return nil, err
	}
	src.Options = opts
	if err := b.dedup(src, n.Options); err != nil {
		return nil, err
	}
	if err := b.versionedTable(src, n); err != nil {
		return nil, err
	}
	return src, nil
}

// computedColumn binds computed column i of n (name AS expr) over src: it
// may read the physical columns (declared anywhere) and the computed
// columns declared before it, so the decoder can evaluate the computed
// columns in declaration order in one pass.
func (b *binder) computedColumn(src *Source, n *parser.CreateSource, i int) error {
	c := n.Columns[i]
	var bad error
	parser.Walk(c.Expr, func(e parser.Expr) bool {
		r, ok := e.(*parser.ColumnRef)
		if !ok || bad != nil {
			return bad == nil
		}
		switch j := src.ColumnIndex(r.Name.Name); {
		case j == i:
			bad = b.errAt(r.Pos(), "computed column %s refers to itself", c.Name.Name)
		case j > i && n.Columns[j].Expr != nil:
			bad = b.errAt(r.Pos(), "computed column %s refers to computed column %s, which is declared after it: a computed column reads the physical columns and the computed columns declared before it", c.Name.Name, n.Columns[j].Name.Name)
		}
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	what := "computed column " + c.Name.Name
	qb := &queryBinder{b: b, src: src, quals: []string{src.Name}, groupIndex: map[string]int{}, aggIndex: map[string]int{}, deps: map[int]bool{}}
	x, err := b.bindExpr(c.Expr, &scope{clause: what, q: qb})
	if err != nil {
		return err
	}
	if x.Type().Kind == types.KindNull {
		return b.errAt(c.Expr.Pos(), "%s has no type (its expression is NULL); give it one with CAST, as in CAST(NULL AS BIGINT)", what)
	}
	deps := map[int]bool{}
	for d := range qb.deps {
		deps[d] = true
		for _, dd := range src.Columns[d].Deps {
			deps[dd] = true
		}
	}
	col := &src.Columns[i]
	col.Type, col.Computed, col.ComputedSQL = x.Type(), x, parser.Format(c.Expr)
	for d := range deps {
		col.Deps = append(col.Deps, d)
	}
	slices.Sort(col.Deps)
	return nil
}

// dedup binds the input-deduplication options: dedup_key names the column
// whose value identifies an event (the producer's idempotency key), and
// dedup_within the event-time horizon within which later copies are dropped.
func (b *binder) dedup(src *Source, opts []parser.Option) error {
	var keyOpt, withinOpt *parser.Option
	for i := range opts {
		switch strings.ToLower(opts[i].Key) {
		case "dedup_key":
			keyOpt = &opts[i]
		case "dedup_within":
			withinOpt = &opts[i]
		}
	}
	if keyOpt == nil && withinOpt == nil {
		return nil
	}
	if keyOpt == nil {
		return b.errAt(withinOpt.P, "dedup_within needs dedup_key, the column that identifies an event")
	}
	if withinOpt == nil {
		return b.errAt(keyOpt.P, "dedup_key needs dedup_within, the event-time horizon to remember keys for (e.g. dedup_within = '1 hour'): without one the key set would grow forever")
	}
	i := src.ColumnIndex(keyOpt.Value)
	if i < 0 {
		return b.errAt(keyOpt.P, "dedup_key names unknown column %q%s", keyOpt.Value, suggest(keyOpt.Value, columnNames(src)))
	}
	if src.TimeCol < 0 {
		return b.errAt(keyOpt.P, "dedup_key needs a WATERMARK: the horizon is measured in event time against the watermark")
	}
	iv, msg := parseInterval(withinOpt.Value)
	if msg != "" {
		return b.errAt(withinOpt.P, "dedup_within %q: %s", withinOpt.Value, msg)
	}
	if iv.months != 0 {
		return b.errAt(withinOpt.P, "dedup_within must have a fixed length (no months or years)")
	}
	within := iv.days*usPerDay + iv.micros
	if within <= 0 {
		return b.errAt(withinOpt.P, "dedup_within must be positive, got %q", withinOpt.Value)
	}
	src.Dedup = &Dedup{Col: i, Within: within}
	return nil
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// watermarkDelay checks that the WATERMARK expression is col or
// col - INTERVAL '...' and returns the delay in microseconds.
func (b *binder) watermarkDelay(w *parser.Watermark, col string) (int64, error) {
	bad := func() error {
		return b.errAt(w.Expr.Pos(), "WATERMARK FOR %s must be AS %s or AS %s - INTERVAL '<delay>' (bounded out-of-orderness)", col, col, col)
	}
	isCol := func(e parser.Expr) bool {
		r, ok := unparen(e).(*parser.ColumnRef)
		return ok && strings.EqualFold(r.Name.Name, col)
	}
	e := unparen(w.Expr)
	if isCol(e) {
		return 0, nil
	}
	be, ok := e.(*parser.BinaryExpr)
	if !ok || be.Op != "-" || !isCol(be.L) {
		return 0, bad()
	}
	if _, ok := unparen(be.R).(*parser.IntervalLit); !ok {
		return 0, bad()
	}
	return b.fixedInterval(be.R, "the watermark delay", true)
}

// fixedInterval evaluates a constant INTERVAL expression with no months
// (windows and delays need a fixed length) to microseconds. zeroOK allows 0.
func (b *binder) fixedInterval(e parser.Expr, what string, zeroOK bool) (int64, error) {
	x, err := b.bindExpr(e, &scope{clause: what, q: &queryBinder{b: b}})
	if err != nil {
		return 0, err
	}
	c, ok := x.(*Const)
	if !ok || c.T.Kind != types.KindInterval || c.V.Null {
		return 0, b.errAt(e.Pos(), "%s must be a constant INTERVAL, as in INTERVAL '1' MINUTE; got %s", what, x.Type())
	}
	m, d, us := c.V.IntervalParts()
	if m != 0 {
		return 0, b.errAt(e.Pos(), "%s must have a fixed length: months and years vary in length; use days, hours, minutes or seconds", what)
	}
	total := int64(d)*usPerDay + us
	if total < 0 || total == 0 && !zeroOK {
		return 0, b.errAt(e.Pos(), "%s must be positive, got %s", what, ValueText(types.Interv(0, int32(d), us)))
	}
	return total, nil
}

func columnNames(s *Source) []string {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	return names
}

func sourceNames(m map[string]*Source) []string {
	names := make([]string, 0, len(m))
	for _, s := range m {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

// CompileExpr binds one scalar expression over the row of src (src may be
// nil for a constant expression). Aggregates, windows and metadata
// functions are not allowed. Errors are *parser.Error positioned in expr.
func CompileExpr(expr string, src *Source) (x Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			x, err = nil, fmt.Errorf("plan: internal error compiling expression: %v", r)
		}
	}()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	b := &binder{sql: expr}
	qb := &queryBinder{b: b, src: src, groupIndex: map[string]int{}, aggIndex: map[string]int{}}
	if src != nil {
		qb.quals = []string{src.Name}
	}
	return b.bindExpr(e, &scope{clause: "an expression", q: qb})
}
