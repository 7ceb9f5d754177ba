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

// The interval join of two streams over Kafka from the CLI, against the
// broker of scripts/services.sh: both streams are topics (CREATE SOURCE
// with connector = 'kafka'), the changelog a CREATE SINK's topic; the
// finals equal a file run's over the same rows (the second stream from
// its path), at 1 and 3 partitions of each, grouped by the join key's
// column and by another (the joined rows repartitioned).
const kafkaIJoinSQL = `CREATE SOURCE imp (ad DOUBLE, site VARCHAR, cost DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)%s;
CREATE SOURCE clk (ad DOUBLE, val DECIMAL(10,2), cts TIMESTAMP,
  WATERMARK FOR cts AS cts - INTERVAL '3' SECOND)%s;
CREATE VIEW %s AS SELECT %[4]s AS g, TUMBLE_START(i.ts, INTERVAL '10' SECOND) AS w, count(*) AS n,
  sum(i.cost + c.val) AS total, min(i.site) AS site
FROM imp i JOIN clk c ON c.ad = i.ad AND c.cts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '4' SECOND
GROUP BY %[4]s, TUMBLE(i.ts, INTERVAL '10' SECOND);
`

// kafkaIJoinRows writes impressions (up to 1.5 s out of order, under the
// 2 s delay) and clicks (up to 2.5 s, under 3 s), with edge cells: a
// NULL ad, -0.0 and 0.0 (one key), escapes and non-ASCII sites.
func kafkaIJoinRows(n int, seed uint64) (imps, clks string) {
	r := rand.New(rand.NewPCG(seed, 9))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format("2006-01-02 15:04:05.000") }
	sites := []string{`"a"`, `""`, `"q\"uote"`, `"\u00e9"`, `"\ud83d\ude00"`}
	ads := []string{"-0.0", "0.0", "1.5", "2.5", "null", "7"}
	var a, b strings.Builder
	for i := range n {
		at := time.Duration(i)*50*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond
		fmt.Fprintf(&a, `{"ad":%s,"site":%s,"cost":"%d.%02d","ts":"%s"}`+"\n", ads[r.IntN(len(ads))], sites[r.IntN(len(sites))], r.IntN(40), r.IntN(100), ts(at))
	}
	for i := range n * 2 / 3 {
		at := time.Duration(i)*75*time.Millisecond - time.Duration(r.IntN(2500))*time.Millisecond
		fmt.Fprintf(&b, `{"ad":%s,"val":"%d.%02d","cts":"%s"}`+"\n", ads[r.IntN(len(ads))], r.IntN(9), r.IntN(100), ts(at))
	}
	return a.String(), b.String()
}

