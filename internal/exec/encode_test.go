package exec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestEncodeRecordMatchesChangelog holds the operator's record encoding
// (encodeRecord: key cells rendered once, SELECT columns that repeat a key
// cell copied from the key's bytes) to the general encoder: every record's
// key must be changelog.AppendKey of the key cells and its value
// changelog.AppendValue of the SELECT cells, over queries that repeat key
// cells in any order, repeat them twice, project window bounds, compute
// over them, or select nothing of the key, and over edge cells.
func TestEncodeRecordMatchesChangelog(t *testing.T) {
	queries := []string{
		`SELECT g, TUMBLE_START(event_time, INTERVAL '1' SECOND) AS ws, count(*) AS n, sum(x) AS s, max(x) AS m FROM flat GROUP BY g, TUMBLE(event_time, INTERVAL '1' SECOND)`,
		`SELECT count(*) AS n, g AS a, g AS b, TUMBLE_END(event_time, INTERVAL '2' SECOND) AS we, TUMBLE_START(event_time, INTERVAL '2' SECOND) AS ws FROM flat GROUP BY TUMBLE(event_time, INTERVAL '2' SECOND), g`,
		`SELECT window_start, window_end, g, min(x) AS lo FROM TABLE(TUMBLE(TABLE flat, DESCRIPTOR(event_time), INTERVAL '1' SECOND)) GROUP BY window_end, g, window_start`,
		`SELECT upper(g) AS u, g || 'x' AS gx, sum(x) AS s FROM flat GROUP BY g, x, HOP(event_time, INTERVAL '1' SECOND, INTERVAL '3' SECOND)`,
		`SELECT x, g, count(*) AS n FROM flat GROUP BY g, x`,
		`SELECT count(*) AS n FROM flat GROUP BY g, SESSION(event_time, INTERVAL '2' SECOND)`,
		`SELECT g, SESSION_START(event_time, INTERVAL '2' SECOND) AS ss, SESSION_END(event_time, INTERVAL '2' SECOND) AS se, count(*) AS n FROM flat GROUP BY g, SESSION(event_time, INTERVAL '2' SECOND)`,
	}
	cells := []string{`"a"`, `"b\u00e9"`, `"\ud83d\ude00"`, `"q\"\\"`, `null`, `"\u0000"`, `""`}
	xs := []string{`0`, `-0.0`, `1.5`, `NaN`, `Infinity`, `-Infinity`, `null`, `1e300`, `123.45`, `0.1`}
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	for i := range 400 {
		lines = append(lines, fmt.Sprintf(`{"g":%s,"x":%s,"event_time":"2026-07-18 10:00:%02d.%03d"}`,
			cells[rng.IntN(len(cells))], xs[rng.IntN(len(xs))], i/10, rng.IntN(1000)))
	}
	for _, sql := range queries {
		for _, into := range []bool{false, true} {
			name := sql[:40]
			if into {
				name += " into"
			}
			t.Run(name, func(t *testing.T) { encodeRecordCase(t, sql, lines, into) })
		}
	}
}

// encodeRecordCase runs one query of TestEncodeRecordMatchesChangelog,
// with into, rendering into a host's buffer as a shard does (RenderInto):
// the bytes must be the same, found in place when they fit, and a record
// the host kept must never be written over.
func encodeRecordCase(t *testing.T, sql string, lines []string, into bool) {
	prog, err := plan.Compile(identitySource+sql, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	names := make([]string, len(q.Select))
	for i, c := range q.Select {
		names[i] = c.Name
	}
	var op *Operator
	var clock int64
	records, inPlace := 0, 0
	var buf, kept []byte // the host's buffer, and a copy of what it holds
	op, err = New(q, Config{
		Emit: func(r *changelog.Record) error {
			records++
			wantKey := changelog.AppendKey(nil, op.postRow[:len(q.Keys)])
			cells := make([]types.Value, len(q.Select))
			for i, c := range q.Select {
				v, err := c.Expr.Eval(op.postRow)
				if err != nil {
					t.Fatal(err)
				}
				cells[i] = v
			}
			wantVal := changelog.AppendValue(nil, names, cells)
			if !bytes.Equal(r.Key, wantKey) || !bytes.Equal(r.Value, wantVal) {
				t.Fatalf("record\n key %s\n val %s\nwant\n key %s\n val %s", r.Key, r.Value, wantKey, wantVal)
			}
			// A view's reader takes the typed row, not the bytes:
			// every cell, the ones copied from the key included.
			got := op.EmittedRow()
			for i := range cells {
				if !bytes.Equal(changelog.AppendCell(nil, got[i]), changelog.AppendCell(nil, cells[i])) || got[i].Null != cells[i].Null || got[i].Kind != cells[i].Kind {
					t.Fatalf("EmittedRow()[%d] (%s) = %#v, want %#v", i, names[i], got[i], cells[i])
				}
			}
			if into {
				buf, kept, inPlace = keepRendered(t, op, buf, kept, r, inPlace)
			}
			return nil
		},
		Nanotime: func() int64 { clock++; return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	if into {
		op.RenderInto(buf)
	}
	d := NewQueryDecoder(q)
	for i, l := range lines {
		row, err := d.Decode([]byte(l))
		if err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		if err := op.Process(row); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 && q.Window != nil && q.Window.Kind != plan.Session {
			if err := op.EmitEarly(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	if records == 0 {
		t.Fatal("no records")
	}
	if into && (inPlace == 0 || !bytes.Equal(buf, kept)) {
		t.Fatalf("%d of %d records rendered in place; the buffer holds what it was given: %v", inPlace, records, bytes.Equal(buf, kept))
	}
}

// keepRendered appends r's key and value to buf as a shard does: buf only
// grows over them when the operator rendered them there. Small buffers
// make some records too large to fit, so they come in arrays of their
// own. kept is a copy of everything appended to the buffer so far: no
// later rendering may change it.
func keepRendered(t *testing.T, op *Operator, buf, kept []byte, r *changelog.Record, inPlace int) ([]byte, []byte, int) {
	t.Helper()
	n := len(buf)
	if len(r.Key)+len(r.Value) <= cap(buf)-n && &buf[:n+1][n] == &r.Key[0] && &buf[:n+len(r.Key)+1][n+len(r.Key)] == &r.Value[0] {
		inPlace++
	}
	if !bytes.Equal(buf, kept) {
		t.Fatal("the operator wrote over a record the host kept")
	}
	buf = append(append(buf, r.Key...), r.Value...)
	kept = append(append(kept, r.Key...), r.Value...)
	if cap(buf)-len(buf) < 48 {
		buf, kept = make([]byte, 0, 200), kept[:0]
	}
	op.RenderInto(buf)
	return buf, kept, inPlace
}
