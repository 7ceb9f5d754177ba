package parser

import "strings"

// joinWords may follow a table reference; none of them is an implicit
// alias (FROM s LEFT JOIN t reads s without an alias).
var joinWords = map[string]bool{"JOIN": true, "INNER": true, "LEFT": true, "RIGHT": true, "FULL": true, "CROSS": true, "OUTER": true, "FOR": true}

// joinTail reads the joins after FROM's first table reference: one
// [INNER | LEFT [OUTER]] JOIN t [FOR SYSTEM_TIME AS OF x] [AS a] ON cond
// per join (the binder decides how many it runs).
func (p *parser) joinTail(from TableRef) (TableRef, *Error) {
	for {
		t := p.peek()
		switch {
		case p.isOp(","):
			return nil, p.errAt(t.pos, "comma joins are not supported: write JOIN t FOR SYSTEM_TIME AS OF s.ts ON ... (an event-time temporal join with a versioned table) or JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL ... AND l.ts + INTERVAL ... (an interval join of two streams)")
		case isKw(t, "CROSS"), isKw(t, "RIGHT"), isKw(t, "FULL"):
			return nil, p.errAt(t.pos, "%s JOIN is not supported: ubik runs JOIN and LEFT JOIN of a stream with a versioned table (FOR SYSTEM_TIME AS OF), and JOIN of two streams with a time bound (an interval join)", strings.ToUpper(t.text))
		case isKw(t, "JOIN"), isKw(t, "INNER"), isKw(t, "LEFT"):
		default:
			return from, nil
		}
		j := &JoinRef{P: t.pos, Left: from}
		switch {
		case p.acceptKw("INNER"):
		case p.acceptKw("LEFT"):
			j.Kind = LeftJoin
			p.acceptKw("OUTER")
		}
		if _, err := p.expectKw("JOIN"); err != nil {
			return nil, err
		}
		if t := p.peek(); isKw(t, "TABLE") || t.kind == tOp && t.text == "(" {
			return nil, p.errAt(t.pos, "JOIN names a versioned table or a stream: subqueries and table functions are not supported here")
		}
		name, err := p.ident("table name after JOIN")
		if err != nil {
			return nil, err
		}
		j.Right = &TableName{Name: name}
		if ft := p.peek(); isKw(ft, "FOR") {
			p.next()
			if _, err := p.expectKw("SYSTEM_TIME"); err != nil {
				return nil, err
			}
			if _, err := p.expectKw("AS"); err != nil {
				return nil, err
			}
			if _, err := p.expectKw("OF"); err != nil {
				return nil, err
			}
			if j.AsOf, err = p.expr(); err != nil {
				return nil, err
			}
			j.AsOfP = ft.pos
		}
		if j.Right.Alias, err = p.optAlias(); err != nil {
			return nil, err
		}
		if !isKw(p.peek(), "ON") {
			if isKw(p.peek(), "USING") {
				return nil, p.errAt(p.peek().pos, "JOIN ... USING is not supported: write ON s.k = t.k")
			}
			return nil, p.unexpected("ON after the joined table")
		}
		p.next()
		if j.On, err = p.expr(); err != nil {
			return nil, err
		}
		from = j
	}
}

// primaryKey reads PRIMARY KEY (col, ...) NOT ENFORCED in a column list;
// PRIMARY has been read (at pos).
func (p *parser) primaryKey(cs *CreateSource, pos int) *Error {
	if cs.PrimaryKey != nil {
		return p.errAt(pos, "only one PRIMARY KEY clause is allowed")
	}
	if _, err := p.expectKw("KEY"); err != nil {
		return err
	}
	if _, err := p.expectOp("("); err != nil {
		return err
	}
	var cols []Ident
	for {
		c, err := p.ident("a column name in PRIMARY KEY (...)")
		if err != nil {
			return err
		}
		cols = append(cols, c)
		if !p.acceptOp(",") {
			break
		}
	}
	if _, err := p.expectOp(")"); err != nil {
		return err
	}
	if !isKw(p.peek(), "NOT") || !isKw(p.peekAt(1), "ENFORCED") {
		return p.errAt(p.peek().pos, "expected NOT ENFORCED after PRIMARY KEY (...): ubik does not check the key, each row is the version of its key valid from its time (as in Flink)")
	}
	p.i += 2
	cs.PrimaryKey, cs.PrimaryKeyP = cols, pos
	return nil
}
