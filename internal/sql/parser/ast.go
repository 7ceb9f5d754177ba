package parser

// The AST is sealed: every node interface carries an unexported marker
// method, so only this package can add node types and a type switch over a
// family can be checked for completeness by reading this file (the
// Prometheus promql/parser pattern).
//
// Every node records Pos, the byte offset of its first token in the script,
// so the binder can report errors at the offending node.

// Node is any AST node.
type Node interface {
	// Pos is the byte offset of the node's first token in the script.
	Pos() int
	node()
}

// Statement is one statement of a script.
type Statement interface {
	Node
	// Span is the byte range [start, end) of the statement's text.
	Span() (start, end int)
	stmt()
}

// Expr is a scalar expression.
type Expr interface {
	Node
	expr()
}

// TableRef is what a SELECT reads FROM.
type TableRef interface {
	Node
	tableRef()
}

// Script is a parsed script: its statements in order.
type Script struct {
	SQL   string
	Stmts []Statement
}

// Ident is an identifier. Unquoted identifiers keep the spelling of the
// text; matching is case-insensitive for both kinds, as in DuckDB (a quoted
// identifier only preserves its case for display).
type Ident struct {
	P      int
	Name   string
	Quoted bool
}

// ---- statements ----

// CreateSource is CREATE SOURCE name (columns, computed columns, WATERMARK
// ...) WITH (...).
type CreateSource struct {
	P, End    int
	Name      Ident
	Columns   []ColumnDef
	Watermark *Watermark // nil when absent
	Options   []Option
	// Table marks CREATE TABLE: a versioned table (joined FOR SYSTEM_TIME
	// AS OF), with PrimaryKey (nil when absent) at PrimaryKeyP.
	Table       bool
	PrimaryKey  []Ident
	PrimaryKeyP int
}

// ColumnDef is one declared column: a physical column (name type), read
// from each event, or a computed column (name AS expr), evaluated over the
// event's physical columns after decoding.
type ColumnDef struct {
	Name Ident
	Type TypeName // zero for a computed column
	Expr Expr     // the computed column's expression; nil for a physical column
}

// TypeName is a type as written: the upper-cased name and its numeric
// arguments (VARCHAR(10), DECIMAL(10,2)).
type TypeName struct {
	P    int
	Name string
	Args []int
}

// Watermark is WATERMARK FOR col AS expr.
type Watermark struct {
	P      int
	Column Ident
	Expr   Expr
}

// Option is one key = 'value' entry of a WITH (...) list.
type Option struct {
	P     int
	Key   string
	Value string
}

// CreateView is CREATE VIEW name AS SELECT ....
type CreateView struct {
	P, End int
	Name   Ident
	Query  *Select
}

// CreateSink is CREATE SINK name FROM query WITH (...).
type CreateSink struct {
	P, End  int
	Name    Ident
	From    Ident
	Options []Option
}

// Select is a SELECT query (also a statement on its own).
type Select struct {
	P, End  int
	Items   []SelectItem
	From    TableRef
	Where   Expr   // nil when absent
	GroupBy []Expr // nil when absent
	Having  Expr   // nil when absent
	Emit    *Emit  // nil when absent
}

// SelectItem is one SELECT list entry: an expression with an optional alias,
// or a star.
type SelectItem struct {
	P     int
	Star  bool // * or t.*
	Expr  Expr // nil for a star
	Alias *Ident
}

// EmitKind is the spelling of an EMIT clause.
type EmitKind uint8

// Emit clause kinds.
const (
	EmitNone EmitKind = iota // only ALLOWED LATENESS was given
	EmitFinal
	EmitEarly
	EmitChanges
)

func (k EmitKind) String() string {
	switch k {
	case EmitFinal:
		return "FINAL"
	case EmitEarly:
		return "EARLY"
	case EmitChanges:
		return "CHANGES"
	}
	return "NONE"
}

// Emit is EMIT FINAL | EMIT EARLY EVERY <interval> | EMIT CHANGES, with an
// optional ALLOWED LATENESS <interval>.
type Emit struct {
	P        int
	Kind     EmitKind
	Every    Expr // EMIT EARLY only
	Lateness Expr // nil when absent
}

