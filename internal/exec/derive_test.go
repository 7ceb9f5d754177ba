package exec

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

func derivedQuery(t *testing.T, format, query string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(`CREATE SOURCE s (k VARCHAR, ms BIGINT, at TIMESTAMP(3), ts AS TO_TIMESTAMP_LTZ(ms, 3), ku AS upper(k) || '!',
  late AS ts + INTERVAL '1' SECOND, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = '`+format+`');
`+query, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

// TestDeriveEveryDecoder: the file decoders (JSON, CSV with a header), the
// message decoders (JSON, CSV by position) and a query decoder that reads
// only some columns all give a source with computed and TIMESTAMP(p)
// columns the same row: physical cells as decoded, TIMESTAMP(3) rounded,
// computed cells evaluated in order. A computed column is never read from
// the event, and a CSV header need not (must not) name it.
func TestDeriveEveryDecoder(t *testing.T) {
	want := `["a", 1784368800123, "2026-07-18 10:00:01", "2026-07-18 10:00:00.123", "A!", "2026-07-18 10:00:01.123"]`
	jsonLine := `{"k":"a","ms":1784368800123,"at":"2026-07-18 10:00:00.9996","ts":"2000-01-01","ku":"ignored"}`
	render := func(row []types.Value) string {
		var b strings.Builder
		b.WriteString("[")
		for i, v := range row {
			if i > 0 {
				b.WriteString(", ")
			}
			if v.Kind == types.KindVarchar && !v.Null {
				b.WriteString(`"` + v.S + `"`)
			} else if v.Kind == types.KindTimestamp && !v.Null {
				b.WriteString(`"` + plan.ValueText(v) + `"`)
			} else {
				b.WriteString(plan.ValueText(v))
			}
		}
		return b.String() + "]"
	}
	q := derivedQuery(t, "jsonl", "SELECT count(*) FROM s")
	src := q.Source
	csvQ := derivedQuery(t, "csv", "SELECT count(*) FROM s")
	for _, c := range []struct {
		name  string
		dec   *Decoder
		lines []string
	}{
		{"json file", NewDecoder(src), []string{jsonLine}},
		{"csv file", NewDecoder(csvQ.Source), []string{"at,ms,k", "2026-07-18 10:00:00.9996,1784368800123,a"}},
		{"json message", NewMessageDecoder(src, MessageFormat{}), []string{jsonLine}},
		{"csv message", NewMessageDecoder(src, MessageFormat{CSV: true, Delimiter: ',', SkipHeader: true}), []string{"k,ms,at", "a,1784368800123,2026-07-18 10:00:00.9996"}},
	} {
		var row []types.Value
		for _, l := range c.lines {
			var err error
			if row, err = c.dec.Decode([]byte(l)); err != nil {
				t.Fatalf("%s: %s: %v", c.name, l, err)
			}
		}
		if got := render(row); got != want {
			t.Errorf("%s: got %s, want %s", c.name, got, want)
		}
	}
	// A query that reads only ku: k is decoded for it, ms and at are not,
	// and ts still is (the event time: computed from ms, so ms is too).
	q2 := derivedQuery(t, "jsonl", "SELECT ku, count(*) FROM s GROUP BY ku")
	used := []string{}
	for i, u := range q2.UsedColumns {
		if u {
			used = append(used, q2.Source.Columns[i].Name)
		}
	}
	if strings.Join(used, ",") != "k,ms,ts,ku" {
		t.Errorf("used columns %v, want k, ms, ts, ku", used)
	}
	row, err := NewQueryDecoder(q2).Decode([]byte(`{"k":"a","ms":1784368800123,"at":"not a timestamp: never read"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := render(row); got != `["a", 1784368800123, NULL, "2026-07-18 10:00:00.123", "A!", NULL]` {
		t.Errorf("query decoder: %s", got)
	}
	// Errors: a NULL computed event time, a computed column that fails, a
	// TIMESTAMP(3) rounded out of range: malformed, naming the column.
	d := NewDecoder(src)
	for line, want := range map[string]string{
		`{"k":"a"}`:                                            `column "ts": event time is null (computed as to_timestamp_ltz(ms, 3))`,
		`{"k":"a","ms":9223372036854775}`:                      `column "late": computed column ((ts + INTERVAL '1' SECOND)):`,
		`{"k":"a","ms":99999999999999999}`:                     `column "ts": computed column (to_timestamp_ltz(ms, 3)): Out of Range Error`,
		`{"k":"a","ms":1,"at":"294247-01-10 04:00:54.775806"}`: `column "at": 294247-01-10 04:00:54.775806 rounded to the column's precision is out of the TIMESTAMP range`,
	} {
		_, err := d.Decode([]byte(line))
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want malformed with %q", line, err, want)
		}
	}
	if NewDeriver(derivedQuery(t, "jsonl", "SELECT count(*) FROM s").Source) == nil {
		t.Error("no Deriver for a source with computed columns")
	}
	plain, err := plan.Compile("CREATE SOURCE p (k VARCHAR, t TIMESTAMP(6)); SELECT count(*) FROM p", plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if NewDeriver(plain.Queries[0].Source) != nil {
		t.Error("a Deriver for a source with nothing to derive (TIMESTAMP(6) is TIMESTAMP)")
	}
}

// BenchmarkDecodeComputed compares decoding an event whose time is epoch
// milliseconds through a computed column with decoding one that carries a
// timestamp string: the Deriver's copy and evaluation against the
// timestamp parse it replaces.
func BenchmarkDecodeComputed(b *testing.B) {
	for _, c := range []struct{ name, sql, line string }{
		{"computed", "CREATE SOURCE s (k VARCHAR, v BIGINT, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts)",
			`{"k":"customer-17","v":42,"ms":1784368800123}`},
		{"timestamp", "CREATE SOURCE s (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)",
			`{"k":"customer-17","v":42,"ts":"2026-07-18 10:00:00.123"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			prog, err := plan.Compile(c.sql+"; SELECT k, sum(v) FROM s GROUP BY k", plan.CompileOptions{})
			if err != nil {
				b.Fatal(err)
			}
			d := NewQueryDecoder(prog.Queries[0])
			line := []byte(c.line)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decode(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
