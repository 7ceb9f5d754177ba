package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The shapes of a join of two views whose sides both read source ps
// without sharing a view: ps is read by the first stage of each (pa, np;
// np, pa: the right an interval join whose left stream is ps). A graph in
// process refuses a query that reads an interval join's right stream, and
// two such joins.
var sharedSourceShapes = map[string]string{
	"pa-np": `
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM ps p JOIN au a ON a.seller = p.id AND a.ts BETWEEN p.ts AND p.ts + INTERVAL '5' SECOND
  GROUP BY p.id, TUMBLE(a.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW np AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v
  FROM ps GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jp AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '10' SECOND) AS ws, sum(x.n) AS n, sum(y.v) AS v
  FROM pa x JOIN np y ON x.id = y.id AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '10' SECOND) EMIT FINAL;
`,
	"np-pa": `
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM ps p JOIN au a ON a.seller = p.id AND a.ts BETWEEN p.ts AND p.ts + INTERVAL '5' SECOND
  GROUP BY p.id, TUMBLE(a.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW np AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v
  FROM ps GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jp AS SELECT y.id, TUMBLE_START(y.ws, INTERVAL '10' SECOND) AS ws, sum(x.n) AS n, sum(y.v) AS v
  FROM np y JOIN pa x ON y.id = x.id AND y.ws = x.ws GROUP BY y.id, TUMBLE(y.ws, INTERVAL '10' SECOND) EMIT FINAL;
`,
}

// TestRunKafkaViewJoinSharedSource runs each shape of sharedSourceShapes,
// then a late and a malformed event of each source: each source's
// events, malformed and late events add up to the file run's over the
// same events, and each malformed event is reported once (a warning over
// Kafka, a dead letter over files).
func TestRunKafkaViewJoinSharedSource(t *testing.T) {
	for name, queries := range sharedSourceShapes {
		t.Run(name, func(t *testing.T) { runSharedSource(t, queries) })
	}
}

func runSharedSource(t *testing.T, queries string) {
	r := rand.New(rand.NewPCG(3, 7))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	var ps, au strings.Builder
	for i := 0; i < 3000; i++ {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		if i%3 == 0 {
			fmt.Fprintf(&ps, `{"id":%d,"ts":"%s"}`+"\n", r.IntN(40), ts)
		}
		fmt.Fprintf(&au, `{"seller":%d,"ts":"%s"}`+"\n", r.IntN(50), ts)
	}
	const psTail = `{"id":1,"ts":"2026-07-18 09:00:00"}` + "\n" + `{"id":` + "\n"
	const auTail = `{"seller":1,"ts":"2026-07-18 09:00:00"}` + "\n" + `{"seller":` + "\n"
	src := `CREATE SOURCE ps (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);`
	// The file run, over every event, each source's tail last: the late
	// ps event is late in both views that read ps (pa and np).
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String()+psTail)+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String()+auTail)+"'")+queries)
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	code, errs := kafkaCLI(t, "", "run", fileSQL, "--query", "jp", "--dead-letter", dead, "--output-dir", t.TempDir())
	if want := "4004 events read (ps 1002, au 3002), 2 malformed (ps 1, au 1), 0 eval errors, 3 late (ps 2, au 1)"; code != 0 || !strings.Contains(errs, want) {
		t.Fatalf("file run: exit %d, want %q:\n%s", code, want, errs)
	}
	if b, err := os.ReadFile(dead); err != nil || strings.Count(string(b), `ps.jsonl", `) != 1 || strings.Count(string(b), `au.jsonl", `) != 1 || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("file run: dead letters %s, %v: want one of ps, one of au", b, err)
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kafkaSQL := writeFile(t, "kj.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au'")+queries)
	for topic, parts := range map[string]string{"ps": "2", "au": "3"} {
		in := map[string]string{"ps": ps.String(), "au": au.String()}[topic]
		if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", parts); code != 0 {
			t.Fatalf("produce %s: exit %d: %s", topic, code, errs)
		}
	}
	run := []string{"run", kafkaSQL, "--query", "jp", "--sink", "kafka://" + addr + "/jout", "--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
	if code, errs := kafkaCLI(t, "", run...); code != 0 || !strings.Contains(errs, "4000 events consumed, 0 malformed, 0 eval errors, 0 late") {
		t.Fatalf("run: exit %d, want 4000 events consumed (ps 1000, au 3000), nothing late:\n%s", code, errs)
	}
	for topic, tail := range map[string]string{"ps": psTail, "au": auTail} {
		if code, errs := kafkaCLI(t, tail, "produce", "--to", "kafka://"+addr+"/"+topic); code != 0 {
			t.Fatalf("produce %s: exit %d: %s", topic, code, errs)
		}
	}
	code, errs = kafkaCLI(t, "", run...)
	if code != 0 || !strings.Contains(errs, "4 events consumed, 2 malformed, 0 eval errors, 3 late") {
		t.Fatalf("resumed run: exit %d, want the file run's tail: 4 events consumed, 2 malformed, 3 late:\n%s", code, errs)
	}
	var bad []string
	for _, line := range strings.Split(errs, "\n") {
		if strings.Contains(line, "event not applied") {
			bad = append(bad, line[strings.Index(line, "topic="):strings.Index(line, " partition=")])
		}
	}
	if slices.Sort(bad); !slices.Equal(bad, []string{"topic=au", "topic=ps"}) {
		t.Errorf("resumed run: events not applied %q, want one of each topic:\n%s", bad, errs)
	}
}
