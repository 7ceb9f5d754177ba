package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRunKafkaDedupViewJoin: a join of two views, the second over a
// source with a dedup key whose copies fall under another seller: the
// join stage reads that source as its second input through the source's
// dedup stage (j-tbl-dedup), so each key counts once over Kafka as in a
// file run (per key where the copies share a partition; spread
// round-robin, the same total).
func TestRunKafkaDedupViewJoin(t *testing.T) {
	const src = `CREATE SOURCE ps (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '30' SECOND) WITH (%s);
CREATE SOURCE au (eid VARCHAR, seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '30' SECOND) WITH (%sdedup_key = 'eid', dedup_within = '1 hour');
CREATE VIEW np AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v
  FROM ps GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM au GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT p.id, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS ws, sum(p.v) AS v, sum(a.n) AS n
  FROM np p JOIN ns a ON p.id = a.seller AND p.ws = a.ws
  GROUP BY p.id, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;
`
	var ps, au strings.Builder
	ts := func(ms int) string {
		return time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02 15:04:05.000")
	}
	for w := 0; w < 2; w++ {
		for id := 0; id < 20; id++ {
			fmt.Fprintf(&ps, `{"id":%d,"ts":"%s"}`+"\n", id, ts(w*10000+id))
		}
	}
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&au, `{"eid":"e%d","seller":%d,"ts":"%s"}`+"\n", i, i%20, ts(i*30))
	}
	for i := 0; i < 600; i += 3 {
		fmt.Fprintf(&au, `{"eid":"e%d","seller":%d,"ts":"%s"}`+"\n", i, (i+3)%20, ts(i*30))
	}
	end := ts(3600000)
	fmt.Fprintf(&ps, `{"id":0,"ts":"%s"}`+"\n", end)
	fmt.Fprintf(&au, `{"eid":"end","seller":0,"ts":"%s"}`+"\n", end)
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String())+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String())+"', "))
	want := fileRunViews(t, []string{fileSQL}, 20, "j")["j"]
	if n := sumN(t, want); n != 601 {
		t.Fatalf("file run: %d events joined, want 601 (600 and the one an hour later)", n)
	}
	for _, c := range []struct {
		name    string
		produce []string
		ordered bool
	}{
		{"four partitions by eid", []string{"--partitions", "4", "--key-field", "eid"}, true},
		{"four partitions round-robin", []string{"--partitions", "4"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			addr := k.ListenAddrs()[0]
			sql := writeFile(t, "kj.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au', "))
			if code, errs := kafkaCLI(t, ps.String(), "produce", "--to", "kafka://"+addr+"/ps", "--partitions", "2"); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			if code, errs := kafkaCLI(t, au.String(), append([]string{"produce", "--to", "kafka://" + addr + "/au"}, c.produce...)...); code != 0 {
				t.Fatalf("produce: exit %d: %s", code, errs)
			}
			code, errs := kafkaCLI(t, "", "run", sql, "--query", "j", "--sink", "kafka://"+addr+"/jout", "--instance-id", "a", "--until-caught-up", "--log-level", "warn")
			if code != 0 {
				t.Fatalf("run: exit %d:\n%s", code, errs)
			}
			got := map[string]string{}
			for _, r := range readCommitted(t, addr, "jout") {
				got[r.key] = r.value
			}
			if len(got) != len(want) {
				t.Errorf("%d groups over Kafka, %d in a file run:\n%s", len(got), len(want), errs)
			}
			if g, w := sumN(t, got), sumN(t, want); g != w {
				t.Errorf("over Kafka %d events joined, in a file run %d:\n%s", g, w, errs)
			}
			for k, v := range want {
				if c.ordered && got[k] != v {
					t.Errorf("group %s: over Kafka %s, in a file run %s", k, got[k], v)
				}
			}
			all := topics(t, addr)
			if !slices.Contains(all, "j-tbl-dedup-state") || slices.ContainsFunc(all, func(s string) bool {
				return strings.HasPrefix(s, "j-left") || strings.HasPrefix(s, "j-right")
			}) {
				t.Errorf("internal topics %q: want the second source's dedup stage (j-tbl-dedup-state) and no side", all)
			}
		})
	}
}
