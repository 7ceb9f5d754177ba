package cli

import (
	"encoding/json"
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

// The q8 shape over Kafka through the CLI: two sources, each a view per
// key and 10-second window, joined on the key and the window's start.
const kafkaViewJoinQueries = `
CREATE VIEW np AS SELECT id, name, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v
  FROM ps GROUP BY id, name, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW ns AS SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS a
  FROM au GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW j AS SELECT p.id, p.name, TUMBLE_START(p.ws, INTERVAL '10' SECOND) AS ws, sum(p.v) AS v, sum(a.a) AS a
  FROM np p JOIN ns a ON p.id = a.seller AND p.ws = a.ws
  GROUP BY p.id, p.name, TUMBLE(p.ws, INTERVAL '10' SECOND) EMIT FINAL;
`

// TestRunKafkaViewJoin runs the join of two views from two topics
// (3 and 2 partitions, the second source's CREATE SOURCE naming its
// topic) until caught up: each view's topic and the query's equal the
// file run of the same events, one final per key; then an event an hour
// behind is late at its view (--late-output names it).
func TestRunKafkaViewJoin(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	names := []string{`"ann"`, `"bo \"b\""`, `null`, `"\u00e9"`}
	var ps, au strings.Builder
	for i := 0; i < 3000; i++ {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		if i%3 == 0 {
			fmt.Fprintf(&ps, `{"id":%d,"name":%s,"ts":"%s"}`+"\n", r.IntN(40), names[r.IntN(len(names))], ts)
		}
		seller := fmt.Sprint(r.IntN(50))
		if r.IntN(20) == 0 {
			seller = "null"
		}
		fmt.Fprintf(&au, `{"seller":%s,"ts":"%s"}`+"\n", seller, ts)
	}
	src := `CREATE SOURCE ps (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);`
	// The file run.
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String())+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String())+"'")+kafkaViewJoinQueries)
	want := fileRunViews(t, []string{fileSQL}, 10, "np", "ns", "j")

	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kafkaSQL := writeFile(t, "kj.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au'")+kafkaViewJoinQueries)
	for topic, parts := range map[string]string{"ps": "3", "au": "2"} {
		in := map[string]string{"ps": ps.String(), "au": au.String()}[topic]
		if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", parts); code != 0 {
			t.Fatalf("produce %s: exit %d: %s", topic, code, errs)
		}
	}
	run := []string{"run", kafkaSQL, "--query", "j", "--sink", "kafka://" + addr + "/jout", "--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
	code, errs := kafkaCLI(t, "", run...)
	if n := 3000 + 1000; code != 0 || !strings.Contains(errs, fmt.Sprintf("%d events consumed, 0 malformed, 0 eval errors, 0 late", n)) || !strings.Contains(errs, "caught up") {
		t.Fatalf("run: exit %d, want %d events consumed, nothing late, caught up:\n%s", code, n, errs)
	}
	topics := map[string]string{"j": "jout", "np": "jout-np", "ns": "jout-ns"}
	checkViewSinks(t, addr, topics, want)

	if code, errs := kafkaCLI(t, `{"seller":1,"ts":"2026-07-18 09:00:00"}`+"\n", "produce", "--to", "kafka://"+addr+"/au"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	late := filepath.Join(t.TempDir(), "late.jsonl")
	code, errs = kafkaCLI(t, "", append(run, "--late-output", late)...)
	if code != 0 || !strings.Contains(errs, "1 events consumed, 0 malformed, 0 eval errors, 1 late") {
		t.Fatalf("resumed run: exit %d, want 1 event consumed, 1 late:\n%s", code, errs)
	}
	if b, err := os.ReadFile(late); err != nil || strings.Count(string(b), "\n") != 1 || !strings.HasPrefix(string(b), `{"query": "ns"`) {
		t.Errorf("late output: %q, %v", b, err)
	}
	checkViewSinks(t, addr, topics, want)

	// The second source must be a topic.
	noTopic := writeFile(t, "nt.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "format = 'jsonl', path = 'au.jsonl'")+kafkaViewJoinQueries)
	run[1] = noTopic
	if code, errs := kafkaCLI(t, "", run...); code == 0 || !strings.Contains(errs, "over Kafka the second is read from a topic too: CREATE SOURCE au (...) WITH (connector = 'kafka', topic = 'TOPIC')") {
		t.Errorf("a second source without a topic: exit %d: %s", code, errs)
	}
}

// TestRunKafkaViewJoinOver runs a query over the join of two views (per
// person and minute) from two topics with no --query (the script is one
// graph: both views, the join, the query over it): every view's topic
// and the query's equal the file run of the same events. A query over
// the join grouped by the name alone runs too (behind a view repartition).
func TestRunKafkaViewJoinOver(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	names := []string{`"ann"`, `"bo \"b\""`, `null`, `"\u00e9"`}
	var ps, au strings.Builder
	for i := 0; i < 6000; i++ {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		if i%3 == 0 {
			fmt.Fprintf(&ps, `{"id":%d,"name":%s,"ts":"%s"}`+"\n", r.IntN(40), names[r.IntN(len(names))], ts)
		}
		fmt.Fprintf(&au, `{"seller":%d,"ts":"%s"}`+"\n", r.IntN(50), ts)
	}
	src := `CREATE SOURCE ps (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);`
	const over = `CREATE VIEW top AS SELECT id, TUMBLE_START(ws, INTERVAL '1' MINUTE) AS m, count(*) AS n, sum(a) AS a
  FROM j GROUP BY id, TUMBLE(ws, INTERVAL '1' MINUTE) EMIT FINAL;
`
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String())+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String())+"'")+kafkaViewJoinQueries+over)
	want := fileRunViews(t, []string{fileSQL}, 10, "np", "ns", "j", "top")

	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kafkaSQL := writeFile(t, "kj.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au'")+kafkaViewJoinQueries+over)
	for topic, parts := range map[string]string{"ps": "2", "au": "3"} {
		in := map[string]string{"ps": ps.String(), "au": au.String()}[topic]
		if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", parts); code != 0 {
			t.Fatalf("produce %s: exit %d: %s", topic, code, errs)
		}
	}
	run := []string{"run", kafkaSQL, "--sink", "kafka://" + addr + "/tout", "--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
	code, errs := kafkaCLI(t, "", run...)
	if n := 6000 + 2000; code != 0 || !strings.Contains(errs, fmt.Sprintf("%d events consumed, 0 malformed, 0 eval errors, 0 late", n)) || !strings.Contains(errs, "caught up") {
		t.Fatalf("run: exit %d, want %d events consumed, nothing late, caught up:\n%s", code, n, errs)
	}
	checkViewSinks(t, addr, map[string]string{"top": "tout", "j": "tout-j", "np": "tout-np", "ns": "tout-ns"}, want)

	byName := writeFile(t, "kn.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au'")+kafkaViewJoinQueries+
		"CREATE VIEW top2 AS SELECT name, count(*) AS n FROM j GROUP BY name;\n")
	// Grouped by less than the join's partition column: the join's
	// final rows reach the query through a view repartition.
	run = []string{"run", byName, "--sink", "kafka://" + addr + "/tout2", "--instance-id", "b", "--until-caught-up", "--log-level", "warn"}
	if code, errs := kafkaCLI(t, "", run...); code != 0 || !strings.Contains(errs, "caught up") {
		t.Errorf("a query over the join grouped by the name: exit %d: %s", code, errs)
	}
}

