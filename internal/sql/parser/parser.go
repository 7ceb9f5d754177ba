// Package parser is ubik's SQL front end: a hand-written lexer and
// recursive-descent parser producing a sealed AST. It knows syntax only;
// names, types and the meaning of windows are the binder's business (package
// internal/sql/plan). Every node carries the byte offset of its first token, and every
// error is an *Error with a position, so a caller can underline the bad span.
package parser

import (
	"strconv"
	"strings"
)

// MaxNesting bounds expression nesting (parentheses, function calls, CASE,
// prefix operators: each is a level) so hostile input cannot exhaust the
// stack. A flat chain such as a+b+...+z is one level however long it is;
// plan bounds its length separately.
const MaxNesting = 200

// reserved words cannot be used as bare column names or implicit aliases.
var reserved = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "GROUP": true, "BY": true, "HAVING": true,
	"AS": true, "AND": true, "OR": true, "NOT": true, "CASE": true, "WHEN": true, "THEN": true,
	"ELSE": true, "END": true, "IS": true, "NULL": true, "TRUE": true, "FALSE": true, "IN": true,
	"BETWEEN": true, "LIKE": true, "ILIKE": true, "EMIT": true, "DISTINCT": true, "ALL": true,
	"CAST": true, "ON": true, "WITH": true, "CREATE": true, "ORDER": true, "LIMIT": true,
	"UNION": true, "JOIN": true, "ALLOWED": true, "TABLE": true, "INTERVAL": true,
	"WINDOW": true, "INTO": true, "TRY_CAST": true,
}

// Parse parses a script: statements separated by semicolons.
func Parse(sql string) (*Script, error) {
	toks, lerr := lex(sql)
	if lerr != nil {
		return nil, lerr
	}
	p := &parser{sql: sql, toks: toks}
	s, err := p.script()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ParseExpr parses a single scalar expression (used by tests and tools).
func ParseExpr(sql string) (Expr, error) {
	toks, lerr := lex(sql)
	if lerr != nil {
		return nil, lerr
	}
	p := &parser{sql: sql, toks: toks}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, p.unexpected("end of expression")
	}
	return e, nil
}

type parser struct {
	sql   string
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// prevEnd is the end offset of the last consumed token.
func (p *parser) prevEnd() int {
	if p.i == 0 {
		return 0
	}
	return p.toks[p.i-1].end
}

func (p *parser) errAt(pos int, format string, args ...any) *Error {
	return Errorf(p.sql, pos, format, args...)
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string '" + t.text + "'"
	case tQIdent:
		return `identifier "` + t.text + `"`
	case tIdent:
		if reserved[strings.ToUpper(t.text)] {
			return "keyword " + strings.ToUpper(t.text)
		}
		return "identifier " + t.text
	case tNumber:
		return "number " + t.text
	}
	return `"` + t.text + `"`
}

func (p *parser) unexpected(want string) *Error {
	t := p.peek()
	return p.errAt(t.pos, "expected %s, found %s", want, describe(t))
}

// isKw reports whether t is the (unquoted) keyword kw (upper case).
func isKw(t token, kw string) bool {
	return t.kind == tIdent && len(t.text) == len(kw) && strings.EqualFold(t.text, kw)
}

