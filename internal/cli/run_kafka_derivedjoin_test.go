package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ubiksql/ubik/internal/testenv"
)

// Joins whose joined rows reach the aggregate through a second
// repartition over Kafka, with computed and TIMESTAMP(3) columns in the
// inputs and the GROUP BY naming them (the interval join's key a
// computed column on one side): an interval join grouped by
// neither key column and a temporal join grouped by columns of the
// table. The topic's finals equal a file run's changelog finals, byte
// for byte, with the edge cells in the grouped columns (a DOUBLE's NaN,
// infinities, -0.0 and 0.0 rendered as text by a computed column; a
// DOUBLE overflowing to infinity; NULL; TIMESTAMP(3) cells whose
// sub-millisecond digits round either way, before 1970 too; escapes,
// non-ASCII text and a byte that is not UTF-8).

// derivedJoinX are the DOUBLE cells (JSON reads NaN and the infinities
// bare); y = x * 2 makes 1e308 infinite.
var derivedJoinX = []string{`NaN`, `Infinity`, `-Infinity`, `-0.0`, `0.0`, `null`, `1e308`, `1.5`}

// derivedJoinStamps are TIMESTAMP(3) cells: a half millisecond rounds
// to the later instant, before 1970 too; .9995 carries into the next
// second.
var derivedJoinStamps = []string{`"2026-07-18 10:00:00.0004"`, `"2026-07-18 10:00:00.0005"`, `"2026-07-18 10:00:00.123499"`,
	`"2026-07-18 10:00:00.9995"`, `"1969-12-31 23:59:59.9995"`, `"1969-12-31 23:59:59.9994"`, `null`}

var derivedJoinLabels = []string{`"a"`, `""`, `"q\"uote\\"`, `"\u00e9\ud83d\ude00"`, "\"x\xffy\""}

const kafkaDerivedIJoinSQL = `CREATE SOURCE imp (ad DOUBLE, site VARCHAR, cost DECIMAL(10,2), x DOUBLE, seen TIMESTAMP(3), ms BIGINT,
  ts AS TO_TIMESTAMP_LTZ(ms, 3), ys AS CAST(x * 2 AS VARCHAR), tag AS site || '#', adk AS ad * 1,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)%s;
CREATE SOURCE clk (ad DOUBLE, val DECIMAL(10,2), cts TIMESTAMP(3), v3 AS val * 3,
  WATERMARK FOR cts AS cts - INTERVAL '3' SECOND)%s;
CREATE VIEW %s AS SELECT i.ys AS ys, i.seen AS seen, i.tag AS tag, TUMBLE_START(i.ts, INTERVAL '10' SECOND) AS w,
  count(*) AS n, sum(i.cost + c.v3) AS total, max(c.cts) AS last, max(i.x * 2) AS ymax
FROM imp i JOIN clk c ON c.ad = i.adk AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY i.ys, i.seen, i.tag, TUMBLE(i.ts, INTERVAL '10' SECOND);
`

const kafkaDerivedTJoinSQL = `CREATE SOURCE usage (customer VARCHAR, tier DOUBLE, qty DECIMAL(10,2), ts TIMESTAMP(3), amt AS qty * 3,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)%s;
CREATE TABLE prices (tier DOUBLE, price DECIMAL(12,6), label VARCHAR, x DOUBLE, stamp TIMESTAMP(3), vms BIGINT,
  valid_from AS TO_TIMESTAMP_LTZ(vms, 3), lab AS label || '#', ys AS CAST(x * 2 AS VARCHAR),
  PRIMARY KEY (tier) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from - INTERVAL '3' SECOND)%s;
CREATE VIEW %s AS SELECT p.ys AS ys, p.stamp AS stamp, p.lab AS lab, TUMBLE_START(u.ts, INTERVAL '10' SECOND) AS w,
  sum(u.amt * p.price) AS charge, count(*) AS events, count(p.price) AS priced, max(u.ts) AS last
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY p.ys, p.stamp, p.lab, TUMBLE(u.ts, INTERVAL '10' SECOND);
`

// kafkaDerivedRows writes the left stream (50 ms apart, up to 1.5 s out
// of order, times in milliseconds for a computed event time) and the
// right input: clicks (75 ms apart, up to 2.5 s out of order, with
// sub-millisecond times) or, versioned, price versions (every 900 ms, in
// time order).
func kafkaDerivedRows(n int, seed uint64, versioned bool) (left, right string) {
	r := rand.New(rand.NewPCG(seed, 11))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format("2006-01-02 15:04:05.000000") }
	ms := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	keys := []string{"-0.0", "0.0", "1.5", "2.5", "null", "7"}
	var a, b strings.Builder
	if versioned {
		for at := -5 * time.Second; at < time.Duration(n)*50*time.Millisecond+10*time.Second; at += 900 * time.Millisecond {
			fmt.Fprintf(&b, `{"tier":%s,"price":"%d.%06d","label":%s,"x":%s,"stamp":%s,"vms":%d}`+"\n",
				keys[r.IntN(4)], r.IntN(5), r.IntN(1_000_000), pick(derivedJoinLabels), pick(derivedJoinX), pick(derivedJoinStamps), ms(at))
		}
		for i := range n {
			at := time.Duration(i)*50*time.Millisecond - time.Duration(r.IntN(1_500_000))*time.Microsecond
			fmt.Fprintf(&a, `{"customer":%s,"tier":%s,"qty":"%d.%02d","ts":"%s"}`+"\n", pick(derivedJoinLabels), pick(keys), r.IntN(40), r.IntN(100), ts(at))
		}
		return a.String(), b.String()
	}
	for i := range n {
		at := time.Duration(i)*50*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond
		fmt.Fprintf(&a, `{"ad":%s,"site":%s,"cost":"%d.%02d","x":%s,"seen":%s,"ms":%d}`+"\n",
			pick(keys), pick(derivedJoinLabels), r.IntN(40), r.IntN(100), pick(derivedJoinX), pick(derivedJoinStamps), ms(at))
	}
	for i := range n * 2 / 3 {
		at := time.Duration(i)*75*time.Millisecond - time.Duration(r.IntN(2_500_000))*time.Microsecond
		fmt.Fprintf(&b, `{"ad":%s,"val":"%d.%02d","cts":"%s"}`+"\n", pick(keys), r.IntN(9), r.IntN(100), ts(at))
	}
	return a.String(), b.String()
}

