package plan

import (
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/internal/types"
)

// Nested JSON field access. A source column declared JSON holds
// the field's raw JSON text (any JSON value); any VARCHAR holding JSON text
// works too. The path is a constant, compiled once at bind time:
//
//	payload->>'$.user.id'    VARCHAR: a string unquoted, any other value as JSON text
//	payload->'$.user'        VARCHAR: the canonical JSON text of the value (a string keeps its quotes; AppendCanonicalJSON)
//	payload->>'id'           a path without '$' or '/' is one key (DuckDB)
//	payload->>'/user/id'     a JSON pointer
//	payload->>0, '$.a[2]'    array elements (0-based)
//
// json_extract(j, path) is j->path and json_extract_string(j, path) is
// j->>path. A missing field, or a path through a non-object, is NULL; a
// JSON null is SQL NULL for ->> and the text 'null' for -> (DuckDB).
// Text that is not JSON is a conversion error, as in DuckDB.
//
// Cost: each access parses the column's JSON text once (fastjson, from a
// pool, no per-call parser allocation); reading two fields of one payload
// parses it twice.

type jsonStepKind uint8

const (
	jsonKey    jsonStepKind = iota // object member
	jsonIndex                      // array element
	jsonEither                     // JSON pointer segment: member, or element of an array
)

type jsonStep struct {
	kind jsonStepKind
	key  string
	idx  int
}

// parseJSONPath compiles a DuckDB JSON path: '$...' (JSONPath subset: .key,
// ."quoted key", [n]), '/a/b' (JSON pointer), or a plain key.
func parseJSONPath(p string) ([]jsonStep, string) {
	switch {
	case strings.HasPrefix(p, "$"):
		var steps []jsonStep
		i := 1
		for i < len(p) {
			switch p[i] {
			case '.':
				i++
				if i < len(p) && p[i] == '"' {
					j := strings.IndexByte(p[i+1:], '"')
					if j < 0 {
						return nil, "unterminated quoted key in JSON path " + strconv.Quote(p)
					}
					steps = append(steps, jsonStep{kind: jsonKey, key: p[i+1 : i+1+j]})
					i += j + 2
					continue
				}
				j := i
				for j < len(p) && p[j] != '.' && p[j] != '[' {
					j++
				}
				if j == i {
					return nil, "empty key in JSON path " + strconv.Quote(p)
				}
				if p[i:j] == "*" {
					return nil, "wildcards are not supported in JSON paths: " + strconv.Quote(p)
				}
				steps = append(steps, jsonStep{kind: jsonKey, key: p[i:j]})
				i = j
			case '[':
				j := strings.IndexByte(p[i:], ']')
				if j < 0 {
					return nil, "unterminated [ in JSON path " + strconv.Quote(p)
				}
				n, err := strconv.Atoi(p[i+1 : i+j])
				if err != nil || n < 0 {
					return nil, "array index in JSON path " + strconv.Quote(p) + " must be a non-negative integer"
				}
				steps = append(steps, jsonStep{kind: jsonIndex, idx: n})
				i += j + 1
			default:
				return nil, "bad JSON path " + strconv.Quote(p) + ": expected . or [ at offset " + strconv.Itoa(i)
			}
		}
		return steps, ""
	case strings.HasPrefix(p, "/"):
		var steps []jsonStep
		for _, seg := range strings.Split(p[1:], "/") {
			seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
			st := jsonStep{kind: jsonKey, key: seg}
			if n, err := strconv.Atoi(seg); err == nil && n >= 0 && seg == strconv.Itoa(n) {
				st = jsonStep{kind: jsonEither, key: seg, idx: n}
			}
			steps = append(steps, st)
		}
		return steps, ""
	}
	return []jsonStep{{kind: jsonKey, key: p}}, ""
}

