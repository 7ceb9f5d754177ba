package exec

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

var updateVectors = flag.Bool("update", false, "rewrite the key field of testdata/contract/identity_vectors.jsonl from the engine")

const identityVectorsFile = "../../testdata/contract/identity_vectors.jsonl"

// identityVector is one line of identity_vectors.jsonl: spellings of one
// cell (JSON text as a producer writes it; "" leaves the field out; 0x...
// is raw bytes in hex, for invalid UTF-8) that must all be one group with
// the given contract key, or spellings that must each make the line
// malformed.
type identityVector struct {
	Type      string   `json:"type"` // DOUBLE, VARCHAR or JSON (a column declared JSON)
	Spellings []string `json:"spellings,omitempty"`
	Key       string   `json:"key,omitempty"`
	Reject    []string `json:"reject,omitempty"`
	Note      string   `json:"note,omitempty"`
}

func vectorLine(spelling string, sec int) []byte {
	var cell []byte
	switch {
	case spelling == "":
	case strings.HasPrefix(spelling, "0x"):
		raw, err := hex.DecodeString(spelling[2:])
		if err != nil {
			panic(err)
		}
		cell = append(append([]byte(`"v":"`), raw...), `",`...)
	default:
		cell = []byte(`"v":` + spelling + ",")
	}
	return fmt.Appendf(nil, `{%s"event_time":"%s"}`, cell, ts(sec))
}

// TestIdentityVectors holds the golden identity vectors: every spelling of
// a vector decodes (on the decoder's path for its type) into one group
// whose key is the vector's key; different vectors of one type have
// different keys; a rejected spelling is a malformed line.
func TestIdentityVectors(t *testing.T) {
	f, err := os.Open(identityVectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vs []identityVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v identityVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", identityVectorsFile, err)
		}
		vs = append(vs, v)
	}
	f.Close()
	keysOf := map[string]map[string]int{}
	for i := range vs {
		v := &vs[i]
		prog, err := plan.Compile(`CREATE SOURCE s (v `+v.Type+`, event_time TIMESTAMP) WITH (format = 'jsonl');
SELECT v, count(*) AS n FROM s GROUP BY v`, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := prog.Queries[0]
		d := NewQueryDecoder(q)
		for _, s := range v.Reject {
			if _, err := d.Decode(vectorLine(s, 0)); !errors.Is(err, ErrMalformed) {
				t.Errorf("vector %d (%s %s): %s decodes (%v), want a malformed line", i+1, v.Type, v.Note, s, err)
			}
		}
		if len(v.Spellings) == 0 {
			continue
		}
		var recs []changelog.Record
		op, err := New(q, Config{Emit: func(r *changelog.Record) error { recs = append(recs, r.Clone()); return nil }, Nanotime: func() int64 { return 1 }})
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range v.Spellings {
			row, err := d.Decode(vectorLine(s, j))
			if err != nil {
				t.Fatalf("vector %d (%s %s): spelling %s: %v", i+1, v.Type, v.Note, s, err)
			}
			if err := op.Process(row); err != nil {
				t.Fatal(err)
			}
		}
		last := recs[len(recs)-1]
		if !bytes.HasSuffix(last.Value, fmt.Appendf(nil, `"n": %d}`, len(v.Spellings))) {
			t.Errorf("vector %d (%s %s): the spellings %q are not one group:\n%s", i+1, v.Type, v.Note, v.Spellings, recordText(recs))
		}
		oneKeyOneGroup(t, recs)
		if *updateVectors {
			v.Key = string(last.Key)
		} else if string(last.Key) != v.Key {
			t.Errorf("vector %d (%s %s): key %s, want %s", i+1, v.Type, v.Note, last.Key, v.Key)
		}
		if keysOf[v.Type] == nil {
			keysOf[v.Type] = map[string]int{}
		}
		if j, dup := keysOf[v.Type][v.Key]; dup {
			t.Errorf("vectors %d and %d (%s) have one key %s: merge them", j, i+1, v.Type, v.Key)
		}
		keysOf[v.Type][v.Key] = i + 1
	}
	if *updateVectors {
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		for _, v := range vs {
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(identityVectorsFile, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