// TestRunKafkaViewJoinStreamSide runs a join of two views whose left
// side is an interval join of both sources (its right stream read from
// the second source's topic) and whose right side reads the first
// source: every view's topic and the query's equal the file run's.
func TestRunKafkaViewJoinStreamSide(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	var ps, au strings.Builder
	for i := 0; i < 3000; i++ {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		if i%3 == 0 {
			fmt.Fprintf(&ps, `{"id":%d,"ts":"%s"}`+"\n", r.IntN(40), ts)
		}
		fmt.Fprintf(&au, `{"seller":%d,"ts":"%s"}`+"\n", r.IntN(50), ts)
	}
	src := `CREATE SOURCE ps (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);`
	const queries = `
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM ps p JOIN au a ON a.seller = p.id AND a.ts BETWEEN p.ts AND p.ts + INTERVAL '5' SECOND
  GROUP BY p.id, TUMBLE(a.ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW np AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS v
  FROM ps GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW jp AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '10' SECOND) AS ws, sum(x.n) AS n, sum(y.v) AS v
  FROM pa x JOIN np y ON x.id = y.id AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '10' SECOND) EMIT FINAL;
`
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String())+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String())+"'")+queries)
	want := fileRunViews(t, []string{fileSQL}, 10, "pa", "np", "jp")
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
	if code, errs := kafkaCLI(t, "", run...); code != 0 || !strings.Contains(errs, "0 malformed, 0 eval errors, 0 late") || !strings.Contains(errs, "caught up") {
		t.Fatalf("run: exit %d, want nothing late, caught up:\n%s", code, errs)
	}
	checkViewSinks(t, addr, map[string]string{"jp": "jout", "pa": "jout-pa", "np": "jout-np"}, want)
}

