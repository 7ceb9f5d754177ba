package plan

import (
	"strings"
	"testing"
)

// TestJoinWithoutGroupingSaysWhatToWrite: a join that neither aggregates
// nor groups is refused with the query to write instead, grouping by the
// columns selected and a TUMBLE of the time input's event time by the
// views' window step (a column of that time, aliased, keeps its alias).
func TestJoinWithoutGroupingSaysWhatToWrite(t *testing.T) {
	const views = `CREATE SOURCE p (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE a (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW np AS SELECT id, name, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM p GROUP BY id, name, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW hs AS SELECT seller, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) AS ws, count(*) AS n
  FROM a GROUP BY seller, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM a GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
`
	for _, c := range []struct{ sql, want string }{
		{`CREATE VIEW q AS SELECT x.id, x.name, x.ws FROM np x JOIN ns y ON x.id = y.seller AND x.ws = y.ws;`,
			"group the rows: SELECT x.id, x.name, TUMBLE_START(x.ws, INTERVAL '10' SECOND) AS ws ... GROUP BY x.id, x.name, TUMBLE(x.ws, INTERVAL '10' SECOND)"},
		{`CREATE VIEW q AS SELECT y.seller, ws AS start FROM hs y JOIN hs z ON y.seller = z.seller AND y.ws = z.ws;`,
			"SELECT y.seller, TUMBLE_START(y.ws, INTERVAL '1' MINUTE) AS start ... GROUP BY y.seller, TUMBLE(y.ws, INTERVAL '1' MINUTE)"},
	} {
		_, err := Compile(views+c.sql, CompileOptions{OwnOutputs: true})
		if err == nil || !strings.Contains(err.Error(), "query q neither aggregates nor groups") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n%v\nwant %q", c.sql, err, c.want)
		}
	}
	// A query over one source keeps the plain rule.
	_, err := Compile(views+`CREATE VIEW q AS SELECT id FROM p;`, CompileOptions{OwnOutputs: true})
	if err == nil || !strings.Contains(err.Error(), "GROUP BY and/or aggregate functions") {
		t.Errorf("one source: %v", err)
	}
}