func TestRunKafkaIntervalJoin(t *testing.T) {
	imps, clks := kafkaIJoinRows(3000, 1)
	addr := testenv.RequireKafka(t)[0]
	for _, c := range []struct {
		parts int
		by    string
	}{{1, "c.ad"}, {3, "c.ad"}, {2, "i.site"}} {
		t.Run(fmt.Sprint(c.parts, c.by), func(t *testing.T) {
			// The oracle: a file run, the second stream from its path.
			dir := t.TempDir()
			cpath := filepath.Join(dir, "clk.jsonl")
			if err := os.WriteFile(cpath, []byte(clks), 0o644); err != nil {
				t.Fatal(err)
			}
			fileSQL := writeFile(t, "ij.sql", fmt.Sprintf(kafkaIJoinSQL, "", fmt.Sprintf(" WITH (path = '%s')", cpath), "spend", c.by))
			in := writeFile(t, "imp.jsonl", imps)
			out := filepath.Join(dir, "spend.tsv")
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
			name := fmt.Sprintf("ijcli%d_%d_%d", c.parts, os.Getpid(), time.Now().UnixNano()%1_000_000_000)
			script := fmt.Sprintf(kafkaIJoinSQL, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = '%s-imp')", addr, name),
				fmt.Sprintf(" WITH (connector = 'kafka', topic = '%s-clk')", name), name, c.by) +
				fmt.Sprintf("CREATE SINK out FROM %s WITH (connector = 'kafka', brokers = '%s', topic = '%s-out');\n", name, addr, name)
			sql := writeFile(t, "kij.sql", script)
			if code, errs := kafkaCLI(t, clks, "produce", "--to", "kafka://"+addr+"/"+name+"-clk", "--partitions", fmt.Sprint(4-c.parts)); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			if code, errs := kafkaCLI(t, imps, "produce", "--to", "kafka://"+addr+"/"+name+"-imp", "--partitions", fmt.Sprint(c.parts)); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			code, errs := kafkaCLI(t, "", "run", sql, "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
			if code != 0 || !strings.Contains(errs, "3000 events consumed, 0 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, fmt.Sprintf("source clk: %d rows read, 0 malformed, 0 late, caught up", strings.Count(clks, "\n"))) {
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

// TestRunKafkaIntervalJoinRefused: what a Kafka run of an interval join
// refuses, and why.
func TestRunKafkaIntervalJoinRefused(t *testing.T) {
	const src = `CREATE SOURCE u (c VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka', topic = 'u', brokers = '127.0.0.1:1');
`
	const sink = "\nCREATE SINK s FROM q WITH (connector = 'kafka', topic = 'o', brokers = '127.0.0.1:1');"
	const join = ` FROM u JOIN v ON u.k = v.k AND v.ts BETWEEN u.ts AND u.ts + INTERVAL '1' SECOND`
	for _, c := range []struct{ name, sql, want string }{
		{"a file", `CREATE SOURCE v (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (path = 'v.jsonl');
CREATE VIEW q AS SELECT u.k, count(*) AS n` + join + ` GROUP BY u.k;` + sink, "query q joins source v, which over Kafka is read from a topic: CREATE SOURCE v (...) WITH (connector = 'kafka', topic = 'TOPIC')"},
		{"partitioned by key", `CREATE SOURCE v (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka', topic = 'v', partitioned_by_key = 'true');
CREATE VIEW q AS SELECT u.k, count(*) AS n` + join + ` GROUP BY u.k;` + sink, "CREATE SOURCE v: partitioned_by_key: an interval join's inputs are both split by the join key"},
		{"no topic", `CREATE SOURCE v (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka');
CREATE VIEW q AS SELECT u.k, count(*) AS n` + join + ` GROUP BY u.k;` + sink, "CREATE SOURCE v: bad configuration: source has no topic"},
	} {
		sql := writeFile(t, "bad.sql", src+c.sql)
		code, errs := kafkaCLI(t, "", "run", sql, "--until-caught-up")
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s\nwant %q", c.name, code, errs, c.want)
		}
	}
}

// TestRunKafkaViewIntervalJoin: the interval join of two streams as a
// view (grouped by the impression's site, so its joined rows are
// repartitioned by it) read by a view per site and minute and a total
// per minute over every site (after a view repartition), run through
// `ubik produce` and `ubik run`: every topic's finals equal a file run's
// (the second stream from its path).
func TestRunKafkaViewIntervalJoin(t *testing.T) {
	const readers = `CREATE VIEW per_site AS SELECT g, TUMBLE_START(w, INTERVAL '1' MINUTE) AS m, sum(n) AS n, sum(total) AS total
FROM spend GROUP BY g, TUMBLE(w, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW total AS SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(n) AS n, sum(total) AS total, count(*) AS sites
FROM per_site GROUP BY TUMBLE(m, INTERVAL '1' MINUTE);
`
	script := strings.Replace(kafkaIJoinSQL, "INTERVAL '10' SECOND);", "INTERVAL '10' SECOND) EMIT FINAL;", 1) + readers
	imps, clks := kafkaIJoinRows(3000, 3)
	dir := t.TempDir()
	cpath := filepath.Join(dir, "clk.jsonl")
	if err := os.WriteFile(cpath, []byte(clks), 0o644); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, "imp.jsonl", imps)
	fileSQL := writeFile(t, "vij.sql", fmt.Sprintf(script, "", fmt.Sprintf(" WITH (path = '%s')", cpath), "spend", "i.site"))
	want := fileRunViews(t, []string{fileSQL, "--input", in}, 3, "spend", "per_site", "total")
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kscript := fmt.Sprintf(script, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = 'imp')", addr),
		" WITH (connector = 'kafka', topic = 'clk')", "spend", "i.site") +
		fmt.Sprintf("CREATE SINK out FROM total WITH (connector = 'kafka', brokers = '%s', topic = 'totals');\n", addr)
	sql := writeFile(t, "kvij.sql", kscript)
	if code, errs := kafkaCLI(t, clks, "produce", "--to", "kafka://"+addr+"/clk", "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	if code, errs := kafkaCLI(t, imps, "produce", "--to", "kafka://"+addr+"/imp", "--partitions", "3"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	code, errs := kafkaCLI(t, "", "run", sql, "--query", "total", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	if code != 0 || !strings.Contains(errs, "3000 events consumed, 0 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, fmt.Sprintf("source clk: %d rows read, 0 malformed, 0 late, caught up", strings.Count(clks, "\n"))) {
		t.Fatalf("run: exit %d:\n%s", code, errs)
	}
	checkViewSinks(t, addr, map[string]string{"total": "totals", "spend": "totals-spend", "per_site": "totals-per_site"}, want)
}

// TestRunKafkaJoinBufferFlag: --join-buffer bounds a Kafka run's join per
// partition of the join: one row over it stops the run (exit 1) with an
// error that says how to raise it, and the same run with room finishes.
func TestRunKafkaJoinBufferFlag(t *testing.T) {
	imps, clks := kafkaIJoinRows(3000, 1)
	addr := testenv.RequireKafka(t)[0]
	name := fmt.Sprintf("ijbuf_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
	script := fmt.Sprintf(kafkaIJoinSQL, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = '%s-imp')", addr, name),
		fmt.Sprintf(" WITH (connector = 'kafka', topic = '%s-clk')", name), name, "c.ad") +
		fmt.Sprintf("CREATE SINK out FROM %s WITH (connector = 'kafka', brokers = '%s', topic = '%s-out');\n", name, addr, name)
	sql := writeFile(t, "kij.sql", script)
	for topic, rows := range map[string]string{name + "-clk": clks, name + "-imp": imps} {
		if code, errs := kafkaCLI(t, rows, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", "2"); code != 0 {
			t.Fatalf("produce: exit %d: %s", code, errs)
		}
	}
	code, errs := kafkaCLI(t, "", "run", sql, "--instance-id", "a", "--until-caught-up", "--log-level", "warn", "--join-buffer", "5")
	if code != 1 || !strings.Contains(errs, "ubik run --join-buffer") {
		t.Fatalf("--join-buffer 5: exit %d, want 1 and the bound's error:\n%s", code, errs)
	}
	code, errs = kafkaCLI(t, "", "run", sql, "--instance-id", "a", "--until-caught-up", "--log-level", "warn", "--join-buffer", "100000", "--reset-state")
	if code != 0 || !strings.Contains(errs, "3000 events consumed") {
		t.Fatalf("--join-buffer 100000: exit %d:\n%s", code, errs)
	}
}
