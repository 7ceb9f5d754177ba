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
