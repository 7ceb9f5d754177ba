package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A temporal join whose stream has a dedup key: copies of an event (one
// id) under another customer, so that a placement by anything but the id
// (the group key, a hash of the whole record) can place them apart.
const dedupJoinSQL = `CREATE SOURCE usage (id VARCHAR, customer VARCHAR, tier BIGINT, qty BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE) WITH (%sdedup_key = 'id', dedup_within = '1 hour');
CREATE TABLE prices (tier BIGINT, price BIGINT, valid_from TIMESTAMP, PRIMARY KEY (tier) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from)%s;
CREATE VIEW per_customer AS SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS ws, sum(u.qty) AS n
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' MINUTE);
CREATE VIEW per_price AS SELECT p.price, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS ws, sum(u.qty) AS n
FROM usage u LEFT JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.tier = p.tier
GROUP BY p.price, TUMBLE(u.ts, INTERVAL '1' MINUTE);
CREATE VIEW hourly AS SELECT TUMBLE_START(ws, INTERVAL '1' HOUR) AS h, sum(n) AS n FROM per_customer GROUP BY TUMBLE(ws, INTERVAL '1' HOUR);
`

// dedupJoinEvents are 400 events in time order, then a second copy of
// every third one under another customer (within the watermark delay;
// the customer's tier, so often another price), then an event an hour
// later.
func dedupJoinEvents() string {
	var b strings.Builder
	ev := func(i, c int) {
		fmt.Fprintf(&b, `{"id":"e%d","customer":"c%d","tier":%d,"qty":1,"ts":"2026-07-18 10:00:%02d.%d"}`+"\n", i, c, c%3, i/10, i%10)
	}
	for i := 0; i < 400; i++ {
		ev(i, i%7)
	}
	for i := 0; i < 400; i += 3 {
		ev(i, (i+3)%7)
	}
	b.WriteString(`{"id":"end","customer":"z","tier":1,"qty":1,"ts":"2026-07-18 11:00:00"}` + "\n")
	return b.String()
}

// TestRunKafkaDedupTemporalJoin: a temporal join's stream runs through
// the dedup stage (grouped by the stream), or is deduplicated by the
// join's stage in the dedup key's partitions (grouped by the table), so
// copies of an event (one id) under another customer count once over
// Kafka as in a file run (400 events and the one an hour later; 134
// copies dropped): per group where the copies share a partition (keyed
// by id), the total round-robin; after a kill -9 too (the keys restored).
func TestRunKafkaDedupTemporalJoin(t *testing.T) {
	const versions = `{"tier":0,"price":2,"valid_from":"2026-07-18 09:00:00"}
{"tier":1,"price":3,"valid_from":"2026-07-18 09:00:00"}
{"tier":2,"price":5,"valid_from":"2026-07-18 09:00:00"}
`
	ev := dedupJoinEvents()
	fileSQL := writeFile(t, "dj.sql", fmt.Sprintf(dedupJoinSQL, "", fmt.Sprintf(" WITH (path = '%s')", writeFile(t, "prices.jsonl", versions))))
	input, wants := writeFile(t, "ev.jsonl", ev), map[string]map[string]string{}
	for _, q := range []string{"per_customer", "per_price", "hourly"} {
		wants[q] = fileRunViews(t, []string{fileSQL, "--input", input, "--query", q}, 0, q)[q]
		if n := sumN(t, wants[q]); n != 401 {
			t.Fatalf("file run of %s: %d events counted, want 401", q, n)
		}
	}
	for _, c := range []struct {
		name, query string // per_price: grouped by the table, the join's stage deduplicates; hourly: the join a view of the chain
		produce     []string
		ordered     bool // the copies of a key share a partition
		restarts    bool // kill -9 the run in the middle
	}{
		{"four partitions by id", "per_customer", []string{"--partitions", "4", "--key-field", "id"}, true, false},
		{"four partitions round-robin", "per_customer", []string{"--partitions", "4"}, false, false},
		{"grouped by the table", "per_price", []string{"--partitions", "4", "--key-field", "id"}, true, false},
		{"a chain over the join", "hourly", []string{"--partitions", "4"}, true, false},
		{"kill -9", "per_customer", []string{"--partitions", "4", "--key-field", "id"}, true, true},
		{"kill -9 grouped by the table", "per_price", []string{"--partitions", "4", "--key-field", "id"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sameAsFileRun(t, runKafkaDedupJoin(t, dedupJoinSQL, versions, c.query, c.produce, c.restarts), wants[c.query], c.ordered)
		})
	}
}

// TestRunKafkaDedupInnerTemporalJoin: the first copy of an event is the
// one that reaches the query even when an inner temporal join then drops
// it (tier 2 has no version): its later copies under another customer,
// whose tier has one, are duplicates in a file run as over Kafka, where
// the dedup stage runs before the join stage. The file run counts the
// events whose first copy joins, and Kafka the same rows.
func TestRunKafkaDedupInnerTemporalJoin(t *testing.T) {
	const versions = `{"tier":0,"price":2,"valid_from":"2026-07-18 09:00:00"}
{"tier":1,"price":3,"valid_from":"2026-07-18 09:00:00"}
`
	sqlFormat := strings.ReplaceAll(dedupJoinSQL, "LEFT JOIN", "JOIN")
	want := 1 // the event an hour later (tier 1)
	for i := 0; i < 400; i++ {
		if i%7%3 != 2 {
			want++
		}
	}
	fileSQL := writeFile(t, "dj.sql", fmt.Sprintf(sqlFormat, "", fmt.Sprintf(" WITH (path = '%s')", writeFile(t, "prices.jsonl", versions))))
	input := writeFile(t, "ev.jsonl", dedupJoinEvents())
	for _, q := range []string{"per_customer", "per_price"} {
		t.Run(q, func(t *testing.T) {
			rows := fileRunViews(t, []string{fileSQL, "--input", input, "--query", q}, 0, q)[q]
			if n := sumN(t, rows); n != want {
				t.Errorf("file run of %s: %d events counted, want %d (those whose first copy joins)", q, n, want)
			}
			sameAsFileRun(t, runKafkaDedupJoin(t, sqlFormat, versions, q, []string{"--partitions", "4", "--key-field", "id"}, false), rows, true)
		})
	}
}

// runKafkaDedupJoin produces the table's versions, then runs the join
// over the events on a broker of its own (runDedupKafka) and returns the
// sink's latest value per key.
func runKafkaDedupJoin(t *testing.T, sqlFormat, versions, query string, produce []string, restarts bool) map[string]string {
	k, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	addr := k.ListenAddrs()[0]
	sql := writeFile(t, "k.sql", fmt.Sprintf(sqlFormat, fmt.Sprintf("connector = 'kafka', brokers = '%s', topic = 'usage', ", addr), " WITH (connector = 'kafka', topic = 'prices')"))
	if code, errs := kafkaCLI(t, versions, "produce", "--to", "kafka://"+addr+"/prices", "--partitions", "1"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	run := []string{"run", sql, "--query", query, "--sink", "kafka://" + addr + "/out", "--instance-id", "a", "--log-level", "warn"}
	// The dedup keys: per_customer's dedup stage's, per_price's join stage's.
	state := query + "-dedup-state"
	if query == "per_price" {
		state = query + "-state"
	}
	return runDedupKafka(t, addr, "kafka://"+addr+"/usage", state, strings.SplitAfter(dedupJoinEvents(), "\n"), produce, run, restarts)
}

// TestRunKafkaDedupTemporalJoinOldState: an earlier version's join stage
// deduplicated its stream and kept the keys in its state topic; a state
// topic without the dedup stage's is refused, naming the reset.
func TestRunKafkaDedupTemporalJoinOldState(t *testing.T) {
	k, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	addr := k.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 4, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "per_customer-state"); err != nil {
		t.Fatal(err)
	}
	sql := writeFile(t, "k.sql", fmt.Sprintf(dedupJoinSQL, fmt.Sprintf("connector = 'kafka', brokers = '%s', topic = 'usage', ", addr), " WITH (connector = 'kafka', topic = 'prices')"))
	for topic, data := range map[string]string{"prices": `{"tier":1,"price":3,"valid_from":"2026-07-18 09:00:00"}` + "\n", "usage": dedupJoinEvents()} {
		if code, errs := kafkaCLI(t, data, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", "4"); code != 0 {
			t.Fatalf("produce: exit %d: %s", code, errs)
		}
	}
	code, errs := kafkaCLI(t, "", "run", sql, "--query", "per_customer", "--sink", "kafka://"+addr+"/out", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	if code == 0 || !strings.Contains(errs, "per_customer-dedup-state") || !strings.Contains(errs, "--reset-state") {
		t.Fatalf("run over a join state without its dedup stage's: exit %d, want a refusal naming the dedup stage and --reset-state:\n%s", code, errs)
	}
}
