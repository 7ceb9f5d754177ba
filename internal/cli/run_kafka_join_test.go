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
)

// The temporal join over Kafka from the CLI: the stream and the versioned
// table are topics (CREATE SOURCE and CREATE TABLE with connector =
// 'kafka'), the changelog a CREATE SINK's topic; the finals equal a file
// run's over the same rows (the table from its path), at 1 and 3 source
// partitions.
const kafkaJoinSQL = `CREATE SOURCE usage (customer VARCHAR, tier DOUBLE, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)%s;
CREATE TABLE prices (tier DOUBLE, price DECIMAL(12,6), label VARCHAR, valid_from TIMESTAMP,
  PRIMARY KEY (tier) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from - INTERVAL '3' SECOND)%s;
CREATE VIEW charge AS SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '10' SECOND) AS w, sum(u.qty * p.price) AS charge,
  count(*) AS events, count(p.price) AS priced, max(p.label) AS label
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '10' SECOND);
`

// kafkaJoinRows writes the events (up to 1.5 s out of order, under the
// 2 s delay) and the price versions (in time order), with edge cells: a
// NULL tier, -0.0 and 0.0 (one key), a tier without a version, escapes.
func kafkaJoinRows(n int, seed uint64) (events, versions string) {
	r := rand.New(rand.NewPCG(seed, 5))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format("2006-01-02 15:04:05.000") }
	customers := []string{`"a"`, `""`, `"q\"uote"`, `"\u00e9"`, `"\ud83d\ude00"`, `"tab\t"`}
	tiers := []string{"-0.0", "0.0", "1.5", "2.5", "null", "7"}
	var e, v strings.Builder
	for at := -5 * time.Second; at < time.Duration(n)*50*time.Millisecond+10*time.Second; at += 900 * time.Millisecond {
		fmt.Fprintf(&v, `{"tier":%s,"price":"%d.%06d","label":"L\\%d","valid_from":"%s"}`+"\n", tiers[r.IntN(4)], r.IntN(5), r.IntN(1_000_000), r.IntN(9), ts(at))
	}
	for i := range n {
		at := time.Duration(i)*50*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond
		fmt.Fprintf(&e, `{"customer":%s,"tier":%s,"qty":"%d.%02d","ts":"%s"}`+"\n", customers[r.IntN(len(customers))], tiers[r.IntN(len(tiers))], r.IntN(40), r.IntN(100), ts(at))
	}
	return e.String(), v.String()
}