// ---- table references ----

// TableName is FROM name [AS alias].
type TableName struct {
	Name  Ident
	Alias *Ident
}

// WindowTVF is FROM TABLE(TUMBLE|HOP|SESSION(TABLE t, DESCRIPTOR(col), args...)) [AS alias].
type WindowTVF struct {
	P       int
	Func    Ident // TUMBLE, HOP or SESSION as written
	Table   Ident
	TimeCol Ident
	Args    []Expr
	Alias   *Ident
}

// ---- expressions ----

// ColumnRef is a column name, optionally qualified (t.col).
type ColumnRef struct {
	Qualifier *Ident
	Name      Ident
}

// NumberLit is a numeric literal as written.
type NumberLit struct {
	P    int
	Text string
}

// StringLit is a string literal (quotes removed, ” unescaped).
type StringLit struct {
	P     int
	Value string
}

// BoolLit is TRUE or FALSE.
type BoolLit struct {
	P     int
	Value bool
}

// NullLit is NULL.
type NullLit struct{ P int }

// TypedLit is TIMESTAMP '...' or DATE '...'.
type TypedLit struct {
	P     int
	Type  string // TIMESTAMP or DATE
	Value string
}

// IntervalLit is INTERVAL '1 minute' or INTERVAL '1' MINUTE.
type IntervalLit struct {
	P     int
	Value string
	Unit  string // upper-cased trailing unit, "" when the unit is inside Value
}

// BinaryExpr is L op R for arithmetic, comparison, AND, OR and ||.
type BinaryExpr struct {
	P    int // position of the operator
	Op   string
	L, R Expr
}

// UnaryExpr is -X, +X or NOT X.
type UnaryExpr struct {
	P  int
	Op string // "-", "+" or "NOT"
	X  Expr
}

// FuncCall is name(args), name(*), name(DISTINCT args), each optionally
// followed by FILTER (WHERE cond) (aggregates only; the binder checks).
type FuncCall struct {
	Name     Ident
	Args     []Expr
	Star     bool
	Distinct bool
	Filter   Expr // nil without FILTER
}

// CaseExpr is CASE [operand] WHEN ... THEN ... [ELSE ...] END.
type CaseExpr struct {
	P       int
	Operand Expr // nil for a searched CASE
	Whens   []When
	Else    Expr // nil when absent
}

// When is one WHEN cond THEN result arm.
type When struct {
	Cond   Expr
	Result Expr
}

// CastExpr is CAST(x AS T), TRY_CAST(x AS T) or x::T.
type CastExpr struct {
	P    int
	X    Expr
	Type TypeName
	Try  bool
}

// InExpr is X [NOT] IN (list).
type InExpr struct {
	P    int // position of IN (or NOT)
	X    Expr
	List []Expr
	Not  bool
}

// IsNullExpr is X IS [NOT] NULL.
type IsNullExpr struct {
	P   int
	X   Expr
	Not bool
}

// IsDistinctExpr is L IS [NOT] DISTINCT FROM R.
type IsDistinctExpr struct {
	P    int
	L, R Expr
	Not  bool
}

// IsBoolExpr is X IS [NOT] TRUE|FALSE.
type IsBoolExpr struct {
	P     int
	X     Expr
	Value bool
	Not   bool
}

// BetweenExpr is X [NOT] BETWEEN Lo AND Hi.
type BetweenExpr struct {
	P      int
	X      Expr
	Lo, Hi Expr
	Not    bool
}

// LikeExpr is X [NOT] LIKE|ILIKE pattern.
type LikeExpr struct {
	P       int
	X       Expr
	Pattern Expr
	Not     bool
	ILike   bool
}

// ParenExpr is (X); kept so that error positions and printed names follow
// the text.
type ParenExpr struct {
	P int
	X Expr
}

// ---- Pos and markers ----

