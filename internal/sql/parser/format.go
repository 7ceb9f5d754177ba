package parser

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format renders an expression as SQL text in the style DuckDB uses for an
// unaliased output column: lower-case function names, binary operations in
// parentheses, count(*) as count_star(), column names as written (without
// their qualifier).
func Format(e Expr) string {
	var b strings.Builder
	format(&b, e, false)
	return b.String()
}

// Canonical renders an expression for structural comparison: identifiers
// folded to lower case (and quoted where an unquoted name would not lex
// back as one identifier, so a column's name never reads as an
// expression), qualifiers and redundant parentheses dropped. Two
// expressions with the same Canonical text have the same shape; which
// columns their names bind to is the binder's to compare.
func Canonical(e Expr) string {
	var b strings.Builder
	format(&b, e, true)
	return b.String()
}

func ident(b *strings.Builder, id Ident, canon bool) {
	switch {
	case canon && needsQuote(strings.ToLower(id.Name)):
		b.WriteString(quoteIdent(strings.ToLower(id.Name)))
	case canon:
		b.WriteString(strings.ToLower(id.Name))
	case id.Quoted || needsQuote(id.Name):
		b.WriteString(quoteIdent(id.Name))
	default:
		b.WriteString(id.Name)
	}
}

// callKeywords are not reserved, but inside SUBSTRING(... FROM ... FOR
// ...) and TRIM(BOTH|LEADING|TRAILING ... FROM ...) they select the
// keyword form of the call: a column of such a name, printed bare in a
// call's arguments, would parse back as the keyword (substring(for, 1)
// reads as the FOR form), so the printer quotes it.
var callKeywords = map[string]bool{"FOR": true, "BOTH": true, "LEADING": true, "TRAILING": true}

