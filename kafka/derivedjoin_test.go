package kafka

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Joins whose joined rows reach the aggregate through a second
// repartition (an interval join grouped by neither key column, a
// temporal join grouped by table columns), over inputs with computed
// columns and TIMESTAMP(3) columns: the joined row carries each computed
// cell as the join evaluated it and each TIMESTAMP(3) cell as rounded,
// and the GROUP BY names them, with the edge cells (NaN, both
// infinities, -0.0 beside 0.0, NULL, a DOUBLE overflowing to infinity in
// a computed column, sub-millisecond times rounding either way, before
// 1970 too, escapes and non-ASCII text). The finals must be the
// in-process run's byte for byte.

// derivedX are a DOUBLE's edge cells (JSON: NaN and the infinities are
// read bare); the computed y = x * 2 makes 1e308 +Inf.
var derivedX = []string{`NaN`, `Infinity`, `-Infinity`, `-0.0`, `0.0`, `null`, `1e308`, `1.5`}

// derivedStamps are TIMESTAMP(3) cells: halves of a millisecond round to
// the later instant (.0005 to .001, before 1970 too), a microsecond
// below a half rounds down, .9995 carries into the next second.
// derivedSites: escapes, non-ASCII text and a byte that is not UTF-8.
var derivedSites = []string{`a`, `b\"q`, `c\\d`, `é😀`, ``, "x\xffy"}

var derivedStamps = []string{`"2026-07-18 10:00:00.0004"`, `"2026-07-18 10:00:00.0005"`, `"2026-07-18 10:00:00.123499"`,
	`"2026-07-18 10:00:00.9995"`, `"1969-12-31 23:59:59.9995"`, `"1969-12-31 23:59:59.9994"`, `null`}

const derivedIJoinSQL = `
CREATE SOURCE imp (ad DOUBLE, site VARCHAR, cost DECIMAL(10,2), x DOUBLE, seen TIMESTAMP(3), ms BIGINT,
  ts AS TO_TIMESTAMP_LTZ(ms, 3), y AS x * 2, ys AS CAST(y AS VARCHAR), tag AS site || '"\',
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE SOURCE clk (ad DOUBLE, val DECIMAL(10,2), cts TIMESTAMP(3), v3 AS val * 3,
  WATERMARK FOR cts AS cts - INTERVAL '3' SECOND);
CREATE VIEW NAME AS SELECT i.ys AS ys, i.seen AS seen, i.tag AS tag, TUMBLE_START(i.ts, INTERVAL '10' SECOND) AS w,
  count(*) AS n, sum(i.cost + c.v3) AS total, max(c.cts) AS last, min(i.ts) AS first,
  max(i.y) AS ymax, min(i.y) AS ymin, sum(i.y) AS ysum, max(i.x) AS xmax
FROM imp i JOIN clk c ON c.ad = i.ad AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY i.ys, i.seen, i.tag, TUMBLE(i.ts, INTERVAL '10' SECOND);`

func derivedIJoinQuery(t testing.TB, name string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(strings.Replace(derivedIJoinSQL, "NAME", name, 1), plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[len(prog.Queries)-1]
}

// derivedIJoinData: impressions 100 ms apart (times in milliseconds,
// computed), clicks 130 ms apart with sub-millisecond times (rounded to
// TIMESTAMP(3)), both within their delays.
func derivedIJoinData(seed uint64, n int) (imps, clks [][]byte) {
	r := rand.New(rand.NewPCG(seed, seed^0x23))
	ts := func(us int64) string { return string(changelog.AppendCell(nil, types.TS(us))) }
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000)
		imps = append(imps, fmt.Appendf(nil, `{"ad":%s,"site":"%s","cost":"%d.%02d","x":%s,"seen":%s,"ms":%d}`,
			ijoinAds[r.IntN(len(ijoinAds))], derivedSites[r.IntN(len(derivedSites))], r.IntN(50), r.IntN(100),
			derivedX[r.IntN(len(derivedX))], derivedStamps[r.IntN(len(derivedStamps))], (baseTS+at)/1000))
	}
	for i := range n * 10 / 13 {
		at := int64(i)*130_000 - r.Int64N(2_500_000) + r.Int64N(1000)
		clks = append(clks, fmt.Appendf(nil, `{"ad":%s,"val":"%d.%02d","cts":%s}`,
			ijoinAds[r.IntN(len(ijoinAds)-1)], r.IntN(9), r.IntN(100), ts(baseTS+at)))
	}
	return imps, clks
}

// TestRunKafkaIntervalJoinDerived: the interval join grouped by computed
// and TIMESTAMP(3) columns (not the join key: the joined rows are
// repartitioned) at several partitionings.
func TestRunKafkaIntervalJoinDerived(t *testing.T) {
	t.Parallel()
	imps, clks := derivedIJoinData(17, 1500)
	for _, c := range []struct{ imp, clk, rep int }{{1, 1, 0}, {2, 3, 0}, {3, 2, 2}} {
		t.Run(fmt.Sprintf("imp%d-clk%d-rep%d", c.imp, c.clk, c.rep), func(t *testing.T) {
			e := newIJoinEnv(t, c.imp, c.clk, "_der")
			q := derivedIJoinQuery(t, e.name)
			want := ijoinInProcess(t, q, uint64(c.imp*10+c.clk), imps, clks)
			checkDerivedKeys(t, want)
			produceShuffled(t, e.addrs, uint64(c.imp+c.clk), e.imp, c.imp, imps, e.clk, c.clk, clks)
			o := e.options(q)
			o.RepartitionPartitions = c.rep
			o.Logger = testLogger(t)
			var late int
			o.OnLate = func(*drive.LateEvent) { late++ }
			st := runToEnd(t, o, 3*time.Minute)
			if !st.CaughtUp || st.Late != 0 || late != 0 || st.TableLate != 0 || st.Malformed != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(clks)) || st.JoinJoined == 0 {
				t.Errorf("stats %+v, late hook %d", st, late)
			}
			compareFinals(t, readFinals(t, e.addrs, e.sink), want)
		})
	}
}