func (p *parser) acceptKw(kw string) bool {
	if isKw(p.peek(), kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKw(kw string) (token, *Error) {
	if !isKw(p.peek(), kw) {
		return token{}, p.unexpected(kw)
	}
	return p.next(), nil
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == op
}

func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) (token, *Error) {
	if !p.isOp(op) {
		return token{}, p.unexpected(`"` + op + `"`)
	}
	return p.next(), nil
}

// ident reads a (non-reserved or quoted) identifier.
func (p *parser) ident(what string) (Ident, *Error) {
	t := p.peek()
	switch {
	case t.kind == tQIdent:
		p.i++
		return Ident{P: t.pos, Name: t.text, Quoted: true}, nil
	case t.kind == tIdent && !reserved[strings.ToUpper(t.text)]:
		p.i++
		return Ident{P: t.pos, Name: t.text}, nil
	}
	return Ident{}, p.unexpected(what)
}

func (p *parser) script() (*Script, *Error) {
	s := &Script{SQL: p.sql}
	for {
		for p.acceptOp(";") {
		}
		if p.peek().kind == tEOF {
			return s, nil
		}
		st, err := p.statement()
		if err != nil {
			return nil, err
		}
		s.Stmts = append(s.Stmts, st)
		if p.peek().kind == tEOF {
			return s, nil
		}
		if !p.isOp(";") {
			return nil, p.unexpected(`";" or end of input`)
		}
	}
}

func (p *parser) statement() (Statement, *Error) {
	t := p.peek()
	switch {
	case isKw(t, "SELECT"):
		return p.selectStmt()
	case isKw(t, "CREATE"):
		p.next()
		switch {
		case p.acceptKw("SOURCE"), p.acceptKw("STREAM"):
			return p.createSource(t.pos)
		case p.acceptKw("VIEW"):
			return p.createView(t.pos)
		case p.acceptKw("SINK"):
			return p.createSink(t.pos)
		case p.acceptKw("TABLE"):
			st, err := p.createSource(t.pos)
			if err == nil {
				st.(*CreateSource).Table = true
			}
			return st, err
		}
		return nil, p.unexpected("SOURCE, TABLE, VIEW or SINK after CREATE")
	}
	return nil, p.unexpected("SELECT or CREATE")
}

func (p *parser) createSource(start int) (Statement, *Error) {
	name, err := p.ident("source name")
	if err != nil {
		return nil, err
	}
	cs := &CreateSource{P: start, Name: name}
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	for {
		if isKw(p.peek(), "PRIMARY") {
			if err := p.primaryKey(cs, p.next().pos); err != nil {
				return nil, err
			}
		} else if isKw(p.peek(), "WATERMARK") {
			wt := p.next()
			if cs.Watermark != nil {
				return nil, p.errAt(wt.pos, "only one WATERMARK clause is allowed per source")
			}
			if _, err := p.expectKw("FOR"); err != nil {
				return nil, err
			}
			col, err := p.ident("the event-time column after WATERMARK FOR")
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKw("AS"); err != nil {
				return nil, err
			}
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			cs.Watermark = &Watermark{P: wt.pos, Column: col, Expr: e}
		} else {
			col, err := p.ident("column name or WATERMARK")
			if err != nil {
				return nil, err
			}
			if p.acceptKw("AS") {
				// A computed column, as in Flink: name AS expression.
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				cs.Columns = append(cs.Columns, ColumnDef{Name: col, Expr: e})
			} else {
				tn, err := p.typeName()
				if err != nil {
					return nil, err
				}
				if t := p.peek(); isKw(t, "AS") {
					return nil, p.errAt(t.pos, "a computed column has no declared type (it takes its expression's): write %s AS expression, or CAST the expression", col.Name)
				}
				cs.Columns = append(cs.Columns, ColumnDef{Name: col, Type: tn})
			}
		}
		if p.acceptOp(",") {
			continue
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		break
	}
	if p.acceptKw("WITH") {
		opts, err := p.options()
		if err != nil {
			return nil, err
		}
		cs.Options = opts
	}
	cs.End = p.prevEnd()
	return cs, nil
}

// typeName reads a type: one or two words (DOUBLE PRECISION) and optional
// numeric arguments.
func (p *parser) typeName() (TypeName, *Error) {
	t := p.peek()
	if t.kind != tIdent {
		return TypeName{}, p.unexpected("type name")
	}
	p.next()
	tn := TypeName{P: t.pos, Name: strings.ToUpper(t.text)}
	if tn.Name == "DOUBLE" && p.acceptKw("PRECISION") {
		tn.Name = "DOUBLE PRECISION"
	}
	if tn.Name == "CHARACTER" && p.acceptKw("VARYING") {
		tn.Name = "CHARACTER VARYING"
	}
	if p.acceptOp("(") {
		for {
			n := p.peek()
			if n.kind != tNumber {
				return TypeName{}, p.unexpected("type argument (a number)")
			}
			v, err := strconv.Atoi(n.text)
			if err != nil || v < 0 || v > 1<<20 {
				return TypeName{}, p.errAt(n.pos, "type argument %s is not a small non-negative integer", n.text)
			}
			p.next()
			tn.Args = append(tn.Args, v)
			if p.acceptOp(",") {
				continue
			}
			if _, err := p.expectOp(")"); err != nil {
				return TypeName{}, err
			}
			break
		}
	}
	return tn, nil
}

// options reads ( key = value, ... ). Keys may be identifiers (dotted) or
// strings; values strings, numbers or bare words, kept verbatim.
func (p *parser) options() ([]Option, *Error) {
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	var opts []Option
	if p.acceptOp(")") {
		return opts, nil
	}
	for {
		kt := p.peek()
		var key string
		switch kt.kind {
		case tString, tQIdent, tIdent:
			p.next()
			key = kt.text
			for kt.kind == tIdent && p.isOp(".") {
				p.next()
				nt := p.peek()
				if nt.kind != tIdent {
					return nil, p.unexpected("option name part after \".\"")
				}
				p.next()
				key += "." + nt.text
			}
		default:
			return nil, p.unexpected("option name")
		}
		if _, err := p.expectOp("="); err != nil {
			return nil, err
		}
		vt := p.peek()
		var val string
		switch vt.kind {
		case tString, tNumber, tIdent:
			p.next()
			val = vt.text
		case tOp:
			if vt.text == "-" && p.peekAt(1).kind == tNumber {
				p.next()
				val = "-" + p.next().text
				break
			}
			return nil, p.unexpected("option value (a string)")
		default:
			return nil, p.unexpected("option value (a string)")
		}
		opts = append(opts, Option{P: kt.pos, Key: key, Value: val})
		if p.acceptOp(",") {
			continue
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return opts, nil
	}
}

func (p *parser) createView(start int) (Statement, *Error) {
	name, err := p.ident("view name")
	if err != nil {
		return nil, err
	}
	if _, err := p.expectKw("AS"); err != nil {
		return nil, err
	}
	paren := p.acceptOp("(")
	if !isKw(p.peek(), "SELECT") {
		return nil, p.unexpected("SELECT")
	}
	q, err := p.selectStmt()
	if err != nil {
		return nil, err
	}
	if paren {
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return &CreateView{P: start, End: p.prevEnd(), Name: name, Query: q}, nil
}

func (p *parser) createSink(start int) (Statement, *Error) {
	name, err := p.ident("sink name")
	if err != nil {
		return nil, err
	}
	if _, err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	from, err := p.ident("query name after FROM")
	if err != nil {
		return nil, err
	}
	cs := &CreateSink{P: start, Name: name, From: from}
	if p.acceptKw("WITH") {
		opts, err := p.options()
		if err != nil {
			return nil, err
		}
		cs.Options = opts
	}
	cs.End = p.prevEnd()
	return cs, nil
}

func (p *parser) selectStmt() (*Select, *Error) {
	st, err := p.expectKw("SELECT")
	if err != nil {
		return nil, err
	}
	s := &Select{P: st.pos}
	if isKw(p.peek(), "DISTINCT") {
		return nil, p.errAt(p.peek().pos, "SELECT DISTINCT is not supported: use GROUP BY")
	}
	p.acceptKw("ALL")
	for {
		item, err := p.selectItem()
		if err != nil {
			return nil, err
		}
		s.Items = append(s.Items, item)
		if !p.acceptOp(",") {
			break
		}
	}
	if _, err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	from, err := p.tableRef()
	if err != nil {
		return nil, err
	}
	s.From = from
	if s.From, err = p.joinTail(from); err != nil {
		return nil, err
	}
	if p.acceptKw("WHERE") {
		if s.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if isKw(p.peek(), "GROUP") {
		p.next()
		if _, err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			s.GroupBy = append(s.GroupBy, e)
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if p.acceptKw("HAVING") {
		if s.Having, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if isKw(p.peek(), "EMIT") || isKw(p.peek(), "ALLOWED") {
		if s.Emit, err = p.emit(); err != nil {
			return nil, err
		}
	}
	if t := p.peek(); isKw(t, "ORDER") || isKw(t, "LIMIT") || isKw(t, "UNION") || isKw(t, "WINDOW") {
		return nil, p.errAt(t.pos, "%s is not supported in a streaming query", strings.ToUpper(t.text))
	}
	s.End = p.prevEnd()
	return s, nil
}

func (p *parser) selectItem() (SelectItem, *Error) {
	t := p.peek()
	if p.acceptOp("*") {
		return SelectItem{P: t.pos, Star: true}, nil
	}
	// t.* (qualified star)
	if (t.kind == tIdent || t.kind == tQIdent) && p.peekAt(1).kind == tOp && p.peekAt(1).text == "." &&
		p.peekAt(2).kind == tOp && p.peekAt(2).text == "*" {
		p.i += 3
		return SelectItem{P: t.pos, Star: true}, nil
	}
	e, err := p.expr()
	if err != nil {
		return SelectItem{}, err
	}
	item := SelectItem{P: t.pos, Expr: e}
	alias, err := p.optAlias()
	if err != nil {
		return SelectItem{}, err
	}
	item.Alias = alias
	return item, nil
}

// optAlias reads [AS] alias.
func (p *parser) optAlias() (*Ident, *Error) {
	if p.acceptKw("AS") {
		id, err := p.ident("alias after AS")
		if err != nil {
			return nil, err
		}
		return &id, nil
	}
	t := p.peek()
	if t.kind == tQIdent || t.kind == tIdent && !reserved[strings.ToUpper(t.text)] && !joinWords[strings.ToUpper(t.text)] {
		id, _ := p.ident("alias")
		return &id, nil
	}
	return nil, nil
}

func (p *parser) tableRef() (TableRef, *Error) {
	t := p.peek()
	if isKw(t, "TABLE") {
		p.next()
		if _, err := p.expectOp("("); err != nil {
			return nil, err
		}
		fn, err := p.ident("TUMBLE, HOP or SESSION")
		if err != nil {
			return nil, err
		}
		switch strings.ToUpper(fn.Name) {
		case "TUMBLE", "HOP", "SESSION":
		default:
			return nil, p.errAt(fn.P, "unknown table function %s: expected TUMBLE, HOP or SESSION", fn.Name)
		}
		if _, err := p.expectOp("("); err != nil {
			return nil, err
		}
		if _, err := p.expectKw("TABLE"); err != nil {
			return nil, err
		}
		tbl, err := p.ident("source name after TABLE")
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(","); err != nil {
			return nil, err
		}
		if _, err := p.expectKw("DESCRIPTOR"); err != nil {
			return nil, err
		}
		if _, err := p.expectOp("("); err != nil {
			return nil, err
		}
		col, err := p.ident("time column in DESCRIPTOR(...)")
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		w := &WindowTVF{P: t.pos, Func: fn, Table: tbl, TimeCol: col}
		for p.acceptOp(",") {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			w.Args = append(w.Args, e)
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		if w.Alias, err = p.optAlias(); err != nil {
			return nil, err
		}
		return w, nil
	}
	if t.kind == tOp && t.text == "(" {
		return nil, p.errAt(t.pos, "subqueries are not supported: FROM names a source")
	}
	name, err := p.ident("source name")
	if err != nil {
		return nil, err
	}
	tn := &TableName{Name: name}
	if tn.Alias, err = p.optAlias(); err != nil {
		return nil, err
	}
	return tn, nil
}

func (p *parser) emit() (*Emit, *Error) {
	t := p.peek()
	e := &Emit{P: t.pos}
	if p.acceptKw("EMIT") {
		switch {
		case p.acceptKw("FINAL"):
			e.Kind = EmitFinal
		case p.acceptKw("CHANGES"):
			e.Kind = EmitChanges
		case p.acceptKw("EARLY"):
			e.Kind = EmitEarly
			if _, err := p.expectKw("EVERY"); err != nil {
				return nil, err
			}
			iv, err := p.intervalArg("an INTERVAL after EMIT EARLY EVERY")
			if err != nil {
				return nil, err
			}
			e.Every = iv
		default:
			return nil, p.unexpected("FINAL, EARLY or CHANGES after EMIT")
		}
	}
	if p.acceptKw("ALLOWED") {
		if _, err := p.expectKw("LATENESS"); err != nil {
			return nil, err
		}
		iv, err := p.intervalArg("an INTERVAL after ALLOWED LATENESS")
		if err != nil {
			return nil, err
		}
		e.Lateness = iv
	}
	return e, nil
}

func (p *parser) intervalArg(want string) (Expr, *Error) {
	if !isKw(p.peek(), "INTERVAL") {
		return nil, p.unexpected(want)
	}
	return p.primary()
}

// ---- expressions ----

// Binding powers, low to high.
const (
	precOr = iota + 1
	precAnd
	precNot
	precIs
	precCmp
	precIn // IN, BETWEEN, LIKE
	precConcat
	precAdd
	precMul
	precUnary
	precCast
)

func (p *parser) expr() (Expr, *Error) { return p.exprPrec(precOr) }

func (p *parser) exprPrec(min int) (Expr, *Error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > MaxNesting {
		return nil, p.errAt(p.peek().pos, "expression nested too deeply (more than %d levels)", MaxNesting)
	}
	left, err := p.prefix(min)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case isKw(t, "OR") && min <= precOr:
			p.next()
			r, err := p.exprPrec(precOr + 1)
			if err != nil {
				return nil, err
			}
			left = &BinaryExpr{P: t.pos, Op: "OR", L: left, R: r}
		case isKw(t, "AND") && min <= precAnd:
			p.next()
			r, err := p.exprPrec(precAnd + 1)
			if err != nil {
				return nil, err
			}
			left = &BinaryExpr{P: t.pos, Op: "AND", L: left, R: r}
		case isKw(t, "IS") && min <= precIs:
			p.next()
			not := p.acceptKw("NOT")
			switch {
			case p.acceptKw("NULL"):
				left = &IsNullExpr{P: t.pos, X: left, Not: not}
			case p.acceptKw("TRUE"):
				left = &IsBoolExpr{P: t.pos, X: left, Value: true, Not: not}
			case p.acceptKw("FALSE"):
				left = &IsBoolExpr{P: t.pos, X: left, Value: false, Not: not}
			case p.acceptKw("DISTINCT"):
				if _, err := p.expectKw("FROM"); err != nil {
					return nil, err
				}
				r, err := p.exprPrec(precIs + 1)
				if err != nil {
					return nil, err
				}
				left = &IsDistinctExpr{P: t.pos, L: left, R: r, Not: not}
			default:
				return nil, p.unexpected("NULL, TRUE, FALSE or DISTINCT FROM after IS")
			}
		case t.kind == tOp && isCmpOp(t.text) && min <= precCmp:
			p.next()
			r, err := p.exprPrec(precCmp + 1)
			if err != nil {
				return nil, err
			}
			op := t.text
			if op == "!=" {
				op = "<>"
			}
			left = &BinaryExpr{P: t.pos, Op: op, L: left, R: r}
		case min <= precIn && (isKw(t, "IN") || isKw(t, "BETWEEN") || isKw(t, "LIKE") || isKw(t, "ILIKE") ||
			isKw(t, "NOT") && (isKw(p.peekAt(1), "IN") || isKw(p.peekAt(1), "BETWEEN") || isKw(p.peekAt(1), "LIKE") || isKw(p.peekAt(1), "ILIKE"))):
			p.next()
			not := false
			kw := t
			if isKw(t, "NOT") {
				not = true
				kw = p.next()
			}
			switch strings.ToUpper(kw.text) {
			case "IN":
				if _, err := p.expectOp("("); err != nil {
					return nil, err
				}
				if isKw(p.peek(), "SELECT") {
					return nil, p.errAt(p.peek().pos, "subqueries are not supported in IN (...)")
				}
				in := &InExpr{P: t.pos, X: left, Not: not}
				for {
					e, err := p.expr()
					if err != nil {
						return nil, err
					}
					in.List = append(in.List, e)
					if !p.acceptOp(",") {
						break
					}
				}
				if _, err := p.expectOp(")"); err != nil {
					return nil, err
				}
				left = in
			case "BETWEEN":
				lo, err := p.exprPrec(precIn + 1)
				if err != nil {
					return nil, err
				}
				if _, err := p.expectKw("AND"); err != nil {
					return nil, err
				}
				hi, err := p.exprPrec(precIn + 1)
				if err != nil {
					return nil, err
				}
				left = &BetweenExpr{P: t.pos, X: left, Lo: lo, Hi: hi, Not: not}
			default: // LIKE, ILIKE
				pat, err := p.exprPrec(precIn + 1)
				if err != nil {
					return nil, err
				}
				left = &LikeExpr{P: t.pos, X: left, Pattern: pat, Not: not, ILike: strings.EqualFold(kw.text, "ILIKE")}
			}
		case t.kind == tOp && (t.text == "||" || t.text == "->" || t.text == "->>") && min <= precConcat:
			// JSON access binds like || (PostgreSQL's "other operators"):
			// above comparison and LIKE, below + and -.
			p.next()
			r, err := p.exprPrec(precConcat + 1)
			if err != nil {
				return nil, err
			}
			left = &BinaryExpr{P: t.pos, Op: t.text, L: left, R: r}
		case t.kind == tOp && (t.text == "+" || t.text == "-") && min <= precAdd:
			p.next()
			r, err := p.exprPrec(precAdd + 1)
			if err != nil {
				return nil, err
			}
			left = &BinaryExpr{P: t.pos, Op: t.text, L: left, R: r}
		case t.kind == tOp && (t.text == "*" || t.text == "/" || t.text == "//" || t.text == "%") && min <= precMul:
			p.next()
			r, err := p.exprPrec(precMul + 1)
			if err != nil {
				return nil, err
			}
			left = &BinaryExpr{P: t.pos, Op: t.text, L: left, R: r}
		case t.kind == tOp && t.text == "::":
			p.next()
			tn, err := p.typeName()
			if err != nil {
				return nil, err
			}
			left = &CastExpr{P: t.pos, X: left, Type: tn}
		default:
			return left, nil
		}
	}
}

func isCmpOp(s string) bool {
	switch s {
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func (p *parser) prefix(min int) (Expr, *Error) {
	t := p.peek()
	if isKw(t, "NOT") {
		p.next()
		x, err := p.exprPrec(precNot)
		if err != nil {
			return nil, err
		}
		return &UnaryExpr{P: t.pos, Op: "NOT", X: x}, nil
	}
	if t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.next()
		x, err := p.exprPrec(precUnary)
		if err != nil {
			return nil, err
		}
		return &UnaryExpr{P: t.pos, Op: t.text, X: x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (Expr, *Error) {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.next()
		return &NumberLit{P: t.pos, Text: t.text}, nil
	case tString:
		p.next()
		return &StringLit{P: t.pos, Value: t.text}, nil
	case tOp:
		if t.text == "(" {
			p.next()
			if isKw(p.peek(), "SELECT") {
				return nil, p.errAt(p.peek().pos, "subqueries are not supported")
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return &ParenExpr{P: t.pos, X: x}, nil
		}
		return nil, p.unexpected("an expression")
	case tQIdent:
		return p.nameOrCall()
	case tIdent:
		kw := strings.ToUpper(t.text)
		switch kw {
		case "NULL":
			p.next()
			return &NullLit{P: t.pos}, nil
		case "TRUE", "FALSE":
			p.next()
			return &BoolLit{P: t.pos, Value: kw == "TRUE"}, nil
		case "CASE":
			return p.caseExpr()
		case "CAST", "TRY_CAST":
			p.next()
			if _, err := p.expectOp("("); err != nil {
				return nil, err
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKw("AS"); err != nil {
				return nil, err
			}
			tn, err := p.typeName()
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return &CastExpr{P: t.pos, X: x, Type: tn, Try: kw == "TRY_CAST"}, nil
		case "INTERVAL":
			p.next()
			v := p.peek()
			var val string
			switch {
			case v.kind == tString || v.kind == tNumber:
				p.next()
				val = v.text
			case v.kind == tOp && v.text == "-" && p.peekAt(1).kind == tNumber:
				p.next()
				val = "-" + p.next().text
			default:
				return nil, p.unexpected("a string after INTERVAL, as in INTERVAL '1' MINUTE")
			}
			lit := &IntervalLit{P: t.pos, Value: val}
			if u := p.peek(); u.kind == tIdent && isIntervalUnit(u.text) {
				p.next()
				lit.Unit = strings.ToUpper(u.text)
			} else if v.kind != tString {
				return nil, p.unexpected("an interval unit (SECOND, MINUTE, HOUR, DAY, ...)")
			}
			return lit, nil
		case "TIMESTAMP", "DATE":
			if p.peekAt(1).kind == tString {
				p.next()
				s := p.next()
				return &TypedLit{P: t.pos, Type: kw, Value: s.text}, nil
			}
		}
		if reserved[kw] {
			return nil, p.unexpected("an expression")
		}
		return p.nameOrCall()
	}
	return nil, p.unexpected("an expression")
}

var intervalUnits = map[string]bool{
	"MICROSECOND": true, "MICROSECONDS": true, "MILLISECOND": true, "MILLISECONDS": true,
	"SECOND": true, "SECONDS": true, "MINUTE": true, "MINUTES": true, "HOUR": true, "HOURS": true,
	"DAY": true, "DAYS": true, "WEEK": true, "WEEKS": true, "MONTH": true, "MONTHS": true,
	"YEAR": true, "YEARS": true,
}

func isIntervalUnit(s string) bool { return intervalUnits[strings.ToUpper(s)] }

// nameOrCall reads a column reference (name or t.name) or a function call.
func (p *parser) nameOrCall() (Expr, *Error) {
	first, err := p.ident("a column or function name")
	if err != nil {
		return nil, err
	}
	if p.isOp("(") {
		if !first.Quoted {
			if x, ok, err := p.specialCall(first); ok || err != nil {
				return x, err
			}
		}
		p.next()
		fc := &FuncCall{Name: first}
		if p.acceptOp("*") {
			fc.Star = true
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return p.filterClause(fc)
		}
		if p.acceptOp(")") {
			return p.filterClause(fc)
		}
		if p.acceptKw("DISTINCT") {
			fc.Distinct = true
		} else {
			p.acceptKw("ALL")
		}
		for {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			fc.Args = append(fc.Args, e)
			if !p.acceptOp(",") {
				break
			}
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return p.filterClause(fc)
	}
	if p.isOp(".") {
		p.next()
		second, err := p.ident("a column name after \".\"")
		if err != nil {
			return nil, err
		}
		if p.isOp(".") || p.isOp("(") {
			return nil, p.errAt(p.peek().pos, "unexpected %s: names have at most two parts (source.column)", describe(p.peek()))
		}
		return &ColumnRef{Qualifier: &first, Name: second}, nil
	}
	return &ColumnRef{Name: first}, nil
}

func (p *parser) caseExpr() (Expr, *Error) {
	t := p.next() // CASE
	c := &CaseExpr{P: t.pos}
	if !isKw(p.peek(), "WHEN") {
		op, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Operand = op
	}
	for p.acceptKw("WHEN") {
		cond, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectKw("THEN"); err != nil {
			return nil, err
		}
		res, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, When{Cond: cond, Result: res})
	}
	if len(c.Whens) == 0 {
		return nil, p.unexpected("WHEN")
	}
	if p.acceptKw("ELSE") {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.Else = e
	}
	if _, err := p.expectKw("END"); err != nil {
		return nil, err
	}
	return c, nil
}

// specialCall parses the SQL-standard call forms with keywords inside the
// parentheses, as plain function calls (DuckDB does the same):
//
//	EXTRACT(field FROM x)                      date_part('field', x)
//	SUBSTRING(x FROM a [FOR n]), (x FOR n)     substring(x, a[, n])
//	TRIM([BOTH|LEADING|TRAILING] [c] FROM x)   trim / ltrim / rtrim(x[, c])
//
// It reports ok=false (consuming nothing) when the call is an ordinary one.
// The "(" is the current token.
func (p *parser) specialCall(name Ident) (Expr, bool, *Error) {
	upper := strings.ToUpper(name.Name)
	switch upper {
	case "EXTRACT":
		f := p.peekAt(1)
		if !(f.kind == tIdent || f.kind == tString) || !isKw(p.peekAt(2), "FROM") {
			return nil, false, nil
		}
		p.next() // (
		p.next() // field
		p.next() // FROM
		x, err := p.expr()
		if err != nil {
			return nil, true, err
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, true, err
		}
		field := &StringLit{P: f.pos, Value: strings.ToLower(f.text)}
		return &FuncCall{Name: Ident{P: name.P, Name: "date_part"}, Args: []Expr{field, x}}, true, nil
	case "SUBSTRING", "SUBSTR":
		// Look ahead for FROM or FOR at this parenthesis level.
		if !p.keywordInCall("FROM", "FOR") {
			return nil, false, nil
		}
		p.next() // (
		x, err := p.expr()
		if err != nil {
			return nil, true, err
		}
		var start, length Expr
		if p.acceptKw("FROM") {
			if start, err = p.expr(); err != nil {
				return nil, true, err
			}
		}
		if p.acceptKw("FOR") {
			if length, err = p.expr(); err != nil {
				return nil, true, err
			}
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, true, err
		}
		if start == nil {
			start = &NumberLit{P: name.P, Text: "1"}
		}
		args := []Expr{x, start}
		if length != nil {
			args = append(args, length)
		}
		return &FuncCall{Name: Ident{P: name.P, Name: "substring"}, Args: args}, true, nil
	case "TRIM":
		mode := ""
		if t := p.peekAt(1); isKw(t, "BOTH") || isKw(t, "LEADING") || isKw(t, "TRAILING") {
			mode = strings.ToUpper(t.text)
		} else if !p.keywordInCall("FROM") {
			return nil, false, nil
		}
		p.next() // (
		if mode != "" {
			p.next()
		}
		var chars, x Expr
		var err *Error
		if !p.acceptKw("FROM") {
			if chars, err = p.expr(); err != nil {
				return nil, true, err
			}
			if !p.acceptKw("FROM") {
				// TRIM(BOTH x): x is the string, not the characters.
				x, chars = chars, nil
			}
		}
		if x == nil {
			if x, err = p.expr(); err != nil {
				return nil, true, err
			}
		}
		if _, err := p.expectOp(")"); err != nil {
			return nil, true, err
		}
		fn := map[string]string{"": "trim", "BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}[mode]
		args := []Expr{x}
		if chars != nil {
			args = append(args, chars)
		}
		return &FuncCall{Name: Ident{P: name.P, Name: fn}, Args: args}, true, nil
	}
	return nil, false, nil
}

// keywordInCall reports whether one of kws appears at the top parenthesis
// level of the call whose "(" is the current token.
func (p *parser) keywordInCall(kws ...string) bool {
	depth := 0
	for i := 0; ; i++ {
		t := p.peekAt(i)
		switch {
		case t.kind == tEOF:
			return false
		case t.kind == tOp && t.text == "(":
			depth++
		case t.kind == tOp && t.text == ")":
			depth--
			if depth == 0 {
				return false
			}
		case depth == 1 && t.kind == tIdent:
			for _, kw := range kws {
				if isKw(t, kw) {
					return true
				}
			}
		}
	}
}

// filterClause reads an optional FILTER (WHERE cond) after a call. FILTER
// is not reserved: only FILTER followed by "(" starts the clause, so
// "count(*) filter" still aliases the column.
func (p *parser) filterClause(fc *FuncCall) (Expr, *Error) {
	if !isKw(p.peek(), "FILTER") || !(p.peekAt(1).kind == tOp && p.peekAt(1).text == "(") {
		return fc, nil
	}
	p.next()
	p.next()
	if _, err := p.expectKw("WHERE"); err != nil {
		return nil, err
	}
	cond, err := p.expr()
	if err != nil {
		return nil, err
	}
	if _, err := p.expectOp(")"); err != nil {
		return nil, err
	}
	fc.Filter = cond
	return fc, nil
}