// needsQuote reports whether s must be written quoted to lex back as the
// same identifier: the lexer's rule for unquoted identifiers is a letter or
// '_', then letters, digits, '_' or '$' (letters may be any Unicode letter;
// invalid UTF-8 never lexes unquoted).
func needsQuote(s string) bool {
	if s == "" || reserved[strings.ToUpper(s)] || callKeywords[strings.ToUpper(s)] {
		return true
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			return true
		case r == '_' || unicode.IsLetter(r):
		case i > 0 && (r == '$' || unicode.IsDigit(r)):
		default:
			return true
		}
	}
	return false
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func format(b *strings.Builder, e Expr, canon bool) {
	switch n := e.(type) {
	case *ColumnRef:
		ident(b, n.Name, canon)
	case *NumberLit:
		b.WriteString(n.Text)
	case *StringLit:
		b.WriteString(quoteString(n.Value))
	case *BoolLit:
		if n.Value {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case *NullLit:
		b.WriteString("NULL")
	case *TypedLit:
		b.WriteString(n.Type + " " + quoteString(n.Value))
	case *IntervalLit:
		b.WriteString("INTERVAL " + quoteString(n.Value))
		if n.Unit != "" {
			b.WriteString(" " + n.Unit)
		}
	case *BinaryExpr:
		b.WriteByte('(')
		format(b, n.L, canon)
		b.WriteString(" " + n.Op + " ")
		format(b, n.R, canon)
		b.WriteByte(')')
	case *UnaryExpr:
		if n.Op == "NOT" {
			b.WriteString("(NOT ")
			format(b, n.X, canon)
			b.WriteByte(')')
		} else {
			b.WriteString(n.Op)
			var inner strings.Builder
			format(&inner, n.X, canon)
			// "- -1" must not become the comment "--1".
			if s := inner.String(); s != "" && (s[0] == '-' || s[0] == '+') {
				b.WriteByte(' ')
			}
			b.WriteString(inner.String())
		}
	case *FuncCall:
		name := strings.ToLower(n.Name.Name)
		if needsQuote(name) {
			name = quoteIdent(n.Name.Name)
		}
		switch {
		case n.Star && name == "count":
			b.WriteString("count_star()")
		case n.Star:
			b.WriteString(name + "(*)")
		default:
			b.WriteString(name + "(")
			if n.Distinct {
				b.WriteString("DISTINCT ")
			}
			for i, a := range n.Args {
				if i > 0 {
					b.WriteString(", ")
				}
				format(b, a, canon)
			}
			b.WriteByte(')')
		}
		if n.Filter != nil {
			b.WriteString(" FILTER (WHERE ")
			format(b, n.Filter, canon)
			b.WriteByte(')')
		}
	case *CaseExpr:
		b.WriteString("CASE")
		if n.Operand != nil {
			b.WriteByte(' ')
			format(b, n.Operand, canon)
		}
		for _, w := range n.Whens {
			b.WriteString(" WHEN ")
			format(b, w.Cond, canon)
			b.WriteString(" THEN ")
			format(b, w.Result, canon)
		}
		if n.Else != nil {
			b.WriteString(" ELSE ")
			format(b, n.Else, canon)
		}
		b.WriteString(" END")
	case *CastExpr:
		if n.Try {
			b.WriteString("TRY_CAST(")
		} else {
			b.WriteString("CAST(")
		}
		format(b, n.X, canon)
		b.WriteString(" AS " + FormatType(n.Type) + ")")
	case *InExpr:
		b.WriteByte('(')
		format(b, n.X, canon)
		if n.Not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN (")
		for i, a := range n.List {
			if i > 0 {
				b.WriteString(", ")
			}
			format(b, a, canon)
		}
		b.WriteString("))")
	case *IsNullExpr:
		b.WriteByte('(')
		format(b, n.X, canon)
		if n.Not {
			b.WriteString(" IS NOT NULL)")
		} else {
			b.WriteString(" IS NULL)")
		}
	case *IsBoolExpr:
		b.WriteByte('(')
		format(b, n.X, canon)
		b.WriteString(" IS ")
		if n.Not {
			b.WriteString("NOT ")
		}
		if n.Value {
			b.WriteString("TRUE)")
		} else {
			b.WriteString("FALSE)")
		}
	case *IsDistinctExpr:
		b.WriteByte('(')
		format(b, n.L, canon)
		if n.Not {
			b.WriteString(" IS NOT DISTINCT FROM ")
		} else {
			b.WriteString(" IS DISTINCT FROM ")
		}
		format(b, n.R, canon)
		b.WriteByte(')')
	case *BetweenExpr:
		b.WriteByte('(')
		format(b, n.X, canon)
		if n.Not {
			b.WriteString(" NOT")
		}
		b.WriteString(" BETWEEN ")
		format(b, n.Lo, canon)
		b.WriteString(" AND ")
		format(b, n.Hi, canon)
		b.WriteByte(')')
	case *LikeExpr:
		b.WriteByte('(')
		format(b, n.X, canon)
		if n.Not {
			b.WriteString(" NOT")
		}
		if n.ILike {
			b.WriteString(" ILIKE ")
		} else {
			b.WriteString(" LIKE ")
		}
		format(b, n.Pattern, canon)
		b.WriteByte(')')
	case *ParenExpr:
		// Binary forms already print their own parentheses.
		format(b, n.X, canon)
	default:
		fmt.Fprintf(b, "%T", e)
	}
}

// FormatType renders a type name with its arguments.
func FormatType(t TypeName) string {
	if len(t.Args) == 0 {
		return t.Name
	}
	parts := make([]string, len(t.Args))
	for i, a := range t.Args {
		parts[i] = strconv.Itoa(a)
	}
	return t.Name + "(" + strings.Join(parts, ",") + ")"
}

// Dump renders a node tree, one node per line with its fields, for golden
// tests and debugging. It uses reflection and is not meant for hot paths.
func Dump(n any) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(n), 0)
	return b.String()
}

func dump(b *strings.Builder, v reflect.Value, indent int) {
	pad := strings.Repeat("  ", indent)
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dump(b, v.Elem(), indent)
	case reflect.Struct:
		t := v.Type()
		if t == reflect.TypeOf(Ident{}) {
			id := v.Interface().(Ident)
			if id.Quoted {
				fmt.Fprintf(b, "%q@%d", id.Name, id.P)
			} else {
				fmt.Fprintf(b, "%s@%d", id.Name, id.P)
			}
			return
		}
		b.WriteString(t.Name())
		if t == reflect.TypeOf(TypeName{}) {
			fmt.Fprintf(b, " %s", FormatType(v.Interface().(TypeName)))
			return
		}
		b.WriteString(" {")
		wrote := false
		for i := 0; i < t.NumField(); i++ {
			f := v.Field(i)
			if f.IsZero() || t.Field(i).Name == "SQL" {
				continue
			}
			b.WriteString("\n" + pad + "  " + t.Field(i).Name + ": ")
			dump(b, f, indent+1)
			wrote = true
		}
		if wrote {
			b.WriteString("\n" + pad)
		}
		b.WriteString("}")
	case reflect.Slice:
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			b.WriteString("\n" + pad + "  ")
			dump(b, v.Index(i), indent+1)
		}
		if v.Len() > 0 {
			b.WriteString("\n" + pad)
		}
		b.WriteString("]")
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}