func TestRunKafkaJoinDerived(t *testing.T) {
	for _, c := range []struct {
		name       string
		versioned  bool
		left, rght int // partitions
	}{{"interval", false, 1, 3}, {"interval", false, 3, 2}, {"temporal", true, 1, 2}, {"temporal", true, 3, 1}} {
		t.Run(fmt.Sprintf("%s-%d-%d", c.name, c.left, c.rght), func(t *testing.T) {
			sqlText, lname, rname, rkind := kafkaDerivedIJoinSQL, "imp", "clk", "source"
			if c.versioned {
				sqlText, lname, rname, rkind = kafkaDerivedTJoinSQL, "usage", "prices", "table"
			}
			left, right := kafkaDerivedRows(3000, uint64(c.left*10+c.rght), c.versioned)
			want := derivedFileFinals(t, sqlText, left, right)
			for _, s := range []string{`["nan", `, `["inf", `, `["-inf", `, `["-0.0", `, `["0.0", `, `[null, `, `x\ufffdy`, `"2026-07-18 10:00:00.001"`,
				`"2026-07-18 10:00:00"`, `"2026-07-18 10:00:00.123"`, `"2026-07-18 10:00:01"`, `"1970-01-01 00:00:00"`, `"1969-12-31 23:59:59.999"`, `, null, `} {
				found := false
				for k := range want {
					found = found || strings.Contains(k, s)
				}
				if !found {
					t.Fatalf("file run: no final's key has %s", s)
				}
			}
			var addr string
			if c.versioned {
				kc, err := kfake.NewCluster(kfake.NumBrokers(1))
				if err != nil {
					t.Fatal(err)
				}
				defer kc.Close()
				addr = kc.ListenAddrs()[0]
			} else {
				addr = testenv.RequireKafka(t)[0]
			}
			name := fmt.Sprintf("djcli%d%d_%d_%d", c.left, c.rght, os.Getpid(), time.Now().UnixNano()%1_000_000_000)
			script := fmt.Sprintf(sqlText, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = '%s-%s')", addr, name, lname),
				fmt.Sprintf(" WITH (connector = 'kafka', topic = '%s-%s')", name, rname), name) +
				fmt.Sprintf("CREATE SINK out FROM %s WITH (connector = 'kafka', brokers = '%s', topic = '%s-out');\n", name, addr, name)
			sql := writeFile(t, "kdj.sql", script)
			if code, errs := kafkaCLI(t, right, "produce", "--to", "kafka://"+addr+"/"+name+"-"+rname, "--partitions", fmt.Sprint(c.rght)); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			if code, errs := kafkaCLI(t, left, "produce", "--to", "kafka://"+addr+"/"+name+"-"+lname, "--partitions", fmt.Sprint(c.left)); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			code, errs := kafkaCLI(t, "", "run", sql, "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
			if code != 0 || !strings.Contains(errs, "3000 events consumed, 0 malformed, 0 eval errors, 0 late") ||
				!strings.Contains(errs, fmt.Sprintf("%s %s: %d rows read, 0 malformed, 0 late, caught up", rkind, rname, strings.Count(right, "\n"))) {
				t.Fatalf("run: exit %d:\n%s", code, errs)
			}
			last := map[string]sinkRecord{}
			for _, r := range readCommitted(t, addr, name+"-out") {
				if prev := last[r.key]; r.revision != prev.revision+1 || prev.final {
					t.Errorf("key %s: revision %d after %d (final %v)", r.key, r.revision, prev.revision, prev.final)
				}
				last[r.key] = r
			}
			if len(last) != len(want) {
				t.Errorf("%d keys, the file run has %d", len(last), len(want))
			}
			for k, v := range want {
				if r := last[k]; r.value != v || !r.final {
					t.Errorf("key %s: %q (final %v), the file run has %q", k, r.value, r.final, v)
				}
			}
		})
	}
}

// derivedFileFinals is the oracle: a file run of the script (the right
// input from its path), its changelog's finals by key.
func derivedFileFinals(t *testing.T, sqlText, left, right string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	rpath := filepath.Join(dir, "right.jsonl")
	if err := os.WriteFile(rpath, []byte(right), 0o644); err != nil {
		t.Fatal(err)
	}
	fileSQL := writeFile(t, "dj.sql", fmt.Sprintf(sqlText, "", fmt.Sprintf(" WITH (path = '%s')", rpath), "q"))
	in := writeFile(t, "left.jsonl", left)
	out := filepath.Join(dir, "q.tsv")
	env, _, errb := runTestEnv("")
	if code := Main(t.Context(), env, []string{"run", fileSQL, "--input", in, "--output", out, "--quiet"}); code != 0 {
		t.Fatalf("file run: exit %d: %s", code, errb)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		k, v, _ := strings.Cut(line, "\t")
		want[k] = v
	}
	if len(want) < 50 {
		t.Fatalf("file run: %d keys", len(want))
	}
	return want
}
