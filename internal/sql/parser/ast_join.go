package parser

// JoinRef is FROM left [INNER | LEFT [OUTER]] JOIN right [FOR SYSTEM_TIME
// AS OF expr] [AS alias] ON cond. The parser takes any condition and any
// AS OF expression; the binder decides which joins ubik runs (an
// event-time temporal join of a stream with a versioned table).
type JoinRef struct {
	P     int // position of JOIN (or of INNER / LEFT before it)
	Left  TableRef
	Right *TableName
	Kind  JoinKind
	// AsOf is the FOR SYSTEM_TIME AS OF expression; nil when absent.
	AsOf Expr
	// AsOfP is the position of FOR (0 when absent).
	AsOfP int
	On    Expr
}

// JoinKind is INNER or LEFT.
type JoinKind uint8

// Join kinds.
const (
	InnerJoin JoinKind = iota
	LeftJoin
)

func (k JoinKind) String() string {
	if k == LeftJoin {
		return "LEFT JOIN"
	}
	return "JOIN"
}

func (n *JoinRef) Pos() int { return n.Left.Pos() }
func (*JoinRef) node()      {}
func (*JoinRef) tableRef()  {}
