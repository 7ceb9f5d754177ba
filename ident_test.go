package ubik_test

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// runInputs runs a script's query (name: "" for the script's last) over
// records pushed by input name in order, and returns every record as
// "key<TAB>value" lines, finals and updates alike, in emission order.
func runInputs(t *testing.T, sql, name string, in [][2]string) []string {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	q, err := eng.Start(sql, ubik.QueryOptions{Name: name, OnRecord: func(r changelog.Record) error {
		out = append(out, string(r.Key)+"\t"+string(r.Value))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range in {
		if err := q.PushInput(x[0], []byte(x[1])); err != nil {
			t.Fatalf("input %d (%s): %v", i, x[0], err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Aggregates over same-named columns of a join's two sides are different
// aggregates: sum(s.v) and sum(t.v), max(l.id) and max(r.id), FILTER
// (WHERE l.id = 1) and FILTER (WHERE r.id = 1) each keep their own slot.
func TestJoinSidesSameNamedAggregates(t *testing.T) {
	last := func(t *testing.T, out []string) string {
		t.Helper()
		if len(out) == 0 {
			t.Fatal("no records")
		}
		return out[len(out)-1]
	}
	t.Run("temporal", func(t *testing.T) {
		sql := `
CREATE SOURCE s (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE TABLE t (k VARCHAR, v BIGINT, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
SELECT s.k AS k, sum(s.v) AS stream_v, sum(t.v) AS table_v, max(s.v) AS smax, max(t.v) AS tmax,
  count(*) FILTER (WHERE s.v = 1) AS s1, count(*) FILTER (WHERE t.v = 1) AS t1
FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k GROUP BY s.k;`
		out := runInputs(t, sql, "", [][2]string{
			{"t", `{"k":"A","v":100,"ts":"2023-12-31 00:00:00"}`},
			{"s", `{"k":"A","v":1,"ts":"2024-01-01 00:00:00"}`},
			{"s", `{"k":"A","v":2,"ts":"2024-01-01 00:00:10"}`},
			{"t", `{"k":"A","v":100,"ts":"2024-01-02 00:00:00"}`},
		})
		want := `["A"]` + "\t" + `{"k": "A", "stream_v": 3, "table_v": 200, "smax": 2, "tmax": 100, "s1": 1, "t1": 0}`
		if got := last(t, out); got != want {
			t.Fatalf("last record\n got %s\nwant %s\nall:\n%s", got, want, strings.Join(out, "\n"))
		}
	})
	t.Run("interval", func(t *testing.T) {
		sql := `
CREATE SOURCE l (id BIGINT, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE SOURCE r (id BIGINT, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
SELECT l.k, max(l.id) AS lmax, max(r.id) AS rmax, sum(l.id) AS lsum, sum(r.id) AS rsum,
  count(*) FILTER (WHERE l.id = 1) AS l1, count(*) FILTER (WHERE r.id = 1) AS r1
FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '1' MINUTE AND l.ts + INTERVAL '1' MINUTE
GROUP BY l.k;`
		out := runInputs(t, sql, "", [][2]string{
			{"l", `{"id":1,"k":7,"ts":"2024-01-01 00:00:00"}`},
			{"r", `{"id":10,"k":7,"ts":"2024-01-01 00:00:05"}`},
			{"r", `{"id":20,"k":7,"ts":"2024-01-01 00:00:06"}`},
		})
		want := "[7]\t" + `{"k": 7, "lmax": 1, "rmax": 20, "lsum": 2, "rsum": 30, "l1": 2, "r1": 0}`
		if got := last(t, out); got != want {
			t.Fatalf("last record\n got %s\nwant %s\nall:\n%s", got, want, strings.Join(out, "\n"))
		}
	})
	t.Run("views", func(t *testing.T) {
		sql := `
CREATE SOURCE a (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE SOURCE b (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);
CREATE VIEW va AS SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, sum(v) AS v
  FROM a GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW vb AS SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, sum(v) AS v
  FROM b GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT x.k, TUMBLE_START(x.ws, INTERVAL '10' SECOND) AS ws, sum(x.v) AS xv, sum(y.v) AS yv,
  count(*) FILTER (WHERE x.v = 1) AS x1, count(*) FILTER (WHERE y.v = 1) AS y1
  FROM va x JOIN vb y ON x.k = y.k AND x.ws = y.ws
  GROUP BY x.k, TUMBLE(x.ws, INTERVAL '10' SECOND) EMIT FINAL;`
		out := runInputs(t, sql, "j", [][2]string{
			{"a", `{"k":1,"v":1,"ts":"2024-01-01 00:00:01"}`},
			{"b", `{"k":1,"v":40,"ts":"2024-01-01 00:00:02"}`},
			{"b", `{"k":1,"v":2,"ts":"2024-01-01 00:00:03"}`},
			{"a", `{"k":1,"v":0,"ts":"2024-01-01 00:00:30"}`},
			{"b", `{"k":1,"v":0,"ts":"2024-01-01 00:00:30"}`},
		})
		want := `[1, "2024-01-01 00:00:00"]` + "\t" + `{"k": 1, "ws": "2024-01-01 00:00:00", "xv": 1, "yv": 42, "x1": 1, "y1": 0}`
		if len(out) == 0 || out[0] != want {
			t.Fatalf("records\n got %s\nwant %s", strings.Join(out, "\n"), want)
		}
	})
}
