package ubik_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// Join equality is one rule for the temporal join, the interval join and
// a join of two views: SQL's =, where NULL joins nothing, NaN equals NaN
// (as in PostgreSQL), +Infinity and -Infinity are each only themselves,
// and -0.0 equals 0.0. Every key of the pool meets every other, and each
// join must pair exactly the ones the rule says.

// eqKeys are the DOUBLE keys tried, as JSON; nil is NULL.
var eqKeys = []struct {
	json string
	f    *float64
}{
	{"null", nil}, {`"NaN"`, fp(math.NaN())}, {`"Infinity"`, fp(math.Inf(1))}, {`"-Infinity"`, fp(math.Inf(-1))},
	{"0", fp(0)}, {"-0.0", fp(math.Copysign(0, -1))}, {"1.5", fp(1.5)}, {`"-NaN"`, fp(math.NaN())},
}

func fp(f float64) *float64 { return &f }

// joinEqual is the rule, written out.
func joinEqual(a, b *float64) bool {
	switch {
	case a == nil || b == nil:
		return false
	case math.IsNaN(*a) || math.IsNaN(*b):
		return math.IsNaN(*a) && math.IsNaN(*b)
	}
	return *a == *b
}

func TestJoinEqualityOneRule(t *testing.T) {
	const src = `
CREATE SOURCE l (id BIGINT, d DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE SOURCE r (id BIGINT, d DOUBLE, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE TABLE t (d DOUBLE, v BIGINT, ts TIMESTAMP, PRIMARY KEY (d) NOT ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
`
	queries := map[string]string{
		"temporal": src + `SELECT l.id, count(*) AS n, sum(t.v) AS v FROM l JOIN t FOR SYSTEM_TIME AS OF l.ts ON l.d = t.d GROUP BY l.id;`,
		"interval": src + `SELECT l.id, count(*) AS n, sum(r.v) AS v FROM l JOIN r
  ON l.d = r.d AND r.ts BETWEEN l.ts - INTERVAL '1' MINUTE AND l.ts + INTERVAL '1' MINUTE GROUP BY l.id;`,
		"views": src + `
CREATE VIEW vl AS SELECT id, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, max(d) AS d FROM l GROUP BY id, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW vr AS SELECT id, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, max(d) AS d, sum(v) AS v FROM r GROUP BY id, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW j AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '1' MINUTE) AS ws, count(*) AS n, sum(y.v) AS v
  FROM vl x JOIN vr y ON x.d = y.d AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '1' MINUTE) EMIT FINAL;`,
	}
	// The table holds one version per key of the pool that a primary key
	// can be (not NULL; -0.0 is 0.0's key, -NaN is NaN's), the stream r
	// one row per key; l one event per key. v is a bit per key, so a sum
	// says which rows joined.
	want := map[string]string{}
	var tIn, rIn, lIn [][2]string
	for i, k := range eqKeys {
		if k.f != nil && k.json != "-0.0" && k.json != `"-NaN"` {
			tIn = append(tIn, [2]string{"t", fmt.Sprintf(`{"d":%s,"v":%d,"ts":"2024-01-01 00:00:00"}`, k.json, 1<<i)})
		}
		rIn = append(rIn, [2]string{"r", fmt.Sprintf(`{"id":%d,"d":%s,"v":%d,"ts":"2024-01-01 00:00:02"}`, i, k.json, 1<<i)})
		lIn = append(lIn, [2]string{"l", fmt.Sprintf(`{"id":%d,"d":%s,"ts":"2024-01-01 00:00:01"}`, i, k.json)})
	}
	for name := range queries {
		for i, a := range eqKeys {
			n, v := 0, 0
			for j, b := range eqKeys {
				inT := b.f != nil && b.json != "-0.0" && b.json != `"-NaN"`
				if joinEqual(a.f, b.f) && (name != "temporal" || inT) {
					n++
					v += 1 << j
				}
			}
			if n > 0 {
				want[fmt.Sprintf("%s/%d", name, i)] = fmt.Sprintf("n=%d v=%d", n, v)
			}
		}
	}
	got := map[string]string{}
	for name, sql := range queries {
		in := append(append([][2]string{}, tIn...), lIn...)
		if name != "temporal" {
			in = append(append([][2]string{}, rIn...), lIn...)
		}
		// The stream's last word: an event past every window and version.
		in = append(in, [2]string{"l", `{"id":99,"d":null,"ts":"2024-01-01 00:10:00"}`})
		if name == "temporal" {
			in = append(in, [2]string{"t", `{"d":7,"v":0,"ts":"2024-01-01 00:10:00"}`})
		} else {
			in = append(in, [2]string{"r", `{"id":99,"d":null,"v":0,"ts":"2024-01-01 00:10:00"}`})
		}
		qname := ""
		if name == "views" {
			qname = "j"
		}
		for _, line := range runInputs(t, sql, qname, in) {
			kv := strings.SplitN(line, "\t", 2)
			var v struct{ ID, N, V int64 }
			if err := json.Unmarshal([]byte(kv[1]), &v); err != nil {
				t.Fatal(err)
			}
			got[fmt.Sprintf("%s/%d", name, v.ID)] = fmt.Sprintf("n=%d v=%d", v.N, v.V)
		}
	}
	for k, w := range want {
		if got[k] != w {
			name, i := k, 0
			fmt.Sscanf(k[strings.IndexByte(k, '/')+1:], "%d", &i)
			name = k[:strings.IndexByte(k, '/')]
			t.Errorf("%s join, event keyed %s: %q, want %q", name, eqKeys[i].json, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %q, want no row (the event joins nothing)", k, g)
		}
	}
}
