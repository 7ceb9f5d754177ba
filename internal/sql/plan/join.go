package plan

import (
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// DefaultJoinBuffer is how many events a temporal join holds at most
// while they wait for the table's watermark to pass their time. An event
// beyond it is refused (the host pushes table rows first, or the table's
// watermark is advanced); see exec.ErrJoinBuffer.
const DefaultJoinBuffer = 1 << 20

// TemporalJoin is an event-time temporal join (FROM s JOIN t FOR
// SYSTEM_TIME AS OF s.ts ON s.k = t.k): each event of Stream is joined
// with the version of its key in the versioned table Table valid at the
// event's time, the latest version with a time at or before it. The
// query's Source is then the joined row: Stream's columns, then Table's
// (its ordinals offset by Offset), and the query's expressions read that
// row. Its event time and watermark delay are Stream's.
type TemporalJoin struct {
	Stream, Table           *Source
	StreamAlias, TableAlias string // the names a column may be qualified with
	// Left keeps an event without a version, its table columns NULL
	// (LEFT JOIN); an inner join drops it (counted).
	Left bool
	// StreamKey are expressions over the stream row, one per column of
	// the table's primary key, and TableKey the same columns as
	// expressions over the table row: both of one type per pair, so equal
	// values have equal key bytes.
	StreamKey, TableKey []Expr
	// Offset is where the table's columns start in the joined row
	// (len(Stream.Columns)).
	Offset int
	// Text is the join as written, for explain.
	Text string
}

// StreamUsed and TableUsed split the query's UsedColumns (over the joined
// row) into the columns each input's decoder converts: besides what the
// query reads, the event time, the join key columns and the table's time
// and primary key.
func (q *Query) StreamUsed() []bool {
	j := q.Join
	used := make([]bool, len(j.Stream.Columns))
	copy(used, q.UsedColumns[:j.Offset])
	mark := func(i int) {
		used[i] = true
		for _, d := range j.Stream.Columns[i].Deps {
			used[d] = true
		}
	}
	// The key expressions were bound with the query, so UsedColumns
	// holds what they read.
	mark(j.Stream.TimeCol)
	if j.Stream.Dedup != nil {
		mark(j.Stream.Dedup.Col)
	}
	return used
}

// TableUsed: see StreamUsed.
func (q *Query) TableUsed() []bool {
	j := q.Join
	used := make([]bool, len(j.Table.Columns))
	copy(used, q.UsedColumns[j.Offset:])
	mark := func(i int) {
		used[i] = true
		for _, d := range j.Table.Columns[i].Deps {
			used[d] = true
		}
	}
	mark(j.Table.TimeCol)
	for _, k := range j.Table.PrimaryKey {
		mark(k)
	}
	return used
}

// versionedTable applies CREATE TABLE's rules: a PRIMARY KEY ... NOT
// ENFORCED over physical columns and an event-time column (WATERMARK FOR).
func (b *binder) versionedTable(src *Source, n *parser.CreateSource) error {
	if !n.Table {
		if n.PrimaryKey != nil {
			return b.errAt(n.PrimaryKeyP, "PRIMARY KEY belongs to a versioned table: write CREATE TABLE %s (..., PRIMARY KEY (...) NOT ENFORCED, WATERMARK FOR ...)", src.Name)
		}
		return nil
	}
	if n.PrimaryKey == nil {
		return b.errAt(n.Name.P, "table %s has no PRIMARY KEY: a table is a versioned table, each row the version of its key valid from its event time; declare PRIMARY KEY (col, ...) NOT ENFORCED (or read a stream with CREATE SOURCE)", src.Name)
	}
	if n.Watermark == nil {
		return b.errAt(n.Name.P, "table %s has no event-time column: declare WATERMARK FOR <timestamp column> AS <column> - INTERVAL '<delay>'; each row is the version of its key valid from that time", src.Name)
	}
	seen := map[int]bool{}
	for _, id := range n.PrimaryKey {
		i := src.ColumnIndex(id.Name)
		switch {
		case i < 0:
			return b.errAt(id.P, "PRIMARY KEY names unknown column %q%s", id.Name, suggest(id.Name, columnNames(src)))
		case seen[i]:
			return b.errAt(id.P, "column %s is named twice in PRIMARY KEY", id.Name)
		case src.Columns[i].Computed != nil:
			return b.errAt(id.P, "PRIMARY KEY column %s is computed; a key is a physical column", id.Name)
		case src.Columns[i].JSON:
			return b.errAt(id.P, "PRIMARY KEY column %s is JSON; a key column has a scalar type", id.Name)
		}
		seen[i] = true
		src.PrimaryKey = append(src.PrimaryKey, i)
	}
	if src.Dedup != nil {
		return b.errAt(n.Name.P, "table %s: dedup_key applies to a stream; a versioned table keeps the latest version of each key", src.Name)
	}
	return nil
}

// joinSide is which input of a join a column belongs to.
type joinSide struct {
	src   *Source
	names []string // the source's name and alias
	off   int
}

// join binds FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts [AS p] ON ....
func (qb *queryBinder) join(n *parser.JoinRef, sources map[string]*Source) error {
	b := qb.b
	left, ok := n.Left.(*parser.TableName)
	if !ok {
		if _, nested := n.Left.(*parser.JoinRef); nested {
			return b.errAt(n.P, "a query joins one stream with one versioned table; joining more is not supported yet")
		}
		return b.errAt(n.Left.Pos(), "a window table function cannot be joined: join the stream, then window with GROUP BY TUMBLE(s.ts, ...) (or HOP, SESSION)")
	}
	lookup := func(id parser.Ident) (*Source, error) {
		s := sources[strings.ToLower(id.Name)]
		if s == nil {
			return b.lookupView(id, sources)
		}
		return s, nil
	}
	stream, err := lookup(left.Name)
	if err != nil {
		return err
	}
	if stream.PrimaryKey != nil {
		return b.errAt(left.Name.P, "%s is a versioned table; FROM reads a stream, and the table is joined to it: FROM <stream> s JOIN %s FOR SYSTEM_TIME AS OF s.<time> ON ...", stream.Name, stream.Name)
	}
	table, err := lookup(n.Right.Name)
	if err != nil {
		return err
	}
	sAlias, tAlias := stream.Name, table.Name
	if left.Alias != nil {
		sAlias = left.Alias.Name
	}
	if n.Right.Alias != nil {
		tAlias = n.Right.Alias.Name
	}
	if strings.EqualFold(sAlias, tAlias) {
		return b.errAt(n.Right.Pos(), "both inputs of the join are called %s; give one an alias (AS name)", sAlias)
	}
	if table.PrimaryKey == nil {
		if n.AsOf != nil {
			return b.errAt(n.AsOfP, "%s is a stream, not a versioned table: FOR SYSTEM_TIME AS OF reads a table declared with CREATE TABLE %s (..., PRIMARY KEY (...) NOT ENFORCED, WATERMARK FOR ...); to join two streams, drop FOR SYSTEM_TIME AS OF and bound their times in ON (an interval join)", table.Name, table.Name)
		}
		return qb.intervalJoin(n, left, stream, table)
	}
	if stream.View != nil {
		return b.errAt(left.Name.P, "%s is a view: a temporal join reads a declared stream (CREATE SOURCE)", stream.Name)
	}
	if n.AsOf == nil {
		return b.errAt(n.Right.Name.P, "%s is a versioned table: join it FOR SYSTEM_TIME AS OF the stream's event time, as in JOIN %s FOR SYSTEM_TIME AS OF %s.%s", table.Name, table.Name, sAlias, timeName(stream))
	}
	if stream.TimeCol < 0 {
		return b.errAt(left.Name.P, "stream %s declares no event time: a temporal join joins each event with the version valid at its time; declare WATERMARK FOR <timestamp column> AS ... in CREATE SOURCE", stream.Name)
	}
	// The joined row: the stream's columns, then the table's.
	off := len(stream.Columns)
	joined := &Source{Name: stream.Name, TimeCol: stream.TimeCol, WatermarkDelay: stream.WatermarkDelay,
		Options: stream.Options, Dedup: stream.Dedup}
	joined.Columns = append(joined.Columns, stream.Columns...)
	for _, c := range table.Columns {
		c.Deps = shift(c.Deps, off)
		joined.Columns = append(joined.Columns, c)
	}
	j := &TemporalJoin{Stream: stream, Table: table, StreamAlias: sAlias, TableAlias: tAlias,
		Left: n.Kind == parser.LeftJoin, Offset: off, Text: b.sql[n.P:endOf(b, n)]}
	qb.src, qb.q.Source, qb.q.Join = joined, joined, j
	qb.quals = []string{sAlias, tAlias}
	qb.sides = []joinSide{{stream, aliasNames(stream.Name, left.Alias), 0}, {table, aliasNames(table.Name, n.Right.Alias), off}}
	// AS OF: the stream's event-time column.
	r, ok := unparen(n.AsOf).(*parser.ColumnRef)
	if !ok {
		return b.errAt(n.AsOf.Pos(), "FOR SYSTEM_TIME AS OF takes the stream's event-time column (%s.%s), not an expression", sAlias, timeName(stream))
	}
	idx, err := qb.joinColumn(r)
	if err != nil {
		return err
	}
	if idx != stream.TimeCol {
		return b.errAt(r.Pos(), "FOR SYSTEM_TIME AS OF %s: a temporal join is AS OF the stream's event time, %s.%s (the column its WATERMARK is on)", parser.Format(r), sAlias, timeName(stream))
	}
	return qb.joinOn(n.On, j)
}

func aliasNames(name string, alias *parser.Ident) []string {
	if alias != nil {
		return []string{alias.Name}
	}
	return []string{name}
}

func timeName(s *Source) string {
	if s.TimeCol < 0 {
		return "<time>"
	}
	return s.Columns[s.TimeCol].Name
}

func shift(d []int, off int) []int {
	if d == nil {
		return nil
	}
	out := make([]int, len(d))
	for i, x := range d {
		out[i] = x + off
	}
	return out
}

// endOf is the end of the join's ON condition in the text.
func endOf(b *binder, n *parser.JoinRef) int {
	end := n.On.Pos()
	parser.Walk(n.On, func(x parser.Expr) bool {
		if p := x.Pos(); p > end {
			end = p
		}
		return true
	})
	// Extend to the end of the last token.
	for end < len(b.sql) && !strings.ContainsRune(" \t\r\n;", rune(b.sql[end])) {
		end++
	}
	return end
}

// joinOn binds ON: equalities, joined with AND, each between an
// expression over the stream and a primary key column of the table; every
// primary key column exactly once.
func (qb *queryBinder) joinOn(on parser.Expr, j *TemporalJoin) error {
	b := qb.b
	var conj []parser.Expr
	var split func(e parser.Expr)
	split = func(e parser.Expr) {
		if be, ok := unparen(e).(*parser.BinaryExpr); ok && strings.EqualFold(be.Op, "AND") {
			split(be.L)
			split(be.R)
			return
		}
		conj = append(conj, e)
	}
	split(on)
	pk := j.Table.PrimaryKey
	byCol := make([]parser.Expr, len(pk))
	streamSide := make([]parser.Expr, len(pk))
	pkNames := make([]string, len(pk))
	for i, c := range pk {
		pkNames[i] = j.TableAlias + "." + j.Table.Columns[c].Name
	}
	want := fmt.Sprintf("the ON of a temporal join is an equality on the primary key of %s, one per key column joined with AND (%s = <expression over %s>)", j.Table.Name, strings.Join(pkNames, ", "), j.StreamAlias)
	for _, c := range conj {
		be, ok := unparen(c).(*parser.BinaryExpr)
		if !ok || be.Op != "=" {
			return b.errAt(c.Pos(), "%s: %s is not an equality", want, parser.Format(c))
		}
		sideL, err := qb.exprSide(be.L)
		if err != nil {
			return err
		}
		sideR, err := qb.exprSide(be.R)
		if err != nil {
			return err
		}
		var tabExpr, strExpr parser.Expr
		switch {
		case sideL == 1 && sideR != 1:
			tabExpr, strExpr = be.L, be.R
		case sideR == 1 && sideL != 1:
			tabExpr, strExpr = be.R, be.L
		default:
			return b.errAt(be.P, "%s: %s compares no table column with the stream", want, parser.Format(c))
		}
		r, ok := unparen(tabExpr).(*parser.ColumnRef)
		if !ok {
			return b.errAt(tabExpr.Pos(), "%s: %s is an expression over the table; name the key column itself", want, parser.Format(tabExpr))
		}
		idx, _ := qb.joinColumn(r)
		k := -1
		for i, c := range pk {
			if c == idx-j.Offset {
				k = i
			}
		}
		if k < 0 {
			return b.errAt(r.Pos(), "%s: %s is not a primary key column of %s", want, parser.Format(r), j.Table.Name)
		}
		if byCol[k] != nil {
			return b.errAt(r.Pos(), "primary key column %s is compared twice in ON", parser.Format(r))
		}
		byCol[k], streamSide[k] = c, strExpr
	}
	for i, c := range byCol {
		if c == nil {
			return b.errAt(on.Pos(), "ON does not compare primary key column %s: a temporal join looks each event's version up by the whole key of %s", pkNames[i], j.Table.Name)
		}
	}
	for i := range pk {
		sx, err := b.bindExpr(streamSide[i], &scope{clause: "ON", q: qb})
		if err != nil {
			return err
		}
		tc := j.Table.Columns[pk[i]]
		tx := Expr(&ColRef{Index: pk[i], T: tc.Type, Name: tc.Name})
		if sx.Type().Kind == types.KindNull {
			return b.errAt(streamSide[i].Pos(), "ON compares %s with NULL, which never matches", pkNames[i])
		}
		out, _, err := b.unify([]Expr{sx, tx}, byCol[i].Pos(), "ON "+parser.Format(byCol[i]))
		if err != nil {
			return err
		}
		// The stream side reads the stream row; its ordinals are the
		// joined row's (the stream's columns come first).
		j.StreamKey = append(j.StreamKey, out[0])
		j.TableKey = append(j.TableKey, out[1])
	}
	return nil
}

// exprSide reports which input e reads: 0 the stream, 1 the table, -1
// neither (a constant); reading both is an error.
func (qb *queryBinder) exprSide(e parser.Expr) (int, error) {
	side := -1
	var err error
	parser.Walk(e, func(x parser.Expr) bool {
		r, ok := x.(*parser.ColumnRef)
		if !ok || err != nil {
			return err == nil
		}
		idx, e2 := qb.joinColumn(r)
		if e2 != nil {
			err = e2
			return false
		}
		s := 0
		if idx >= qb.sides[1].off {
			s = 1
		}
		if side >= 0 && side != s {
			err = qb.b.errAt(e.Pos(), "%s reads both inputs of the join; each side of an ON equality reads one input", parser.Format(e))
			return false
		}
		side = s
		return true
	})
	return side, err
}

// joinColumn resolves a column of a join query to its ordinal in the
// joined row: a qualified name in the input it names, an unqualified one
// in the one input that has it (in both is ambiguous).
func (qb *queryBinder) joinColumn(r *parser.ColumnRef) (int, error) {
	b := qb.b
	if r.Qualifier != nil {
		for _, s := range qb.sides {
			for _, n := range s.names {
				if strings.EqualFold(n, r.Qualifier.Name) {
					i := s.src.ColumnIndex(r.Name.Name)
					if i < 0 {
						return -1, b.errAt(r.Name.P, "unknown column %q in %s (%s)%s", r.Name.Name, r.Qualifier.Name, s.src.Name, suggest(r.Name.Name, columnNames(s.src)))
					}
					return s.off + i, nil
				}
			}
		}
		return -1, b.errAt(r.Qualifier.P, "unknown source or alias %q in %s.%s (the query reads %s)", r.Qualifier.Name, r.Qualifier.Name, r.Name.Name, strings.Join(qb.quals, " / "))
	}
	found := -1
	for _, s := range qb.sides {
		if i := s.src.ColumnIndex(r.Name.Name); i >= 0 {
			if found >= 0 {
				return -1, b.errAt(r.Name.P, "column %q is ambiguous: both %s and %s have it; qualify it (%s.%s or %s.%s)", r.Name.Name, qb.sides[0].names[0], qb.sides[1].names[0], qb.sides[0].names[0], r.Name.Name, qb.sides[1].names[0], r.Name.Name)
			}
			found = s.off + i
		}
	}
	if found < 0 {
		var cands []string
		for _, s := range qb.sides {
			cands = append(cands, columnNames(s.src)...)
		}
		return -1, b.errAt(r.Name.P, "unknown column %q in %s or %s%s", r.Name.Name, qb.sides[0].src.Name, qb.sides[1].src.Name, suggest(r.Name.Name, cands))
	}
	return found, nil
}

// knownColumn reports whether an unqualified name is a column of the
// query's input (either input of a join).
func (qb *queryBinder) knownColumn(name string) bool {
	if qb.sides == nil {
		return qb.src.ColumnIndex(name) >= 0
	}
	for _, s := range qb.sides {
		if s.src.ColumnIndex(name) >= 0 {
			return true
		}
	}
	return false
}

// colIndex resolves a column reference to its ordinal in the query's row
// (-1 and an error when it names none).
func (qb *queryBinder) colIndex(qual *parser.Ident, name parser.Ident) (int, error) {
	if qb.sides != nil {
		return qb.joinColumn(&parser.ColumnRef{Qualifier: qual, Name: name})
	}
	return qb.src.ColumnIndex(name.Name), nil
}

// explainJoin renders the join for explain: its inputs, key and state bound.
func (j *TemporalJoin) explain() string {
	kind := "inner"
	if j.Left {
		kind = "left"
	}
	keys := make([]string, len(j.StreamKey))
	for i := range j.StreamKey {
		keys[i] = j.StreamKey[i].String() + " = " + j.TableAlias + "." + j.Table.Columns[j.Table.PrimaryKey[i]].Name
	}
	t := j.Table
	return fmt.Sprintf("  temporal join (%s) %s AS %s FOR SYSTEM_TIME AS OF %s.%s ON %s\n"+
		"    [state: events wait until the table watermark (%s - %s) passes their time, at most %d (JoinBuffer) at once; per key, the versions from the last one at or before the stream watermark (%s - %s) less the allowed lateness]\n",
		kind, t.Name, j.TableAlias, j.StreamAlias, timeName(j.Stream), strings.Join(keys, " AND "),
		timeName(t), us(t.WatermarkDelay), DefaultJoinBuffer, timeName(j.Stream), us(j.Stream.WatermarkDelay))
}

// joinedColumn binds a column reference of a join query.
func (qb *queryBinder) joinedColumn(r *parser.ColumnRef, sc *scope) (Expr, error) {
	idx, err := qb.joinColumn(r)
	if err != nil {
		return nil, err
	}
	if sc.post {
		return nil, qb.b.errAt(r.Pos(), "column %q must appear in the GROUP BY clause or be used in an aggregate function", parser.Format(r))
	}
	c := qb.src.Columns[idx]
	qb.use(idx)
	return &ColRef{Index: idx, T: c.Type, Name: c.Name}, nil
}

// joinWindow refuses a window over the table's time: windows close by
// the stream's watermark, and the joined row's time is the event's.
func (qb *queryBinder) joinWindow(sel *parser.Select, w *Window) error {
	if qb.q.IJoin != nil {
		return qb.intervalWindow(sel, w)
	}
	if qb.sides == nil || w.TimeCol < qb.sides[1].off {
		return nil
	}
	j := qb.q.Join
	return qb.b.errAt(sel.From.Pos(), "the window is over %s.%s, a column of the table; a joined row has the event's time: window over %s.%s", j.TableAlias, j.Table.Columns[w.TimeCol-j.Offset].Name, j.StreamAlias, timeName(j.Stream))
}

// validateTable checks a registered versioned table (PrimaryKey set): key
// ordinals of distinct physical, non-JSON columns, an event time, no dedup.
func validateTable(s *Source) error {
	if s.PrimaryKey == nil {
		return nil
	}
	if s.TimeCol < 0 {
		return fmt.Errorf("%w: versioned table %q has no event-time column (TimeCol)", ErrInvalidSource, s.Name)
	}
	if s.Dedup != nil {
		return fmt.Errorf("%w: versioned table %q has a Dedup; deduplication applies to a stream", ErrInvalidSource, s.Name)
	}
	if len(s.PrimaryKey) == 0 {
		return fmt.Errorf("%w: versioned table %q has an empty PrimaryKey", ErrInvalidSource, s.Name)
	}
	seen := map[int]bool{}
	for _, k := range s.PrimaryKey {
		if k < 0 || k >= len(s.Columns) || seen[k] || s.Columns[k].Computed != nil || s.Columns[k].JSON {
			return fmt.Errorf("%w: versioned table %q PrimaryKey ordinal %d is not a distinct physical, non-JSON column", ErrInvalidSource, s.Name, k)
		}
		seen[k] = true
	}
	return nil
}
