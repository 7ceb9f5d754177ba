package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestJoinRepartitionedByKeyIdentity: an interval join of two streams
// whose GROUP BY is the column a join key reads under a cast keeps its
// aggregate in the join's partitions only when the cast gives rows of one
// group one key: an INTEGER column does; a DOUBLE column does not (NaN,
// ±Infinity and NULL are one group, but CAST(x AS VARCHAR) routes them to
// three partitions), so its joined rows are repartitioned by the GROUP BY.
func TestJoinRepartitionedByKeyIdentity(t *testing.T) {
	for _, c := range []struct {
		typ  string
		want bool
	}{{"DOUBLE", true}, {"INTEGER", false}, {"BIGINT", false}} {
		prog, err := plan.Compile(`CREATE SOURCE l (x `+c.typ+`, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE r (s VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT l.x AS x, count(*) AS n FROM l JOIN r ON CAST(l.x AS VARCHAR) = r.s AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '1' MINUTE GROUP BY l.x`, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		segs, err := chainQueries(prog.Queries[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := len(segs) > 1; got != c.want { // the join's stage, then its aggregate's
			t.Errorf("a join on CAST(%s AS VARCHAR) grouped by the column: repartitioned %v, want %v", c.typ, got, c.want)
		}
	}
}

// TestRunKafkaIntervalJoinCastOfDouble: the join above, end to end. NaN,
// +Infinity and -Infinity impressions join clicks on their text ('nan',
// 'inf', '-inf': three join keys, routed apart) and count as one group,
// [null]: the finals must be the in-process run's, one count of all three
// (with the joined rows left in the join's partitions, each partition
// published its own count of the group).
func TestRunKafkaIntervalJoinCastOfDouble(t *testing.T) {
	t.Parallel()
	e := newIJoinEnv(t, 3, 3)
	prog, err := plan.Compile(`CREATE SOURCE imp (ad DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE SOURCE clk (s VARCHAR, cts TIMESTAMP, WATERMARK FOR cts AS cts - INTERVAL '3' SECOND);
CREATE VIEW `+e.name+` AS SELECT i.ad AS ad, TUMBLE_START(i.ts, INTERVAL '10' SECOND) AS w, count(*) AS n
FROM imp i JOIN clk c ON c.s = CAST(i.ad AS VARCHAR) AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY i.ad, TUMBLE(i.ts, INTERVAL '10' SECOND);`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[len(prog.Queries)-1]
	ts := func(s int64) string { return string(changelog.AppendCell(nil, types.TS(baseTS+s*1_000_000))) }
	var imps, clks [][]byte
	for i, ad := range []string{`"NaN"`, `"Infinity"`, `"-Infinity"`, `1.5`, `null`, `"NaN"`, `"Infinity"`, `"-Infinity"`} {
		imps = append(imps, fmt.Appendf(nil, `{"ad":%s,"ts":%s}`, ad, ts(int64(i))))
	}
	for i, s := range []string{"nan", "inf", "-inf", "1.5", "nan", "inf", "-inf"} {
		clks = append(clks, fmt.Appendf(nil, `{"s":"%s","cts":%s}`, s, ts(int64(i)+1)))
	}
	// Late enough to close the window on both inputs.
	imps = append(imps, fmt.Appendf(nil, `{"ad":9,"ts":%s}`, ts(60)))
	clks = append(clks, fmt.Appendf(nil, `{"s":"x","cts":%s}`, ts(60)))
	want := ijoinInProcess(t, q, 1, imps, clks)
	if len(want) != 2 {
		t.Fatalf("in process: %d finals, want 2 (the group [null] and 1.5): %v", len(want), want)
	}
	produceShuffled(t, e.addrs, 3, e.imp, 3, imps, e.clk, 3, clks)
	o := e.options(q)
	o.RepartitionPartitions = 8
	o.Logger = testLogger(t)
	runToEnd(t, o, 3*time.Minute)
	compareFinals(t, readFinals(t, e.addrs, e.sink), want)
}
