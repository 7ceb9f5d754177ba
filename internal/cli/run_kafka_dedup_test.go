package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const dedupSQL = `CREATE SOURCE usage (id VARCHAR, customer VARCHAR, qty BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (dedup_key = 'id', dedup_within = '1 hour');
CREATE VIEW per_customer AS SELECT customer, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, sum(qty) AS n FROM usage GROUP BY customer, TUMBLE(ts, INTERVAL '1' MINUTE);`

// dedupEvents are 400 events, then a second copy of every third one
// under another customer (another group), then an event an hour later.
func dedupEvents() []string {
	var ev []string
	for i := 0; i < 400; i++ {
		ev = append(ev, fmt.Sprintf(`{"id":"e%d","customer":"c%d","qty":1,"ts":"2026-07-18 10:00:%02d"}`+"\n", i, i%7, i%50))
	}
	for i := 0; i < 400; i += 3 {
		ev = append(ev, fmt.Sprintf(`{"id":"e%d","customer":"c%d","qty":1,"ts":"2026-07-18 10:00:%02d"}`+"\n", i, (i+3)%7, i%50))
	}
	return append(ev, `{"id":"end","customer":"z","qty":1,"ts":"2026-07-18 11:00:00"}`+"\n")
}

// TestRunKafkaDedupAcrossGroups: copies of an event (one dedup key) whose
// other columns differ, so that they fall in two groups, count once over
// Kafka as in a file run: the first copy in input order is the event.
// Over one partition the input order is the topic's; over four, it is
// each partition's, so the copies of a key share one (keyed by the id,
// as a producer's retries are); spread round-robin, which copy comes
// first is not defined, but each event still counts once.
func TestRunKafkaDedupAcrossGroups(t *testing.T) {
	ev := strings.Join(dedupEvents(), "")
	fileSQL := writeFile(t, "d.sql", dedupSQL)
	want := fileRunViews(t, []string{fileSQL, "--input", writeFile(t, "ev.jsonl", ev)}, 0, "per_customer")["per_customer"]
	for _, c := range []struct {
		name     string
		produce  []string
		ordered  bool // the copies of a key share a partition
		restarts bool // kill -9 the run in the middle
		run      []string
	}{
		{"one partition", []string{"--partitions", "1"}, true, false, nil},
		{"four partitions by id", []string{"--partitions", "4", "--key-field", "id"}, true, false, nil},
		{"four partitions round-robin", []string{"--partitions", "4"}, false, false, nil},
		// Keyed by group, the input is not keyed by the dedup key: the
		// repartition stage still places the events for the dedup.
		{"partitioned by key", []string{"--partitions", "4", "--key-field", "customer"}, false, false, []string{"--partitioned-by-key"}},
		{"kill -9", []string{"--partitions", "4", "--key-field", "id"}, true, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sameAsFileRun(t, runKafkaDedup(t, fileSQL, c.produce, c.restarts, c.run...), want, c.ordered)
		})
	}
}

// runKafkaDedup runs the query over the events on a broker of its own
// (runDedupKafka) and returns the sink's latest value per key.
func runKafkaDedup(t *testing.T, sql string, produce []string, restarts bool, flags ...string) map[string]string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	to := "kafka://" + addr + "/usage"
	run := append([]string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/out", "--instance-id", "a", "--log-level", "warn"}, flags...)
	return runDedupKafka(t, addr, to, "per_customer-dedup-state", dedupEvents(), produce, run, restarts)
}

// committedDedup reports whether the stage that deduplicates has
// committed some of the keys produced before the kill to its state topic
// (so that it dies with work done and, likely, work in flight).
func committedDedup(t *testing.T, addr, topic string) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(t.Context(), topic)
	if err != nil {
		return false
	}
	var n int64
	lso.Each(func(o kadm.ListedOffset) { n += max(o.Offset, 0) })
	return n > 150
}

// sumN adds up the n column of a query's final rows.
func sumN(t *testing.T, rows map[string]string) int {
	n := 0
	for _, v := range rows {
		var x int
		i := strings.Index(v, `"n": `)
		if i < 0 {
			t.Fatalf("no n in %s", v)
		}
		fmt.Sscanf(v[i+5:], "%d", &x)
		n += x
	}
	return n
}

// TestRunKafkaDedupSourceOptions: a CREATE SOURCE read from Kafka takes
// the engine's source options beside the connector's (dedup_key and
// dedup_within are the planner's, not the topic's), and deduplicates.
func TestRunKafkaDedupSourceOptions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	ev := strings.Join(dedupEvents(), "")
	want := fileRunViews(t, []string{writeFile(t, "d.sql", dedupSQL), "--input", writeFile(t, "ev.jsonl", ev)}, 0, "per_customer")["per_customer"]
	if code, errs := kafkaCLI(t, ev, "produce", "--to", "kafka://"+addr+"/usage", "--partitions", "1"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	sql := strings.Replace(dedupSQL, "WITH (dedup_key", fmt.Sprintf("WITH (connector = 'kafka', brokers = '%s', topic = 'usage', dedup_key", addr), 1)
	code, errs := kafkaCLI(t, "", "run", writeFile(t, "k.sql", sql), "--sink", "kafka://"+addr+"/out", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	if code != 0 || !strings.Contains(errs, "134 duplicates, 0 dedup late") {
		t.Fatalf("run: exit %d, want 0 and 134 duplicates:\n%s", code, errs)
	}
	got := map[string]string{}
	for _, r := range readCommitted(t, addr, "out") {
		got[r.key] = r.value
	}
	sameAsFileRun(t, got, want, true)
}

// TestRunKafkaDedupBadEventWhere: an event whose GROUP BY fails, found
// by the dedup stage (after the dedup, as in a file run), is reported
// where it was read: the source topic, partition and offset.
func TestRunKafkaDedupBadEventWhere(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	ev := `{"id":"a","customer":"1","qty":1,"ts":"2026-07-18 10:00:00"}
{"id":"b","customer":"x","qty":1,"ts":"2026-07-18 10:00:01"}
{"id":"b","customer":"2","qty":1,"ts":"2026-07-18 10:00:01"}
`
	if code, errs := kafkaCLI(t, ev, "produce", "--to", "kafka://"+addr+"/usage", "--partitions", "1"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	sql := writeFile(t, "e.sql", `CREATE SOURCE usage (id VARCHAR, customer VARCHAR, qty BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (dedup_key = 'id', dedup_within = '1 hour');
CREATE VIEW per_customer AS SELECT CAST(customer AS BIGINT) AS c, sum(qty) AS n FROM usage GROUP BY CAST(customer AS BIGINT);`)
	code, errs := kafkaCLI(t, "", "run", sql, "--source", "kafka://"+addr+"/usage", "--sink", "kafka://"+addr+"/out", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
	// The copy of b is a copy of the event that failed: dropped, as in a file run.
	if code != 0 || !strings.Contains(errs, "1 eval errors") || !strings.Contains(errs, "1 duplicates") ||
		!strings.Contains(errs, "topic=usage partition=0 offset=1") {
		t.Fatalf("run: exit %d, want 1 eval error reported at usage partition 0 offset 1 and 1 duplicate:\n%s", code, errs)
	}
}
