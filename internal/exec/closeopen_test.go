package exec

import (
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestCloseOpenWindows: CloseOpenWindows finalizes every open window (tumble, hop, session, with
// allowed lateness) at the smallest watermark that closes them, and the
// operator goes on: restored from a checkpoint taken after the drain, an
// event for a drained window is late and one for a later window opens it.
func TestCloseOpenWindows(t *testing.T) {
	const src = `CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND);
`
	cases := []struct {
		name, sql string
		wantWM    string // the watermark after the drain
		late, new string // an event for a drained window, one for a later window
	}{
		{"tumble", `SELECT merchant, count(*) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`,
			"2026-07-18 10:02:00", "2026-07-18 10:01:59", "2026-07-18 10:02:00"},
		{"hop", `SELECT merchant, count(*) FROM events GROUP BY merchant, HOP(event_time, INTERVAL '30' SECOND, INTERVAL '1' MINUTE)`,
			"2026-07-18 10:02:30", "2026-07-18 10:01:29", "2026-07-18 10:02:30"},
		{"lateness", `SELECT merchant, count(*) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT FINAL ALLOWED LATENESS INTERVAL '10' SECOND`,
			"2026-07-18 10:02:10", "2026-07-18 10:01:59", "2026-07-18 10:02:00"},
		{"session", `SELECT merchant, count(*) FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '10' SECOND)`,
			"2026-07-18 10:01:40", "2026-07-18 10:01:29", "2026-07-18 10:01:40"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := plan.Compile(src+tc.sql, plan.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			q := prog.Queries[0]
			var out []changelog.Record
			var late int
			cfg := Config{Emit: func(r *changelog.Record) error { out = append(out, r.Clone()); return nil },
				Late: func(*LateEvent) { late++ }, Nanotime: func() int64 { return 1 }}
			op, err := New(q, cfg)
			if err != nil {
				t.Fatal(err)
			}
			dec := NewDecoder(q.Source)
			feed := func(op *Operator, m, ts string) {
				t.Helper()
				row, err := dec.Decode([]byte(`{"merchant":"` + m + `","amount":1,"event_time":"` + ts + `"}`))
				if err != nil {
					t.Fatal(err)
				}
				if err := op.Process(row); err != nil {
					t.Fatal(err)
				}
			}
			feed(op, "a", "2026-07-18 10:00:10")
			feed(op, "b", "2026-07-18 10:01:20")
			feed(op, "a", "2026-07-18 10:01:30")
			if err := op.CloseOpenWindows(); err != nil {
				t.Fatal(err)
			}
			if op.Stats().LiveGroups != 0 {
				t.Fatalf("after CloseOpenWindows: %d live groups", op.Stats().LiveGroups)
			}
			finals := 0
			for _, r := range out {
				if r.Meta.Final {
					finals++
				}
			}
			if finals == 0 || finals != len(out) {
				t.Fatalf("after CloseOpenWindows: %d records, %d final", len(out), finals)
			}
			want, err := dec.Decode([]byte(`{"merchant":"x","amount":1,"event_time":"` + tc.wantWM + `"}`))
			if err != nil {
				t.Fatal(err)
			}
			if op.Watermark() != want[2].I {
				t.Fatalf("watermark after CloseOpenWindows %d, want %d (%s)", op.Watermark(), want[2].I, tc.wantWM)
			}
			// A restart: checkpoint, restore into a fresh operator.
			entries := map[string][]byte{}
			if err := op.Checkpoint(true, nil, func(k, v []byte) error { entries[string(k)] = append([]byte(nil), v...); return nil }); err != nil {
				t.Fatal(err)
			}
			op2, err := New(q, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range entries {
				if _, err := op2.Restore([]byte(k), v); err != nil {
					t.Fatal(err)
				}
			}
			op2.FinishRestore()
			n := len(out)
			feed(op2, "a", tc.late)
			if op2.Stats().Late != 1 || late == 0 || len(out) != n {
				t.Fatalf("event at %s after the drain: %d late, %d records; want 1 late, none", tc.late, op2.Stats().Late, len(out)-n)
			}
			late = 0
			feed(op2, "a", tc.new)
			if err := op2.CloseOpenWindows(); err != nil {
				t.Fatal(err)
			}
			if late != 0 || len(out) == n || !out[len(out)-1].Meta.Final {
				t.Fatalf("event at %s after the drain: %d late windows, %d records; want it applied and finalized", tc.new, late, len(out)-n)
			}
		})
	}
}
