package plan

import (
	"strings"
	"unicode/utf8"

	"github.com/ubiksql/ubik/internal/types"
)

// String functions beyond lower/upper/length/concat: substring,
// trim/ltrim/rtrim, replace. All follow DuckDB: positions and lengths count
// characters (code points), not bytes.

// intArg converts an integer (or NULL) argument to BIGINT.
func intArg(x Expr, fname, what string) (Expr, string) {
	if !isInt(x.Type()) && x.Type().Kind != types.KindNull {
		return nil, fname + "'s " + what + " must be an integer, got " + x.Type().String()
	}
	c, err := coerce(x, types.BigInt)
	if err != nil {
		return nil, err.Error()
	}
	return c, ""
}

// substring's supported offset and length range (DuckDB's).
const substrBound = int64(1<<32 - 1)

// bindSubstring is substring(s, start[, length]) with DuckDB's rules: start
// is 1-based; a negative start counts from the end; start 0 begins one
// character before the first; a negative length takes characters before
// start. PostgreSQL differs for start <= 0 (it counts positions before the
// string, so substring('hello', -1, 3) is 'h' there and 'o' here).
func bindSubstring(b *binder, name string, args []Expr) (Expr, string) {
	s, msg := textArg(args[0], "substring")
	if msg != "" {
		return nil, msg
	}
	cs := []Expr{s}
	st, msg := intArg(args[1], "substring", "start")
	if msg != "" {
		return nil, msg
	}
	cs = append(cs, st)
	if len(args) == 3 {
		ln, msg := intArg(args[2], "substring", "length")
		if msg != "" {
			return nil, msg
		}
		cs = append(cs, ln)
	}
	return &funcExpr{name: "substring", args: cs, t: types.Varchar, strict: true,
		fnN: func(_ *funcExpr, v []types.Value) (types.Value, error) {
			offset, length := v[1].I, substrBound
			if len(v) == 3 {
				length = v[2].I
			}
			if offset < -substrBound || offset > substrBound {
				return types.Value{}, rangeErr("Substring offset outside of supported range (> %d)", substrBound)
			}
			if length < -substrBound || length > substrBound {
				return types.Value{}, rangeErr("Substring length outside of supported range (> %d)", substrBound)
			}
			return types.Str(substringChars(v[0].S, offset, length)), nil
		}}, ""
}

// substringChars applies DuckDB's SubstringStartEnd on characters.
func substringChars(s string, offset, length int64) string {
	if length == 0 {
		return ""
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	size := int64(len(s))
	if !ascii {
		size = int64(utf8.RuneCountInString(s))
	}
	var start, end int64
	switch {
	case offset > 0:
		start = min(size, offset-1)
	case offset < 0:
		start = max(size+offset, 0)
	default:
		start = 0
		length--
		if length <= 0 {
			return ""
		}
	}
	if length > 0 {
		end = min(size, start+length)
	} else {
		end = start
		start = max(0, start+length)
	}
	if start >= end {
		return ""
	}
	if ascii {
		return s[start:end]
	}
	// Byte offsets of characters start and end.
	bs, be, n := -1, len(s), int64(0)
	for i := range s {
		if n == start {
			bs = i
		}
		if n == end {
			be = i
			break
		}
		n++
	}
	if bs < 0 {
		return ""
	}
	return s[bs:be]
}

// bindTrim is trim/ltrim/rtrim(s[, characters]): without characters only
// spaces are removed (DuckDB, PostgreSQL), not tabs or newlines.
func bindTrim(b *binder, name string, args []Expr) (Expr, string) {
	s, msg := textArg(args[0], name)
	if msg != "" {
		return nil, msg
	}
	cs := []Expr{s}
	if len(args) == 2 {
		c, msg := textArg(args[1], name)
		if msg != "" {
			return nil, msg
		}
		cs = append(cs, c)
	}
	left, right := name != "rtrim", name != "ltrim"
	return &funcExpr{name: name, args: cs, t: types.Varchar, strict: true,
		fnN: func(_ *funcExpr, v []types.Value) (types.Value, error) {
			set := " "
			if len(v) == 2 {
				set = v[1].S
			}
			r := v[0].S
			if left {
				r = strings.TrimLeft(r, set)
			}
			if right {
				r = strings.TrimRight(r, set)
			}
			return types.Str(r), nil
		}}, ""
}

// bindReplace is replace(s, from, to): every occurrence, left to right, not
// overlapping. An empty from changes nothing (DuckDB, PostgreSQL).
func bindReplace(b *binder, name string, args []Expr) (Expr, string) {
	cs := make([]Expr, 3)
	for i, a := range args {
		c, msg := textArg(a, name)
		if msg != "" {
			return nil, msg
		}
		cs[i] = c
	}
	return &funcExpr{name: name, args: cs, t: types.Varchar, strict: true,
		fnN: func(_ *funcExpr, v []types.Value) (types.Value, error) {
			if v[1].S == "" {
				return v[0], nil
			}
			return types.Str(strings.ReplaceAll(v[0].S, v[1].S, v[2].S)), nil
		}}, ""
}
