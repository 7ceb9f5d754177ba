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
	"strings"
)

// ErrMismatch reports that two changelogs end in different final values.
var ErrMismatch = errors.New("report: results differ")

// finalRows reads a changelog as JSON lines and keeps the last value of each
// key (the upsert rule). A line is an object with a "key" (a JSON array) and
// a "value" (a JSON object); either may also be a string holding that JSON,
// as an envelope that carries the contract's bytes verbatim would have it.
// Keys are normalized (parsed and re-rendered) so that the envelope's
// spacing does not matter.
func finalRows(r io.Reader, name string) (map[string]map[string]json.RawMessage, []string, error) {
	rows := map[string]map[string]json.RawMessage{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		kraw, vraw := unwrap(env["key"]), unwrap(env["value"])
		if kraw == nil || vraw == nil {
			return nil, nil, fmt.Errorf("%s:%d: want an object with \"key\" and \"value\"", name, line)
		}
		var key []json.RawMessage
		if err := json.Unmarshal(kraw, &key); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: key: %w", name, line, err)
		}
		var val map[string]json.RawMessage
		if err := json.Unmarshal(vraw, &val); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: value: %w", name, line, err)
		}
		k := normKey(key)
		if _, ok := rows[k]; !ok {
			order = append(order, k)
		}
		rows[k] = val
	}
	return rows, order, sc.Err()
}

// unwrap returns the JSON held by a string, or raw itself.
func unwrap(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return json.RawMessage(s)
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func normKey(cells []json.RawMessage) string {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = normCell(c)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func normCell(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return string(bytes.TrimSpace(c))
}

// CompareResult counts how two changelogs' final rows agree.
type CompareResult struct {
	Ref, Got, Exact, Close, Differ, Missing, Extra int
	Examples                                       []string
}

// compareRows compares final values key by key. Numbers that are not
// textually equal may differ by relTol relatively: a floating-point sum
// depends on the order of its terms, and DuckDB's order is its threads'.
func compareRows(ref, got map[string]map[string]json.RawMessage, refOrder []string, relTol float64) CompareResult {
	res := CompareResult{Ref: len(ref), Got: len(got)}
	example := func(s string) {
		if len(res.Examples) < 10 {
			res.Examples = append(res.Examples, s)
		}
	}
	for _, k := range refOrder {
		rv := ref[k]
		gv, ok := got[k]
		if !ok {
			res.Missing++
			example("missing key " + k)
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
	for k := range got {
		if _, ok := ref[k]; !ok {
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
	ref, order, err := finalRows(rf, refPath)
	if err != nil {
		return err
	}
	got, _, err := finalRows(gf, gotPath)
	if err != nil {
		return err
	}
	r := compareRows(ref, got, order, relTol)
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