func (n *Ident) Pos() int          { return n.P }
func (n *CreateSource) Pos() int   { return n.P }
func (n *CreateView) Pos() int     { return n.P }
func (n *CreateSink) Pos() int     { return n.P }
func (n *Select) Pos() int         { return n.P }
func (n *TableName) Pos() int      { return n.Name.P }
func (n *WindowTVF) Pos() int      { return n.P }
func (n *ColumnRef) Pos() int      { return refPos(n) }
func (n *NumberLit) Pos() int      { return n.P }
func (n *StringLit) Pos() int      { return n.P }
func (n *BoolLit) Pos() int        { return n.P }
func (n *NullLit) Pos() int        { return n.P }
func (n *TypedLit) Pos() int       { return n.P }
func (n *IntervalLit) Pos() int    { return n.P }
func (n *BinaryExpr) Pos() int     { return n.L.Pos() }
func (n *UnaryExpr) Pos() int      { return n.P }
func (n *FuncCall) Pos() int       { return n.Name.P }
func (n *CaseExpr) Pos() int       { return n.P }
func (n *CastExpr) Pos() int       { return n.P }
func (n *InExpr) Pos() int         { return n.X.Pos() }
func (n *IsNullExpr) Pos() int     { return n.X.Pos() }
func (n *IsDistinctExpr) Pos() int { return n.L.Pos() }
func (n *IsBoolExpr) Pos() int     { return n.X.Pos() }
func (n *BetweenExpr) Pos() int    { return n.X.Pos() }
func (n *LikeExpr) Pos() int       { return n.X.Pos() }
func (n *ParenExpr) Pos() int      { return n.P }

func refPos(n *ColumnRef) int {
	if n.Qualifier != nil {
		return n.Qualifier.P
	}
	return n.Name.P
}

func (*Ident) node()          {}
func (*CreateSource) node()   {}
func (*CreateView) node()     {}
func (*CreateSink) node()     {}
func (*Select) node()         {}
func (*TableName) node()      {}
func (*WindowTVF) node()      {}
func (*ColumnRef) node()      {}
func (*NumberLit) node()      {}
func (*StringLit) node()      {}
func (*BoolLit) node()        {}
func (*NullLit) node()        {}
func (*TypedLit) node()       {}
func (*IntervalLit) node()    {}
func (*BinaryExpr) node()     {}
func (*UnaryExpr) node()      {}
func (*FuncCall) node()       {}
func (*CaseExpr) node()       {}
func (*CastExpr) node()       {}
func (*InExpr) node()         {}
func (*IsNullExpr) node()     {}
func (*IsDistinctExpr) node() {}
func (*IsBoolExpr) node()     {}
func (*BetweenExpr) node()    {}
func (*LikeExpr) node()       {}
func (*ParenExpr) node()      {}

func (*CreateSource) stmt() {}
func (*CreateView) stmt()   {}
func (*CreateSink) stmt()   {}
func (*Select) stmt()       {}

func (n *CreateSource) Span() (int, int) { return n.P, n.End }
func (n *CreateView) Span() (int, int)   { return n.P, n.End }
func (n *CreateSink) Span() (int, int)   { return n.P, n.End }
func (n *Select) Span() (int, int)       { return n.P, n.End }

func (*TableName) tableRef() {}
func (*WindowTVF) tableRef() {}

func (*ColumnRef) expr()      {}
func (*NumberLit) expr()      {}
func (*StringLit) expr()      {}
func (*BoolLit) expr()        {}
func (*NullLit) expr()        {}
func (*TypedLit) expr()       {}
func (*IntervalLit) expr()    {}
func (*BinaryExpr) expr()     {}
func (*UnaryExpr) expr()      {}
func (*FuncCall) expr()       {}
func (*CaseExpr) expr()       {}
func (*CastExpr) expr()       {}
func (*InExpr) expr()         {}
func (*IsNullExpr) expr()     {}
func (*IsDistinctExpr) expr() {}
func (*IsBoolExpr) expr()     {}
func (*BetweenExpr) expr()    {}
func (*LikeExpr) expr()       {}
func (*ParenExpr) expr()      {}
