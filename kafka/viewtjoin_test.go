package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/sql/plan"
)

// TestCheckQueryViewOverJoin: a query over a view whose body is a temporal
// join runs in process; over Kafka it is refused with what to do.
func TestCheckQueryViewOverJoin(t *testing.T) {
	const sql = `CREATE SOURCE u (c VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf);
CREATE VIEW priced AS SELECT u.c, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, sum(t.p) AS p FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k
  GROUP BY u.c, TUMBLE(u.ts, INTERVAL '1' MINUTE) EMIT FINAL;
SELECT c, TUMBLE_START(m, INTERVAL '1' HOUR) AS h, sum(p) AS p FROM priced GROUP BY c, TUMBLE(m, INTERVAL '1' HOUR)`
	prog, err := plan.Compile(sql, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = CheckQuery(prog.Queries[len(prog.Queries)-1])
	if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "view priced joins the versioned table t") || !strings.Contains(err.Error(), "run the graph from files") {
		t.Fatalf("%v", err)
	}
	// The view alone (the join's own query) runs over Kafka.
	if err := CheckQuery(prog.Queries[0]); err != nil {
		t.Fatal(err)
	}
}

// TestCheckQueryViewOverIntervalJoin: a query over a view whose body is
// an interval join of two streams runs in process; over Kafka it is
// refused with what to do, read directly, through another view, or by a
// side of a join of two views.
func TestCheckQueryViewOverIntervalJoin(t *testing.T) {
	const sql = `CREATE SOURCE i (id BIGINT, c VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE k (iid BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW tenm AS SELECT i.c, TUMBLE_START(k.ts, INTERVAL '10' MINUTE) AS w, count(*) AS n FROM i JOIN k ON k.iid = i.id AND k.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
  GROUP BY i.c, TUMBLE(k.ts, INTERVAL '10' MINUTE) EMIT FINAL;
CREATE VIEW hourly AS SELECT c, TUMBLE_START(w, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM tenm GROUP BY c, TUMBLE(w, INTERVAL '1' HOUR) EMIT FINAL;
CREATE VIEW daily AS SELECT c, TUMBLE_START(h, INTERVAL '1' DAY) AS d, sum(n) AS n FROM hourly GROUP BY c, TUMBLE(h, INTERVAL '1' DAY);
CREATE VIEW vi AS SELECT c, TUMBLE_START(ts, INTERVAL '1' HOUR) AS h, count(*) AS m FROM i GROUP BY c, TUMBLE(ts, INTERVAL '1' HOUR) EMIT FINAL;
CREATE VIEW both AS SELECT a.c, TUMBLE_START(a.h, INTERVAL '1' HOUR) AS h, sum(a.n) AS n, sum(b.m) AS m FROM hourly a JOIN vi b ON a.c = b.c AND a.h = b.h GROUP BY a.c, TUMBLE(a.h, INTERVAL '1' HOUR);`
	prog, err := plan.Compile(sql, plan.CompileOptions{OwnOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range prog.Queries[1:] {
		if q.Name == "vi" {
			continue
		}
		err := CheckQuery(q)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "view tenm is an interval join of the streams i and k, and query ") || !strings.Contains(err.Error(), "run the graph from files") {
			t.Errorf("%s: %v", q.Name, err)
		}
	}
	// The view alone (the join's own query) runs over Kafka.
	if err := CheckQuery(prog.Queries[0]); err != nil {
		t.Fatal(err)
	}
}
