package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestCheckQuery holds the partitioning rule of a chain of views: a
// reader runs in the view's partition if its GROUP BY names the view's
// columns that repeat the chain's partitioning terms, carried along the
// chain; a reader that groups by less starts a segment of its own
// (segments lists each segment's first query), partitioned by its GROUP
// BY.
func TestCheckQuery(t *testing.T) {
	const src = `CREATE SOURCE ev (a VARCHAR, b BIGINT, x DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);
`
	for _, c := range []struct {
		name, script, segments string
	}{
		{"same key", `CREATE VIEW v AS SELECT a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT a, sum(n) AS n FROM v GROUP BY a;`, "v"},
		{"more keys, another order", `CREATE VIEW v AS SELECT b, a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, b, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT n, b, a, count(*) AS c FROM v GROUP BY n, b, a;`, "v"},
		{"renamed column", `CREATE VIEW v AS SELECT a AS merchant, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT merchant, count(*) AS c FROM v GROUP BY merchant;`, "v"},
		{"global root", `CREATE VIEW v AS SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT n, count(*) AS c FROM v GROUP BY n;`, "v"},
		{"hop root", `CREATE VIEW v AS SELECT a, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE);
CREATE VIEW q AS SELECT a, TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM v GROUP BY a, TUMBLE(ws, INTERVAL '1' HOUR);`, "v"},
		{"three levels", `CREATE VIEW v AS SELECT a, b, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, b, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW w AS SELECT b AS bb, a, TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM v GROUP BY a, b, TUMBLE(ws, INTERVAL '1' HOUR);
CREATE VIEW q AS SELECT bb, a, sum(n) AS n FROM w GROUP BY bb, a;`, "v"},
		{"fewer keys", `CREATE VIEW v AS SELECT a, b, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, b, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT a, sum(n) AS n FROM v GROUP BY a;`, "v q"},
		{"window only", `CREATE VIEW v AS SELECT a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM v GROUP BY TUMBLE(ws, INTERVAL '1' HOUR);`, "v q"},
		{"an expression of the key", `CREATE VIEW v AS SELECT a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT upper(a) AS u, sum(n) AS n FROM v GROUP BY upper(a);`, "v q"},
		{"key not selected", `CREATE VIEW v AS SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n, max(a) AS a FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW q AS SELECT a, sum(n) AS n FROM v GROUP BY a;`, "v q"},
		{"lost in the middle", `CREATE VIEW v AS SELECT a, b, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, b, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW w AS SELECT a, TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n, max(b) AS b FROM v GROUP BY a, b, TUMBLE(ws, INTERVAL '1' HOUR);
CREATE VIEW q AS SELECT a, b, sum(n) AS n FROM w GROUP BY a, b;`, "v q"},
		// After a cut the partitioning is the reader's own GROUP BY: a
		// reader of it that follows stays, one that groups by less cuts
		// again.
		{"cut, follow, cut", `CREATE VIEW v AS SELECT a, b, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, b, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW w AS SELECT b, TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM v GROUP BY b, TUMBLE(ws, INTERVAL '1' HOUR);
CREATE VIEW w2 AS SELECT b, TUMBLE_START(h, INTERVAL '1' DAY) AS d, sum(n) AS n FROM w GROUP BY b, TUMBLE(h, INTERVAL '1' DAY);
CREATE VIEW q AS SELECT sum(n) AS n FROM w2;`, "v w q"},
	} {
		prog, err := plan.Compile(src+c.script, plan.CompileOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		q := prog.Queries[len(prog.Queries)-1]
		if err := CheckQuery(q); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		segs, err := chainQueries(q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var roots []string
		for _, s := range segs {
			roots = append(roots, s[0].Name)
		}
		if got := strings.Join(roots, " "); got != c.segments {
			t.Errorf("%s: segments from %s, want %s", c.name, got, c.segments)
		}
	}
}

// TestNewViewSinks: a query over views needs a topic of its own for every
// view of its chain, on the sink's cluster, shared with no other query,
// the source included; a sink for a view it does not read is an error.
func TestNewViewSinks(t *testing.T) {
	prog, err := plan.Compile(`CREATE SOURCE ev (a VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW v AS SELECT a, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, count(*) AS n FROM ev GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW w AS SELECT a, TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM v GROUP BY a, TUMBLE(ws, INTERVAL '1' HOUR);
CREATE VIEW q AS SELECT a, sum(n) AS n FROM w GROUP BY a;`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[2]
	ep := func(topic string, brokers ...string) Endpoint {
		if len(brokers) == 0 {
			brokers = []string{"k:9092"}
		}
		return Endpoint{Config: Config{Brokers: brokers}, Topic: topic}
	}
	for _, c := range []struct {
		name  string
		sinks map[string]Endpoint
		want  string
	}{
		{"all", map[string]Endpoint{"v": ep("out-v"), "w": ep("out-w")}, ""},
		{"one missing", map[string]Endpoint{"v": ep("out-v")}, "query q reads view w, which needs its own sink topic"},
		{"shared with the sink", map[string]Endpoint{"v": ep("out"), "w": ep("out-w")}, "query q's sink and view v's sink are both topic out (on brokers=k:9092): two changelogs in one compacted topic would overwrite each other's keys; give each sink a topic of its own"},
		{"shared by two views", map[string]Endpoint{"v": ep("x"), "w": ep("x")}, "view w's sink and view v's sink are both topic x"},
		{"the source", map[string]Endpoint{"v": ep("ev"), "w": ep("out-w")}, "source ev's topic and view v's sink are both topic ev (on brokers=k:9092): the query would read its own output; give the sink a topic of its own"},
		{"the state topic", map[string]Endpoint{"v": ep("q-state"), "w": ep("out-w")}, "view v's sink is topic q-state, an internal topic of q: ubik writes its own records there and --reset-state (Options.ResetState) deletes it; give it another topic, or the query another name"},
		{"a view repartition's topic", map[string]Endpoint{"v": ep("out-v"), "w": ep("q-s7-state")}, "view w's sink is topic q-s7-state, an internal topic of q"},
		{"another cluster", map[string]Endpoint{"v": ep("out-v", "other:9092"), "w": ep("out-w")}, "view v's sink (brokers=other:9092) must be on the cluster of the sink (brokers=k:9092)"},
		{"not read", map[string]Endpoint{"v": ep("out-v"), "w": ep("out-w"), "z": ep("out-z")}, "a sink for view z, which query q does not read"},
	} {
		_, err := New(Options{Query: q, Source: ep("ev"), Sink: ep("out"), ViewSinks: c.sinks})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
	// The sink is the source, or the repartition topic of the query.
	for sink, want := range map[string]string{"ev": "source ev's topic and query q's sink are both topic ev",
		"q-repartition": "query q's sink is topic q-repartition, an internal topic of q"} {
		_, err := New(Options{Query: q, Source: ep("ev"), Sink: ep(sink), ViewSinks: map[string]Endpoint{"v": ep("out-v"), "w": ep("out-w")}})
		if !errors.Is(err, ErrSharedTopic) || !strings.Contains(err.Error(), want) {
			t.Errorf("sink %s: %v\nwant %q", sink, err, want)
		}
	}
}