// bindJSONAccess binds x->path (text=false) and x->>path (text=true).
func bindJSONAccess(x, path Expr, text bool, fname string) (Expr, string) {
	op := "->"
	if text {
		op = "->>"
	}
	switch x.Type().Kind {
	case types.KindVarchar:
	case types.KindNull:
		return &Const{V: types.NullOf(types.Varchar), T: types.Varchar, Text: "NULL"}, ""
	default:
		return nil, op + " needs a JSON or VARCHAR operand on the left, got " + x.Type().String()
	}
	c, ok := path.(*Const)
	if !ok {
		return nil, op + " needs a constant path on the right, as in payload" + op + "'$.user.id'"
	}
	if c.V.Null {
		return &Const{V: types.NullOf(types.Varchar), T: types.Varchar, Text: "NULL"}, ""
	}
	var steps []jsonStep
	switch {
	case c.T.Kind == types.KindVarchar:
		var msg string
		if steps, msg = parseJSONPath(c.V.S); msg != "" {
			return nil, msg
		}
	case isInt(c.T):
		if c.V.I < 0 {
			return nil, op + ": array index must not be negative"
		}
		steps = []jsonStep{{kind: jsonIndex, idx: int(c.V.I)}}
	default:
		return nil, op + " needs a VARCHAR path or an integer index on the right, got " + c.T.String()
	}
	name := fname
	if name == "" {
		name = op
	}
	return &jsonExpr{x: x, path: c, steps: steps, text: text, name: name}, ""
}

func bindJSONExtract(b *binder, name string, args []Expr) (Expr, string) {
	return bindJSONAccess(args[0], args[1], name == "json_extract_string", name)
}

// jsonExpr evaluates a JSON path over JSON text.
type jsonExpr struct {
	x     Expr
	path  *Const
	steps []jsonStep
	text  bool
	name  string // "->", "->>", "json_extract", "json_extract_string"
	// parsers hands each evaluation its own parser (a fastjson.Parser is
	// not safe for concurrent use; the pool is).
	parsers fastjson.ParserPool
}

func (e *jsonExpr) Type() types.Type { return types.Varchar }
func (e *jsonExpr) String() string {
	if strings.HasPrefix(e.name, "-") {
		return "(" + e.x.String() + " " + e.name + " " + e.path.String() + ")"
	}
	return e.name + "(" + e.x.String() + ", " + e.path.String() + ")"
}

func (e *jsonExpr) Eval(row []types.Value) (types.Value, error) {
	v, err := e.x.Eval(row)
	if err != nil || v.Null {
		return types.NullOf(types.Varchar), err
	}
	p := e.parsers.Get()
	defer e.parsers.Put(p)
	j, perr := p.Parse(v.S)
	if perr != nil {
		return types.Value{}, convErr("Malformed JSON: %v", perr)
	}
	for _, st := range e.steps {
		switch {
		case st.kind == jsonKey || st.kind == jsonEither && j.Type() == fastjson.TypeObject:
			if j.Type() != fastjson.TypeObject {
				return types.NullOf(types.Varchar), nil
			}
			o, _ := j.Object()
			j = o.Get(st.key)
		default:
			if j.Type() != fastjson.TypeArray {
				return types.NullOf(types.Varchar), nil
			}
			a, _ := j.Array()
			if st.idx >= len(a) {
				return types.NullOf(types.Varchar), nil
			}
			j = a[st.idx]
		}
		if j == nil {
			return types.NullOf(types.Varchar), nil
		}
	}
	if e.text {
		switch j.Type() {
		case fastjson.TypeNull:
			return types.NullOf(types.Varchar), nil
		case fastjson.TypeString:
			sb, _ := j.StringBytes()
			return types.Str(string(sb)), nil
		}
	}
	// The value's canonical text (DuckDB's), whatever the producer's
	// spacing and escapes.
	out, cerr := AppendCanonicalJSON(nil, j.MarshalTo(nil))
	if cerr != nil {
		return types.Value{}, convErr("Malformed JSON: %v", cerr)
	}
	return types.Str(string(out)), nil
}
