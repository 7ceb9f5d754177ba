package metamorphic

import (
	"encoding/json"

	"fmt"
	"github.com/ubiksql/ubik"
	"math"
	"sort"
	"strings"
)

// The special doubles of genDoubles (read-only).
var (
	negZero = math.Copysign(0, -1)
	nan     = math.NaN()
	posInf  = math.Inf(1)
	negInf  = math.Inf(-1)
)

// Rec is one changelog record as every path can report it: the key and
// value bytes and the two metadata fields the invariants read.
type Rec struct {
	Key      []byte
	Value    []byte
	Final    bool
	Revision uint64
}

// Result is what one path produced.
type Result struct {
	Path string
	Recs []Rec
	// Malformed and Duplicates as the path counted them (-1: not reported).
	Malformed, Duplicates int64
	// TableLate is a temporal join's count of late table rows, as the
	// path counted them (-1: not reported; 0 without a join).
	TableLate int64
	// Stats are an in-process run's counters at its end (nil elsewhere).
	Stats *ubik.Stats
}

// Finals are the compared output of a run: for a windowed query each
// key's final value, for a continuous view each key's last value.
type Finals map[string]string

// Check holds the invariants of one path's changelog and returns its
// finals: each key's revisions go up strictly (by one when the path
// publishes every record, which all but a compacted topic do: step1),
// no record follows a key's final one, every key of a windowed query has
// exactly one final record (a continuous view none), and, for a monotone
// query, the count c never goes down along a key's records.
func Check(res *Result, c *Case) (Finals, error) {
	rev := map[string]uint64{}
	final := map[string]bool{}
	count := map[string]int64{}
	out := Finals{}
	for i, r := range res.Recs {
		k := string(r.Key)
		if !json.Valid(r.Key) || !json.Valid(r.Value) {
			return nil, fmt.Errorf("%s: record %d: key %q or value %q is not valid JSON", res.Path, i, r.Key, r.Value)
		}
		if final[k] {
			return nil, fmt.Errorf("%s: record %d: key %s has a record after its final one: %s", res.Path, i, k, r.Value)
		}
		if r.Revision != rev[k]+1 {
			return nil, fmt.Errorf("%s: record %d: key %s: revision %d after %d", res.Path, i, k, r.Revision, rev[k])
		}
		rev[k] = r.Revision
		if c.Monotone {
			n, err := countOf(r.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: record %d: %v", res.Path, i, err)
			}
			if n < count[k] {
				return nil, fmt.Errorf("%s: record %d: key %s: count c went down from %d to %d", res.Path, i, k, count[k], n)
			}
			count[k] = n
		}
		if r.Final {
			if !c.Windowed {
				return nil, fmt.Errorf("%s: record %d: a continuous view emitted a final record for %s", res.Path, i, k)
			}
			final[k] = true
			out[k] = string(r.Value)
		} else if !c.Windowed {
			out[k] = string(r.Value)
		}
	}
	if c.Windowed {
		for k := range rev {
			if !final[k] {
				return nil, fmt.Errorf("%s: key %s has %d records and no final one", res.Path, k, rev[k])
			}
		}
	}
	return out, nil
}

func countOf(v []byte) (int64, error) {
	var row struct {
		C *int64 `json:"c"`
	}
	if err := json.Unmarshal(v, &row); err != nil || row.C == nil {
		return 0, fmt.Errorf("value %s has no integer count c (%v)", v, err)
	}
	return *row.C, nil
}

// Diff describes how got differs from want (empty when equal), naming at
// most a few keys.
func Diff(want, got Finals) string {
	var b strings.Builder
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		if wok == gok && w == g {
			continue
		}
		bad++
		if bad > 5 {
			continue
		}
		switch {
		case !gok:
			fmt.Fprintf(&b, "  key %s: missing (want %s)\n", k, w)
		case !wok:
			fmt.Fprintf(&b, "  key %s: extra %s\n", k, g)
		default:
			fmt.Fprintf(&b, "  key %s:\n    got  %s\n    want %s\n", k, g, w)
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d keys differ (%d want, %d got):\n%s", bad, len(keys), len(want), len(got), b.String())
}
