package exec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// identitySource holds the sources of the identity tests: a string, a
// double and a JSON payload, with an event time (ev: a JSON column sends
// every line to the reference decoder), and the same without the payload
// (flat: the scanner's path).
const identitySource = `CREATE SOURCE ev (g VARCHAR, x DOUBLE, payload JSON, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND) WITH (format = 'jsonl');
CREATE SOURCE flat (g VARCHAR, x DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND) WITH (format = 'jsonl');`

// runLines compiles sql over identitySource, decodes lines and runs them
// through one operator, and returns the final record of each key in order
// of emission, failing on any decode or evaluation error.
func runLines(t *testing.T, sql string, lines []string) []changelog.Record {
	t.Helper()
	return runLinesWith(t, sql, lines, nil)
}

// runLinesWith is runLines; when keyOf is set, each row goes through
// ProcessKeyed with the key keyOf returns for it.
func runLinesWith(t *testing.T, sql string, lines []string, keyOf func(keys *GroupKeys, row []types.Value) []byte) []changelog.Record {
	t.Helper()
	prog, err := plan.Compile(identitySource+sql, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	var recs []changelog.Record
	var clock int64
	op, err := New(q, Config{
		Emit:     func(r *changelog.Record) error { recs = append(recs, r.Clone()); return nil },
		Nanotime: func() int64 { clock++; return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	d := NewQueryDecoder(q)
	keys := NewGroupKeys(q)
	for i, l := range lines {
		row, err := d.Decode([]byte(l))
		if err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		if keyOf != nil {
			err = op.ProcessKeyed(row, keyOf(keys, row))
		} else {
			err = op.Process(row)
		}
		if err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// recordText renders records one a line: key, value, revision.
func recordText(recs []changelog.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s rev=%d final=%v\n", r.Key, r.Value, r.Meta.Revision, r.Meta.Final)
	}
	return b.String()
}

// oneKeyOneGroup fails when two records of one key come from different
// groups: each key must have revisions 1, 2, ... in order.
func oneKeyOneGroup(t *testing.T, recs []changelog.Record) {
	t.Helper()
	last := map[string]uint64{}
	for _, r := range recs {
		k := string(r.Key)
		if r.Meta.Revision != last[k]+1 {
			t.Fatalf("key %s: revision %d after %d: two groups publish under one key\n%s", k, r.Meta.Revision, last[k], recordText(recs))
		}
		last[k] = r.Meta.Revision
	}
}

func ts(sec int) string { return fmt.Sprintf("2026-07-18 10:00:%02d", sec) }

// NULL, NaN, +Inf and -Inf all render as null in a key cell: one group.
func TestIdentityNonFiniteDoubleIsOneGroup(t *testing.T) {
	var lines []string
	for i, x := range []string{"NaN", "1e400", "-1e400", "null", "Infinity", "-Infinity", "NaN"} {
		lines = append(lines, fmt.Sprintf(`{"g":"a","x":%s,"event_time":"%s"}`, x, ts(i)))
	}
	recs := runLines(t, `SELECT g, x, count(*) AS n FROM ev GROUP BY g, x`, lines)
	oneKeyOneGroup(t, recs)
	last := recs[len(recs)-1]
	if got, want := string(last.Key)+" "+string(last.Value), `["a", null] {"g": "a", "x": null, "n": 7}`; got != want {
		t.Fatalf("last record %s, want %s\n%s", got, want, recordText(recs))
	}
}

// Invalid UTF-8 is repaired at decode: cells whose repaired text is equal
// are one group.
func TestIdentityInvalidUTF8IsOneGroup(t *testing.T) {
	lines := []string{
		"{\"g\":\"\xff\",\"event_time\":\"" + ts(0) + "\"}",
		"{\"g\":\"\xfe\",\"event_time\":\"" + ts(1) + "\"}",
		"{\"g\":\"\xfe\",\"event_time\":\"" + ts(2) + "\"}",
		"{\"g\":\"\\ufffd\",\"event_time\":\"" + ts(3) + "\"}",
		"{\"g\":\"\xef\xbf\xbd\",\"event_time\":\"" + ts(4) + "\"}",
	}
	recs := runLines(t, `SELECT g, count(*) AS n FROM ev GROUP BY g`, lines)
	oneKeyOneGroup(t, recs)
	last := recs[len(recs)-1]
	if got, want := string(last.Key)+" "+string(last.Value), `["\ufffd"] {"g": "\ufffd", "n": 5}`; got != want {
		t.Fatalf("last record %s, want %s\n%s", got, want, recordText(recs))
	}
}

// -0.0 and 0.0 are one group, with the one text 0.0 in the key and in the
// value.
func TestIdentityNegativeZero(t *testing.T) {
	lines := []string{
		`{"g":"a","x":-0.0,"event_time":"` + ts(0) + `"}`,
		`{"g":"a","x":0.0,"event_time":"` + ts(1) + `"}`,
		`{"g":"a","x":-0,"event_time":"` + ts(2) + `"}`,
	}
	recs := runLines(t, `SELECT x, count(*) AS n FROM ev GROUP BY x`, lines)
	oneKeyOneGroup(t, recs)
	for _, r := range recs {
		if string(r.Key) != "[0.0]" || !strings.HasPrefix(string(r.Value), `{"x": 0.0,`) {
			t.Fatalf("record %s %s: want key [0.0] and x 0.0", r.Key, r.Value)
		}
	}
}

// JSON text is normalized where it becomes a cell: one escape form, no
// insignificant whitespace, so the spellings of one value are one group.
func TestIdentityJSONTextIsCanonical(t *testing.T) {
	payloads := []string{`{"n":"Bo\u00e9"}`, `{"n":"Boé"}`, `{ "n" : "Bo\u00E9" }`, `{"n":"B\u006f\u00e9"}`}
	var lines []string
	for i, p := range payloads {
		lines = append(lines, fmt.Sprintf(`{"g":"a","payload":%s,"event_time":"%s"}`, p, ts(i)))
	}
	for _, c := range []struct{ sql, key string }{
		{`SELECT payload->'n' AS n, count(*) AS c FROM ev GROUP BY payload->'n'`, `["\"Bo\u00e9\""]`},
		{`SELECT json_extract(payload, '$.n') AS n, count(*) AS c FROM ev GROUP BY json_extract(payload, '$.n')`, `["\"Bo\u00e9\""]`},
		{`SELECT payload AS n, count(*) AS c FROM ev GROUP BY payload`, `["{\"n\":\"Bo\u00e9\"}"]`},
	} {
		recs := runLines(t, c.sql, lines)
		oneKeyOneGroup(t, recs)
		last := recs[len(recs)-1]
		if string(last.Key) != c.key || !strings.HasSuffix(string(last.Value), `"c": 4}`) {
			t.Errorf("%s: last record %s %s, want key %s with c 4\n%s", c.sql, last.Key, last.Value, c.key, recordText(recs))
		}
	}
}

// A lone surrogate escape makes the line malformed, on both decoding
// paths, with the offset of the escape.
func TestDecodeLoneSurrogateIsMalformed(t *testing.T) {
	src := fuzzSource()
	for _, line := range []string{
		`{"s":"a\ud800b","ts":"2026-07-18 10:00:00"}`,
		`{"s":"a\udc00","ts":"2026-07-18 10:00:00"}`,
		`{"s":"\ud83d\u0041","ts":"2026-07-18 10:00:00"}`,
		`{"other":"\ud800","ts":"2026-07-18 10:00:00"}`,
		`{"\ud800":1,"ts":"2026-07-18 10:00:00"}`,
	} {
		for _, ref := range []bool{false, true} {
			d := NewDecoder(src)
			d.noScan = ref
			_, err := d.Decode([]byte(line))
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "surrogate") || !strings.Contains(err.Error(), "byte ") {
				t.Errorf("reference=%v %s: got %v, want a malformed-line error naming the surrogate and its offset", ref, line, err)
			}
		}
	}
	// A pair, and an escaped backslash before "ud800", are fine.
	for _, line := range []string{`{"s":"\ud83d\ude00","ts":"2026-07-18 10:00:00"}`, `{"s":"\\ud800","ts":"2026-07-18 10:00:00"}`} {
		if _, err := NewDecoder(src).Decode([]byte(line)); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}

// The non-finite spellings common producers write decode on both paths to
// the same double.
func TestDecodeNonFiniteSpellings(t *testing.T) {
	src := fuzzSource()
	cases := map[string]string{
		"NaN": "NaN", "-NaN": "NaN", "+NaN": "NaN", "nan": "NaN", "-nan": "NaN",
		"Infinity": "+Inf", "+Infinity": "+Inf", "-Infinity": "-Inf", "inf": "+Inf", "-inf": "-Inf", "+inf": "+Inf",
		"INF": "+Inf", "infinity": "+Inf", "1e400": "+Inf", "-1e400": "-Inf",
	}
	for spelling, want := range cases {
		line := `{"d":` + spelling + `,"ts":"2026-07-18 10:00:00"}`
		for _, ref := range []bool{false, true} {
			d := NewDecoder(src)
			d.noScan = ref
			row, err := d.Decode([]byte(line))
			if err != nil {
				t.Errorf("reference=%v %s: %v", ref, spelling, err)
				continue
			}
			if got := fmt.Sprint(row[4].F); row[4].Null || got != want {
				t.Errorf("reference=%v %s: got %v (null %v), want %s", ref, spelling, row[4].F, row[4].Null, want)
			}
		}
		// In a column the query does not read, and nested in a skipped
		// value, the spelling is accepted too.
		skip := `{"z":[` + spelling + `,{"y":` + spelling + `}],"ts":"2026-07-18 10:00:00"}`
		if _, err := NewDecoder(src).Decode([]byte(skip)); err != nil {
			t.Errorf("skipped %s: %v", spelling, err)
		}
	}
	for _, bad := range []string{"Infin", "NaNa", "-", "Inf1", "nul", "Infinityx", "--inf"} {
		line := `{"d":` + bad + `,"ts":"2026-07-18 10:00:00"}`
		if _, err := NewDecoder(src).Decode([]byte(line)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want malformed", bad, err)
		}
	}
}

// The CSV decoder repairs invalid UTF-8 in a VARCHAR cell as the JSON
// paths do.
func TestCSVRepairsUTF8(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE c (g VARCHAR, n BIGINT) WITH (format = 'csv', header = 'false');
SELECT g, count(*) FROM c GROUP BY g`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := NewQueryDecoder(prog.Queries[0])
	for line, want := range map[string]string{"a\xffb,1": "a\ufffdb", "\"\xe2\x82\",2": "\ufffd", "ok,3": "ok"} {
		row, err := d.Decode([]byte(line))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if row[0].S != want {
			t.Errorf("%q: cell %q, want %q", line, row[0].S, want)
		}
	}
}
