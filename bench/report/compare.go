package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"

	"github.com/valyala/fastjson"
)

// finals are a changelog's last value of each key (the upsert rule): the
// value's JSON text by normalized key, and the keys in first-seen order.
type finals struct {
	vals  map[string]string
	order []string
}

// finalRows reads a changelog as JSON lines and keeps the last value of each
// key. A line is an object with a "key" (a JSON array) and a "value" (a JSON
// object); either may also be a string holding that JSON, as an envelope
// that carries the contract's bytes verbatim would have it. Keys are
// normalized (parsed and re-rendered) so that the envelope's spacing and
// escapes do not matter. Every line is parsed (a malformed one is an error
// naming it), but only the last value of a key is kept, as text: a
// changelog with early emissions has many lines per key, and holding each
// as a decoded map cost gigabytes at 10M events.
func finalRows(r io.Reader, name string) (finals, error) {
	f := finals{vals: map[string]string{}}
	var p, inner fastjson.Parser
	var kb, vb []byte
	br := bufio.NewReaderSize(r, 16<<20) // the longest line it takes
	line := 0
	for {
		text, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return f, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, br.Size())
		}
		if len(text) == 0 && err == io.EOF {
			return f, nil
		}
		if err != nil && err != io.EOF {
			return f, fmt.Errorf("%s: %w", name, err)
		}
		line++
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		env, perr := p.ParseBytes(text)
		if perr != nil {
			return f, fmt.Errorf("%s:%d: %w", name, line, perr)
		}
		if env.Type() != fastjson.TypeObject {
			return f, fmt.Errorf("%s:%d: want an object with \"key\" and \"value\"", name, line)
		}
		key, err1 := unwrap(env.Get("key"), &inner, fastjson.TypeArray)
		if err1 != nil {
			return f, fmt.Errorf("%s:%d: key: %w", name, line, err1)
		}
		kb = normKey(kb[:0], key)
		// unwrap of the value may reuse inner: the key's text is rendered.
		val, err2 := unwrap(env.Get("value"), &inner, fastjson.TypeObject)
		if err2 != nil {
			return f, fmt.Errorf("%s:%d: value: %w", name, line, err2)
		}
		vb = val.MarshalTo(vb[:0])
		if old, ok := f.vals[string(kb)]; ok {
			if old != string(vb) {
				f.vals[string(kb)] = string(vb)
			}
		} else {
			k := string(kb)
			f.vals[k] = string(vb)
			f.order = append(f.order, k)
		}
		if err == io.EOF {
			return f, nil
		}
	}
}

// unwrap returns v, or the JSON a string v holds, checked to be of type
// want. A missing or null v is an error.
func unwrap(v *fastjson.Value, inner *fastjson.Parser, want fastjson.Type) (*fastjson.Value, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil, errors.New("missing")
	}
	if v.Type() == fastjson.TypeString {
		s, _ := v.StringBytes()
		iv, err := inner.ParseBytes(s)
		if err != nil {
			return nil, err
		}
		v = iv
	}
	if v.Type() != want {
		return nil, fmt.Errorf("want a JSON %s, got %s", want, v.Type())
	}
	return v, nil
}

// normKey renders a key's cells canonically: a string cell by its decoded
// bytes, any other by its JSON text.
func normKey(dst []byte, key *fastjson.Value) []byte {
	cells, _ := key.Array()
	dst = append(dst, '[')
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		if c.Type() == fastjson.TypeString {
			s, _ := c.StringBytes()
			dst = strconv.AppendQuote(dst, string(s))
			continue
		}
		dst = c.MarshalTo(dst)
	}
	return append(dst, ']')
}

// CompareResult counts how two changelogs' final rows agree.
type CompareResult struct {
	Ref, Got, Exact, Close, Differ, Missing, Extra int
	Examples                                       []string
}

// compareRows compares final values key by key. Numbers that are not
// textually equal may differ by relTol relatively: a floating-point sum
// depends on the order of its terms, and DuckDB's order is its threads'.
func compareRows(ref, got finals, relTol float64) CompareResult {
	res := CompareResult{Ref: len(ref.vals), Got: len(got.vals)}
	example := func(s string) {
		if len(res.Examples) < 10 {
			res.Examples = append(res.Examples, s)
		}
	}
	for _, k := range ref.order {
		gt, ok := got.vals[k]
		if !ok {
			res.Missing++
			example("missing key " + k)
			continue
		}
		rt := ref.vals[k]
		if rt == gt { // both rendered by fastjson from a parse: equal text is an equal row
			res.Exact++
			continue
		}
		var rv, gv map[string]json.RawMessage
		if err := json.Unmarshal([]byte(rt), &rv); err != nil {
			res.Differ++
			example("key " + k + ": reference value: " + err.Error())
			continue
		}
		if err := json.Unmarshal([]byte(gt), &gv); err != nil {
			res.Differ++
			example("key " + k + ": value: " + err.Error())
			continue
		}
		exact, why := true, ""
		for col, rc := range rv {
			gc, ok := gv[col]
			if !ok {
				exact, why = false, fmt.Sprintf("column %q missing", col)
				break
			}
			if bytes.Equal(bytes.TrimSpace(rc), bytes.TrimSpace(gc)) {
				continue
			}
			if close, ok := numClose(rc, gc, relTol); ok && close {
				exact = false
				continue
			}
			exact, why = false, fmt.Sprintf("column %q: want %s, got %s", col, rc, gc)
			break
		}
		if why == "" && len(gv) != len(rv) {
			why = fmt.Sprintf("columns: want %d, got %d", len(rv), len(gv))
		}
		switch {
		case why != "":
			res.Differ++
			example("key " + k + ": " + why)
		case exact:
			res.Exact++
		default:
			res.Close++
		}
	}
	var extra []string
	for k := range got.vals {
		if _, ok := ref.vals[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	res.Extra = len(extra)
	for _, k := range extra {
		example("extra key " + k)
	}
	return res
}

// numClose reports whether a and b are numbers within relTol of each other;
// ok is false when either is not a number.
func numClose(a, b json.RawMessage, relTol float64) (close, ok bool) {
	x, err1 := strconv.ParseFloat(string(bytes.TrimSpace(a)), 64)
	y, err2 := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
	if err1 != nil || err2 != nil {
		return false, false
	}
	if x == y {
		return true, true
	}
	scale := math.Max(math.Abs(x), math.Abs(y))
	return math.Abs(x-y) <= relTol*scale, true
}

func runCompare(refPath, gotPath string, relTol float64, w io.Writer) error {
	rf, err := os.Open(refPath)
	if err != nil {
		return err
	}
	defer rf.Close()
	gf, err := os.Open(gotPath)
	if err != nil {
		return err
	}
	defer gf.Close()
	ref, err := finalRows(rf, refPath)
	if err != nil {
		return err
	}
	got, err := finalRows(gf, gotPath)
	if err != nil {
		return err
	}
	r := compareRows(ref, got, relTol)
	fmt.Fprintf(w, "keys: reference %d, got %d; equal %d, within %.0e %d, different %d, missing %d, extra %d\n",
		r.Ref, r.Got, r.Exact, relTol, r.Close, r.Differ, r.Missing, r.Extra)
	for _, e := range r.Examples {
		fmt.Fprintln(w, "  "+e)
	}
	if r.Differ+r.Missing+r.Extra > 0 {
		return ErrMismatch
	}
	return nil
}