// checkDerivedKeys requires the edge cells among the in-process finals'
// keys, so the test holds them to the Kafka run's.
func checkDerivedKeys(t testing.TB, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	all := strings.Join(keys, "\n")
	for _, s := range []string{`["nan", `, `["inf", `, `["-inf", `, `["-0.0", `, `["0.0", `, `["3.0", `, `[null, `, `x\ufffdy`, `"2026-07-18 10:00:00.001"`, `"2026-07-18 10:00:00"`, `"2026-07-18 10:00:00.123"`, `"2026-07-18 10:00:01"`, `"1970-01-01 00:00:00"`, `"1969-12-31 23:59:59.999"`, `, null, `} {
		if !strings.Contains(all, s) {
			t.Fatalf("in process: no final's key has %s:\n%s", s, all[:min(len(all), 2000)])
		}
	}
}

// derivedTJoinSQL: a temporal join grouped by computed and TIMESTAMP(3)
// columns of the table (the joined rows repartitioned), the stream's
// event time a TIMESTAMP(3) and a computed DECIMAL summed.
const derivedTJoinSQL = `
CREATE SOURCE usage (customer VARCHAR, tier DOUBLE, qty DECIMAL(10,2), ts TIMESTAMP(3), amt AS qty * 3,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE TABLE prices (tier DOUBLE, price DECIMAL(12,6), label VARCHAR, x DOUBLE, stamp TIMESTAMP(3), vms BIGINT,
  valid_from AS TO_TIMESTAMP_LTZ(vms, 3), lab AS label || '#', ys AS CAST(x * 2 AS VARCHAR),
  PRIMARY KEY (tier) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '3' SECOND);
CREATE VIEW charge AS SELECT p.ys AS ys, p.stamp AS stamp, p.lab AS lab, TUMBLE_START(u.ts, INTERVAL '10' SECOND) AS w,
  sum(u.amt * p.price) AS charge, count(*) AS events, count(p.price) AS priced, max(u.ts) AS last, max(p.valid_from) AS vf
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY p.ys, p.stamp, p.lab, TUMBLE(u.ts, INTERVAL '10' SECOND);`

// derivedTJoinData: price versions every 700 ms (each tier's in time
// order, times in milliseconds), events 100 ms apart with
// sub-millisecond times, nothing late in any partition.
func derivedTJoinData(seed uint64, n int) (events, versions [][]byte) {
	r := rand.New(rand.NewPCG(seed, seed^0x61))
	ts := func(us int64) string { return string(changelog.AppendCell(nil, types.TS(us))) }
	span := int64(n) * 100_000
	for at := int64(-5_000_000); at < span+10_000_000; at += 700_000 {
		versions = append(versions, fmt.Appendf(nil, `{"tier":%s,"price":"%d.%06d","label":"%s","x":%s,"stamp":%s,"vms":%d}`,
			kjoinTiers[r.IntN(4)], r.IntN(5), r.IntN(1_000_000), derivedSites[r.IntN(len(derivedSites))],
			derivedX[r.IntN(len(derivedX))], derivedStamps[r.IntN(len(derivedStamps))], (baseTS+at)/1000))
	}
	for i := range n {
		at := int64(i)*100_000 - r.Int64N(1_500_000) + r.Int64N(1000)
		events = append(events, fmt.Appendf(nil, `{"customer":"%s","tier":%s,"qty":"%d.%02d","ts":%s}`,
			kjoinCustomers[r.IntN(len(kjoinCustomers))], kjoinTiers[r.IntN(len(kjoinTiers))], r.IntN(50), r.IntN(100), ts(baseTS+at)))
	}
	return events, versions
}

// TestRunKafkaTemporalJoinDerived: the temporal join grouped by the
// table's computed and TIMESTAMP(3) columns at several partitionings.
func TestRunKafkaTemporalJoinDerived(t *testing.T) {
	t.Parallel()
	q := lastQuery(t, derivedTJoinSQL)
	events, versions := derivedTJoinData(5, 1500)
	want := kjoinInProcess(t, q, events, versions)
	checkDerivedKeys(t, want)
	for _, c := range []struct{ src, tbl, rep int }{{1, 1, 0}, {3, 2, 0}, {4, 3, 2}} {
		t.Run(fmt.Sprintf("source%d-table%d-rep%d", c.src, c.tbl, c.rep), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", c.src, nil)
			mkTopic(t, addrs, "prices", c.tbl, nil)
			produceValues(t, addrs, "prices", c.tbl, versions, nil)
			produceValues(t, addrs, "usage", c.src, events, nil)
			o := kjoinOptions(q, addrs)
			o.RepartitionPartitions = c.rep
			o.Logger = testLogger(t)
			st := runToEnd(t, o, 2*time.Minute)
			if !st.CaughtUp || st.Late != 0 || st.Malformed != 0 || st.TableLate != 0 || st.TableMalformed != 0 || st.TableRows != int64(len(versions)) || st.JoinJoined+st.JoinUnmatched != int64(len(events)) {
				t.Errorf("stats %+v", st)
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)
		})
	}
}