// TestRunKafkaViewJoinSharedView runs a join of two views whose left
// side is a join of two views and whose right side is a view that join
// reads too (ns: both sides compute it, the left publishes it), then a
// late and a malformed event of ns's source: the Kafka run's summary
// (events, malformed, late), its --late-output and its warnings report
// each once, as the file run over the same events does.
func TestRunKafkaViewJoinSharedView(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 6))
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	var ps, au strings.Builder
	for i := 0; i < 3000; i++ {
		ts := base.Add(time.Duration(i)*15*time.Millisecond - time.Duration(r.IntN(1500))*time.Millisecond).Format("2006-01-02 15:04:05.000")
		if i%3 == 0 {
			fmt.Fprintf(&ps, `{"id":%d,"name":"n%d","ts":"%s"}`+"\n", r.IntN(40), r.IntN(2), ts)
		}
		fmt.Fprintf(&au, `{"seller":%d,"ts":"%s"}`+"\n", r.IntN(50), ts)
	}
	const tail = `{"seller":1,"ts":"2026-07-18 09:00:00"}` + "\n" + `{"seller":` + "\n"
	src := `CREATE SOURCE ps (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);
CREATE SOURCE au (seller BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (%s);`
	const nested = kafkaViewJoinQueries + `CREATE VIEW js AS SELECT x.id, TUMBLE_START(x.ws, INTERVAL '10' SECOND) AS ws, sum(y.a) AS a
  FROM j x JOIN ns y ON x.id = y.seller AND x.ws = y.ws GROUP BY x.id, TUMBLE(x.ws, INTERVAL '10' SECOND) EMIT FINAL;
`
	// The file run, over every event, the late and malformed last.
	fileSQL := writeFile(t, "j.sql", fmt.Sprintf(src, "format = 'jsonl', path = '"+writeFile(t, "ps.jsonl", ps.String())+"'",
		"format = 'jsonl', path = '"+writeFile(t, "au.jsonl", au.String()+tail)+"'")+nested)
	fileLate := filepath.Join(t.TempDir(), "late.jsonl")
	code, errs := kafkaCLI(t, "", "run", fileSQL, "--late-output", fileLate, "--output-dir", t.TempDir())
	if want := "4002 events read (ps 1000, au 3002), 1 malformed (ps 0, au 1), 0 eval errors, 1 late (ps 0, au 1)"; code != 0 || !strings.Contains(errs, want) {
		t.Fatalf("file run: exit %d, want %q:\n%s", code, want, errs)
	}
	want := lateEvents(t, fileLate)
	if len(want) != 1 || !strings.HasPrefix(want[0], "ns ") {
		t.Fatalf("file run: late %q", want)
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kafkaSQL := writeFile(t, "kj.sql", fmt.Sprintf(src, "connector = 'kafka', topic = 'ps', brokers = '"+addr+"'", "connector = 'kafka', topic = 'au'")+nested)
	for topic, in := range map[string]string{"ps": ps.String(), "au": au.String()} {
		if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/"+topic, "--partitions", "2"); code != 0 {
			t.Fatalf("produce %s: exit %d: %s", topic, code, errs)
		}
	}
	run := []string{"run", kafkaSQL, "--sink", "kafka://" + addr + "/jsout", "--instance-id", "a", "--until-caught-up", "--log-level", "warn"}
	if code, errs := kafkaCLI(t, "", run...); code != 0 || !strings.Contains(errs, "4000 events consumed, 0 malformed, 0 eval errors, 0 late") {
		t.Fatalf("run: exit %d, want 4000 events consumed, nothing late:\n%s", code, errs)
	}
	if code, errs := kafkaCLI(t, tail, "produce", "--to", "kafka://"+addr+"/au"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	late := filepath.Join(t.TempDir(), "late.jsonl")
	code, errs = kafkaCLI(t, "", append(run, "--late-output", late)...)
	if code != 0 || !strings.Contains(errs, "2 events consumed, 1 malformed, 0 eval errors, 1 late") || strings.Count(errs, "event not applied") != 1 {
		t.Fatalf("resumed run: exit %d, want 2 events consumed, 1 malformed, 1 late, one event not applied:\n%s", code, errs)
	}
	if got := lateEvents(t, late); !slices.Equal(got, want) {
		t.Errorf("late output %q, the file run's %q", got, want)
	}
}

// lateEvents reads a --late-output file: each line's query and event.
func lateEvents(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var ev struct{ Query, Event string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("late output line %q: %v", line, err)
		}
		out = append(out, ev.Query+" "+ev.Event)
	}
	return out
}