func TestRunKafkaTemporalJoin(t *testing.T) {
	events, versions := kafkaJoinRows(3000, 1)
	// The oracle: a file run, the table from its path.
	dir := t.TempDir()
	tpath := filepath.Join(dir, "prices.jsonl")
	if err := os.WriteFile(tpath, []byte(versions), 0o644); err != nil {
		t.Fatal(err)
	}
	fileSQL := writeFile(t, "join.sql", fmt.Sprintf(kafkaJoinSQL, "", fmt.Sprintf(" WITH (path = '%s')", tpath)))
	in := writeFile(t, "usage.jsonl", events)
	out := filepath.Join(dir, "charge.tsv")
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
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addr := c.ListenAddrs()[0]
			script := fmt.Sprintf(kafkaJoinSQL, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = 'usage')", addr),
				" WITH (connector = 'kafka', topic = 'prices')") +
				fmt.Sprintf("CREATE SINK out FROM charge WITH (connector = 'kafka', brokers = '%s', topic = 'charges');\n", addr)
			sql := writeFile(t, "kjoin.sql", script)
			if code, errs := kafkaCLI(t, versions, "produce", "--to", "kafka://"+addr+"/prices", "--partitions", "2"); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			if code, errs := kafkaCLI(t, events, "produce", "--to", "kafka://"+addr+"/usage", "--partitions", fmt.Sprint(parts)); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			code, errs := kafkaCLI(t, "", "run", sql, "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
			if code != 0 || !strings.Contains(errs, "3000 events consumed, 0 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, fmt.Sprintf("table prices: %d rows read, 0 malformed, 0 late, caught up", strings.Count(versions, "\n"))) {
				t.Fatalf("run: exit %d:\n%s", code, errs)
			}
			last := map[string]sinkRecord{}
			for _, r := range readCommitted(t, addr, "charges") {
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

// TestRunKafkaJoinRefused: what a Kafka run of a join refuses, and why.
func TestRunKafkaJoinRefused(t *testing.T) {
	const src = `CREATE SOURCE u (c VARCHAR, k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka', topic = 'u', brokers = '127.0.0.1:1');
`
	for _, c := range []struct{ name, sql, want string }{
		{"a table file", `CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf) WITH (path = 't.jsonl');
CREATE VIEW q AS SELECT u.c, count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY u.c;
CREATE SINK s FROM q WITH (connector = 'kafka', topic = 'o', brokers = '127.0.0.1:1');`, "query q joins table t, which over Kafka is read from a topic: CREATE TABLE t (...) WITH (connector = 'kafka', topic = 'TOPIC')"},
		{"no topic", `CREATE TABLE t (k VARCHAR, p BIGINT, vf TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vf AS vf) WITH (connector = 'kafka');
CREATE VIEW q AS SELECT u.c, count(*) AS n FROM u JOIN t FOR SYSTEM_TIME AS OF u.ts ON u.k = t.k GROUP BY u.c;
CREATE SINK s FROM q WITH (connector = 'kafka', topic = 'o', brokers = '127.0.0.1:1');`, "CREATE TABLE t: bad configuration: source has no topic"},
	} {
		sql := writeFile(t, "bad.sql", src+c.sql)
		code, errs := kafkaCLI(t, "", "run", sql, "--until-caught-up")
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s\nwant %q", c.name, code, errs, c.want)
		}
	}
}

// TestRunKafkaViewTemporalJoin: the billing story's shape through `ubik
// run`: a view with the temporal join (charge, per customer and 10 s),
// read by a view in its segment (per customer and 30 s) and a query that
// groups by the window alone (after a view repartition); every topic's
// finals equal a file run's (the table from its path).
func TestRunKafkaViewTemporalJoin(t *testing.T) {
	const readers = `CREATE VIEW per_customer AS SELECT customer, TUMBLE_START(w, INTERVAL '30' SECOND) AS m, sum(charge) AS charge, sum(events) AS events
FROM charge GROUP BY customer, TUMBLE(w, INTERVAL '30' SECOND) EMIT FINAL;
CREATE VIEW total AS SELECT TUMBLE_START(m, INTERVAL '1' MINUTE) AS h, sum(charge) AS charge, sum(events) AS events, count(*) AS customers
FROM per_customer GROUP BY TUMBLE(m, INTERVAL '1' MINUTE);
`
	script := strings.Replace(kafkaJoinSQL, "INTERVAL '10' SECOND);", "INTERVAL '10' SECOND) EMIT FINAL;", 1) + readers
	events, versions := kafkaJoinRows(3000, 2)
	dir := t.TempDir()
	tpath := filepath.Join(dir, "prices.jsonl")
	if err := os.WriteFile(tpath, []byte(versions), 0o644); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, "usage.jsonl", events)
	fileSQL := writeFile(t, "vjoin.sql", fmt.Sprintf(script, "", fmt.Sprintf(" WITH (path = '%s')", tpath)))
	want := fileRunViews(t, []string{fileSQL, "--input", in}, 3, "charge", "per_customer", "total")
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kscript := fmt.Sprintf(script, fmt.Sprintf(" WITH (connector = 'kafka', brokers = '%s', topic = 'usage')", addr),
		" WITH (connector = 'kafka', topic = 'prices')") +
		fmt.Sprintf("CREATE SINK out FROM total WITH (connector = 'kafka', brokers = '%s', topic = 'totals');\n", addr)
	sql := writeFile(t, "kvjoin.sql", kscript)
	if code, errs := kafkaCLI(t, versions, "produce", "--to", "kafka://"+addr+"/prices", "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	if code, errs := kafkaCLI(t, events, "produce", "--to", "kafka://"+addr+"/usage", "--partitions", "3"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	code, errs := kafkaCLI(t, "", "run", sql, "--query", "total", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	if code != 0 || !strings.Contains(errs, "3000 events consumed, 0 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, fmt.Sprintf("table prices: %d rows read, 0 malformed, 0 late, caught up", strings.Count(versions, "\n"))) {
		t.Fatalf("run: exit %d:\n%s", code, errs)
	}
	checkViewSinks(t, addr, map[string]string{"total": "totals", "charge": "totals-charge", "per_customer": "totals-per_customer"}, want)
}
